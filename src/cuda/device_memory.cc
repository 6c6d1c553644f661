// base/device_memory.h over DeviceBackend (device_backend.cu with CUDA,
// device_backend_none.cc without).
#include "base/device_memory.h"

#include "cuda/device_backend.h"
#include "tdf/tensor.h"

namespace tdf {
namespace device_memory {

Buffer* Allocate(size_t bytes, Device device) { return DeviceBackend::AllocateBuffer(bytes, device); }

absl::Status Memset(void* dst, int value, size_t bytes, Device device) {
  return DeviceBackend::Memset(dst, value, bytes, device);
}

absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, Device device) {
  return DeviceBackend::CopyDeviceToDevice(dst, src, bytes, device);
}

int DeviceCount() { return DeviceBackend::DeviceCount(); }
std::string Describe() { return DeviceBackend::Describe(); }

}  // namespace device_memory
}  // namespace tdf
