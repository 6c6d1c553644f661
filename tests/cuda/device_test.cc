// The device backend seam: device discovery and host <-> device copies. On a
// machine without a GPU (or in a build without CUDA) it checks that the
// backend says so clearly and refuses device work with a Status instead of
// crashing.
#include "cuda/device_backend.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/tensor.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(DeviceBackend, CountIsNonNegativeAndMatchesDescription) {
  int count = DeviceBackend::DeviceCount();
  ASSERT_GE(count, 0);
  std::string description = DeviceBackend::Describe();
  if (count == 0) {
    EXPECT_THAT(description, StartsWith("no CUDA device"));
  } else {
    EXPECT_THAT(description, HasSubstr("CUDA device"));
    EXPECT_THAT(description, HasSubstr("cuda:0"));
  }
  // Asking twice gives the same answer (discovery is done once).
  EXPECT_EQ(DeviceBackend::DeviceCount(), count);
}

TEST(DeviceBackend, BuildWithoutCudaHasNoDevices) {
  if (DeviceBackend::CompiledWithCuda()) GTEST_SKIP() << "built with CUDA";
  EXPECT_EQ(DeviceBackend::DeviceCount(), 0);
  EXPECT_THAT(DeviceBackend::Describe(), HasSubstr("without CUDA"));
}

TEST(DeviceBackend, NoDeviceRefusesDeviceWork) {
  if (DeviceBackend::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device exists: " << DeviceBackend::Describe();
  EXPECT_EQ(DeviceBackend::AllocateBuffer(64, Device::Cuda(0)), nullptr);
  char host[8] = {};
  absl::Status s = DeviceBackend::CopyHostToDevice(host, host, sizeof(host), Device::Cuda(0));
  EXPECT_FALSE(s.ok());
  s = DeviceBackend::Memset(host, 0, sizeof(host), Device::Cuda(0));
  EXPECT_FALSE(s.ok());

  absl::StatusOr<Tensor> t = Tensor::Zeros(DType::kFloat32, Shape({4}), Device::Cuda(0));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("cuda:0"));
}

TEST(DeviceBackend, MissingDeviceIndexIsAnError) {
  int count = DeviceBackend::DeviceCount();
  EXPECT_EQ(DeviceBackend::AllocateBuffer(64, Device::Cuda(count)), nullptr);
  char host[8] = {};
  EXPECT_FALSE(DeviceBackend::CopyDeviceToHost(host, host, sizeof(host), Device::Cuda(count)).ok());
}

TEST(DeviceBackend, HostDeviceHostRoundTrip) {
  if (DeviceBackend::DeviceCount() == 0) GTEST_SKIP() << DeviceBackend::Describe();
  const Device gpu = Device::Cuda(0);
  std::vector<int32_t> in(1000);
  std::iota(in.begin(), in.end(), -500);
  const size_t bytes = in.size() * sizeof(int32_t);

  Buffer* a = DeviceBackend::AllocateBuffer(bytes, gpu);
  ASSERT_NE(a, nullptr);
  Buffer* b = DeviceBackend::AllocateBuffer(bytes, gpu);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->device(), gpu);
  EXPECT_EQ(a->bytes(), bytes);

  ASSERT_TRUE(DeviceBackend::CopyHostToDevice(a->data(), in.data(), bytes, gpu).ok());
  ASSERT_TRUE(DeviceBackend::CopyDeviceToDevice(b->data(), a->data(), bytes, gpu).ok());
  std::vector<int32_t> out(in.size(), 7);
  ASSERT_TRUE(DeviceBackend::CopyDeviceToHost(out.data(), b->data(), bytes, gpu).ok());
  EXPECT_EQ(out, in);

  ASSERT_TRUE(DeviceBackend::Memset(b->data(), 0, bytes, gpu).ok());
  ASSERT_TRUE(DeviceBackend::CopyDeviceToHost(out.data(), b->data(), bytes, gpu).ok());
  EXPECT_EQ(out, std::vector<int32_t>(in.size(), 0));

  a->Unref();
  b->Unref();
}

TEST(DeviceBackend, ZerosTensorOnDevice) {
  if (DeviceBackend::DeviceCount() == 0) GTEST_SKIP() << DeviceBackend::Describe();
  absl::StatusOr<Tensor> t = Tensor::Zeros(DType::kFloat32, Shape({3, 5}), Device::Cuda(0));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->device(), Device::Cuda(0));
  std::vector<float> host(15, 1.0f);
  ASSERT_TRUE(DeviceBackend::CopyDeviceToHost(host.data(), t->raw_data(), t->bytes(), Device::Cuda(0)).ok());
  EXPECT_EQ(host, std::vector<float>(15, 0.0f));
}

}  // namespace
}  // namespace tdf
