// Internal: the host-side kernels of the copy nodes that the placement pass
// (tdf/placement.h) inserts where a value crosses devices.
//
//   CopyToDevice (attr `device`, e.g. "cuda:0"): host -> device. Enqueues the
//     copy on the device's stream and returns at once; kernels consuming the
//     result are queued behind it on the same stream. A value already on the
//     device is forwarded.
//   CopyToHost: device -> host. Waits for the copy (an event recorded after
//     it), so the CPU consumer sees the value, and reports errors kernels
//     recorded on the device. A host value is forwarded, so the pass may
//     insert it where it cannot tell statically where a value lives (after
//     control flow).
//
// Both are registered as CPU kernels: they run on the worker thread, which
// drives the device; they are plain C++ over DeviceBackend, so they exist in
// a build without CUDA too (and fail there with a clear Status).
#ifndef TDF_SRC_CUDA_COPY_KERNELS_H_
#define TDF_SRC_CUDA_COPY_KERNELS_H_

#include "absl/status/statusor.h"
#include "tdf/kernel.h"

namespace tdf {

void RegisterCopyKernels(KernelRegistry& registry);

// `t` on `to`: `t` itself when it is there already, else a copy that is
// complete when this returns (host -> device and device -> host alike), so
// the source may be released at once. Device errors that kernels recorded
// are not checked here (DeviceBackend::Synchronize does that).
absl::StatusOr<Tensor> CopyTensorTo(const Tensor& t, Device to);

}  // namespace tdf

#endif  // TDF_SRC_CUDA_COPY_KERNELS_H_
