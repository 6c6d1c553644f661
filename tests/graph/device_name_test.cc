// Device strings with ranks (tdf::DeviceName): tdf's "rank:R/..." form,
// TensorFlow's job/task names, and Device::Parse keeping the device part.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/tensor.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

DeviceName Parsed(const std::string& text) {
  absl::StatusOr<DeviceName> d = DeviceName::Parse(text);
  EXPECT_TRUE(d.ok()) << text << ": " << d.status();
  return d.ok() ? *d : DeviceName{};
}

TEST(DeviceName, LocalDevicesHaveNoRank) {
  EXPECT_EQ(Parsed("").rank, DeviceName::kAnyRank);
  EXPECT_FALSE(Parsed("").has_device);
  EXPECT_EQ(Parsed("cpu").device, Device::Cpu());
  EXPECT_TRUE(Parsed("cpu").has_device);
  EXPECT_EQ(Parsed("cuda:3").device, Device::Cuda(3));
  EXPECT_EQ(Parsed("gpu").device, Device::Cuda(0));
  EXPECT_EQ(Parsed("cuda:3").rank, DeviceName::kAnyRank);
}

TEST(DeviceName, RankAloneAndWithDevice) {
  DeviceName r = Parsed("rank:2");
  EXPECT_EQ(r.rank, 2);
  EXPECT_FALSE(r.has_device);
  EXPECT_EQ(r.device, Device::Cpu());
  DeviceName g = Parsed("rank:1/cuda:0");
  EXPECT_EQ(g.rank, 1);
  EXPECT_TRUE(g.has_device);
  EXPECT_EQ(g.device, Device::Cuda(0));
  EXPECT_EQ(Parsed("rank:0/cpu").device, Device::Cpu());
}

TEST(DeviceName, TensorFlowNamesMapTasksToRanks) {
  DeviceName w = Parsed("/job:worker/task:3/device:CPU:0");
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.device, Device::Cpu());
  EXPECT_TRUE(w.has_device);
  DeviceName g = Parsed("/job:worker/replica:0/task:1/device:GPU:1");
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.device, Device::Cuda(1));
  DeviceName local = Parsed("/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(local.rank, 0);
  EXPECT_EQ(local.device, Device::Cpu());
  EXPECT_EQ(Parsed("/job:localhost").rank, 0);
  // The legacy short forms name a device and no rank.
  EXPECT_EQ(Parsed("/cpu:0").rank, DeviceName::kAnyRank);
  EXPECT_EQ(Parsed("/gpu:1").device, Device::Cuda(1));
  EXPECT_EQ(Parsed("/device:GPU:0").device, Device::Cuda(0));
  DeviceName task_only = Parsed("/job:worker/task:2");
  EXPECT_EQ(task_only.rank, 2);
  EXPECT_FALSE(task_only.has_device);
}

TEST(DeviceName, CanonicalForm) {
  EXPECT_EQ(Parsed("").ToString(), "");
  EXPECT_EQ(Parsed("gpu:2").ToString(), "cuda:2");
  EXPECT_EQ(Parsed("rank:4").ToString(), "rank:4");
  EXPECT_EQ(Parsed("rank:4/gpu:1").ToString(), "rank:4/cuda:1");
  EXPECT_EQ(Parsed("/job:worker/task:2/device:GPU:0").ToString(), "rank:2/cuda:0");
  EXPECT_EQ(Parsed("/job:localhost/replica:0/task:0/device:CPU:0").ToString(), "rank:0/cpu");
  for (const char* s : {"cpu", "cuda:1", "rank:0", "rank:7/cpu", "rank:3/cuda:2"})
    EXPECT_EQ(Parsed(Parsed(s).ToString()), Parsed(s)) << s;
}

TEST(DeviceName, MalformedStringsAreErrorsThatNameThem) {
  for (const char* bad : {"tpu:0", "rank:", "rank:-1", "rank:x", "rank:1/", "rank:1/tpu", "rank:1/cuda:-2",
                          "/job:ps/task:0", "/job:worker/task:x", "/job:worker/replica:1/task:0",
                          "/job:localhost/task:1", "/job:worker/job:worker", "/device:TPU:0", "/job:worker/extra:1",
                          "cuda:", "/"}) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(d.status().message(), HasSubstr(absl::StrCat("unknown device '", bad, "'"))) << bad;
  }
  EXPECT_THAT(DeviceName::Parse("/job:ps/task:0").status().message(), HasSubstr("job 'ps' does not map to a rank"));
}

// A one-process run ignores the rank: Device::Parse gives the device part.
TEST(DeviceName, DeviceParseKeepsTheDevicePart) {
  EXPECT_EQ(*Device::Parse("rank:3"), Device::Cpu());
  EXPECT_EQ(*Device::Parse("rank:1/cuda:2"), Device::Cuda(2));
  EXPECT_EQ(*Device::Parse("/job:worker/task:5/device:GPU:1"), Device::Cuda(1));
  EXPECT_EQ(*Device::Parse("cuda:1"), Device::Cuda(1));
  EXPECT_FALSE(Device::Parse("rank:1/tpu:0").ok());
}

}  // namespace
}  // namespace tdf
