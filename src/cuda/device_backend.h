// Internal: the seam between host code and the CUDA backend. Public headers
// expose no CUDA types (style R11); this header is plain C++ and is
// implemented by device_backend.cu in a CUDA build and by
// device_backend_none.cc otherwise.
#ifndef TDF_SRC_CUDA_DEVICE_BACKEND_H_
#define TDF_SRC_CUDA_DEVICE_BACKEND_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "tdf/tensor.h"

namespace tdf {

class DeviceBackend {
 public:
  // True when tdf was built with CUDA.
  static bool CompiledWithCuda();
  // Number of usable CUDA devices (0 without CUDA, driver or device).
  static int DeviceCount();
  // One line for logs: "2 CUDA devices: ..." or "no CUDA device: <reason>".
  static std::string Describe();

  // Returns nullptr when the device cannot allocate.
  static Buffer* AllocateBuffer(size_t bytes, Device device);
  static absl::Status Memset(void* dst, int value, size_t bytes, Device device);
  static absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes, Device device);
  static absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes, Device device);
  static absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, Device device);
};

}  // namespace tdf

#endif  // TDF_SRC_CUDA_DEVICE_BACKEND_H_
