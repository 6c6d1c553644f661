// Internal: the seam between host code and the CUDA backend. Public headers
// expose no CUDA types (style R11); this header is plain C++ and is
// implemented by device_backend.cu in a CUDA build and by
// device_backend_none.cc otherwise.
//
// Each CUDA device has one stream (src/cuda/cuda_device.h). Kernels are
// launched on it asynchronously; the copy functions below are stream-ordered
// and return once the destination is filled (the *Async variant excepted),
// so a host consumer never sees a partial result. Device buffers come from a
// caching allocator: freeing a buffer returns it to a size-bucketed free list
// of its device, and a later allocation of the same bucket reuses it without
// calling cudaMalloc. Reuse is safe because every user of a device's memory
// is ordered on the device's single stream.
#ifndef TDF_SRC_CUDA_DEVICE_BACKEND_H_
#define TDF_SRC_CUDA_DEVICE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "tdf/kernel.h"
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
  // Enqueues a host -> device copy on the device's stream and returns without
  // waiting for the DMA. `src` may be reused as soon as this returns (the
  // CUDA runtime stages pageable memory before returning).
  static absl::Status CopyHostToDeviceAsync(void* dst, const void* src, size_t bytes, Device device);

  // The device's stream as an opaque pointer (a cudaStream_t), for
  // KernelContext::set_device_context; nullptr without CUDA or device.
  static void* Stream(Device device);
  // Waits for all work queued on the device's stream, then reports errors
  // that kernels recorded on the device instead of failing at launch (an
  // integer division by zero, a Gather index out of range): the CUDA
  // analogue of the CPU kernels' InvalidArgument. Only the errors of
  // launches made for `run_id` (KernelSite::run_id; 0: launches made
  // outside any run) are reported; other runs' stay for their own.
  static absl::Status Synchronize(Device device, uint64_t run_id = 0);
  // target[indices[j], ...] += updates[j, ...] (repeats accumulate), queued
  // on the stream of target's device without waiting: target itself,
  // updated in place, when nothing else holds its buffer, else an updated
  // copy. target and updates live on the device; indices (int32/int64) may
  // be host tensors. The indices are checked on the device: one outside
  // [0, rows) adds nothing at all and is reported by the next Synchronize
  // for ctx's run, naming ctx's site. Shapes and dtypes are the caller's to
  // check.
  static absl::StatusOr<Tensor> ScatterAddRows(const Tensor& target, const Tensor& indices, const Tensor& updates,
                                               const KernelContext& ctx);

  struct AllocatorStats {
    int64_t driver_allocations = 0;  // cudaMalloc calls
    int64_t cache_hits = 0;          // allocations served from a free list
    int64_t bytes_in_use = 0;        // bucket bytes handed out and not freed
    int64_t bytes_cached = 0;        // bucket bytes on the free lists
  };
  // Zeros without CUDA or when the device was never used.
  static AllocatorStats GetAllocatorStats(Device device);
  // Returns every cached block to the driver (cudaFree).
  static absl::Status EmptyCache(Device device);
};

}  // namespace tdf

#endif  // TDF_SRC_CUDA_DEVICE_BACKEND_H_
