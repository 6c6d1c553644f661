// The device memory that tensors need, below both src/graph (Tensor, Buffer)
// and the CUDA backend (src/cuda), so that the graph layer never includes
// the backend: src/cuda/device_memory.cc implements these over
// DeviceBackend, in CUDA and CPU-only builds alike (without CUDA every call
// fails or reports no device).
#ifndef TDF_SRC_BASE_DEVICE_MEMORY_H_
#define TDF_SRC_BASE_DEVICE_MEMORY_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace tdf {

class Buffer;   // tdf/tensor.h
struct Device;  // tdf/tensor.h

namespace device_memory {

// A buffer of `bytes` on a non-CPU `device`; nullptr when it cannot allocate.
Buffer* Allocate(size_t bytes, Device device);
absl::Status Memset(void* dst, int value, size_t bytes, Device device);
absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, Device device);
// Usable devices (0 without CUDA, driver or device), and one line saying
// which or why none.
int DeviceCount();
std::string Describe();

}  // namespace device_memory
}  // namespace tdf

#endif  // TDF_SRC_BASE_DEVICE_MEMORY_H_
