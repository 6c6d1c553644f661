// The device backend of a build without CUDA: no devices, every device
// operation fails with a clear Status.
#include "cuda/device_backend.h"

namespace tdf {
namespace {
absl::Status NoCuda() {
  return absl::FailedPreconditionError("tdf was built without CUDA (TDF_ENABLE_CUDA=OFF)");
}
}  // namespace

bool DeviceBackend::CompiledWithCuda() { return false; }
int DeviceBackend::DeviceCount() { return 0; }
std::string DeviceBackend::Describe() { return "no CUDA device: tdf was built without CUDA"; }
Buffer* DeviceBackend::AllocateBuffer(size_t, Device) { return nullptr; }
absl::Status DeviceBackend::Memset(void*, int, size_t, Device) { return NoCuda(); }
absl::Status DeviceBackend::CopyHostToDevice(void*, const void*, size_t, Device) { return NoCuda(); }
absl::Status DeviceBackend::CopyDeviceToHost(void*, const void*, size_t, Device) { return NoCuda(); }
absl::Status DeviceBackend::CopyDeviceToDevice(void*, const void*, size_t, Device) { return NoCuda(); }
absl::Status DeviceBackend::CopyHostToDeviceAsync(void*, const void*, size_t, Device) { return NoCuda(); }
void* DeviceBackend::Stream(Device) { return nullptr; }
absl::Status DeviceBackend::Synchronize(Device, uint64_t) { return NoCuda(); }
absl::StatusOr<Tensor> DeviceBackend::ScatterAddRows(const Tensor&, const Tensor&, const Tensor&,
                                                     const KernelContext&) {
  return NoCuda();
}
DeviceBackend::AllocatorStats DeviceBackend::GetAllocatorStats(Device) { return {}; }
absl::Status DeviceBackend::EmptyCache(Device) { return absl::OkStatus(); }

}  // namespace tdf
