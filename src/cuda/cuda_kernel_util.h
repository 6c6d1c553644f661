// Internal (CUDA builds only): helpers shared by the CUDA kernel files.
//
// A CUDA kernel object (an OpKernel) is created for a node with the device
// parsed from NodeDef.device (cuda:0 when the node names none). Compute()
// checks inputs on the host (dtypes, shapes: all known without touching the
// device), allocates outputs on the device and launches on the stream without
// waiting. Errors that depend on element values (integer division by zero,
// Gather indices) are recorded in the launch's error word (CheckedLaunch)
// and reported, naming the node and tag, by the next
// DeviceBackend::Synchronize (CopyToHost does one).
#ifndef TDF_SRC_CUDA_CUDA_KERNEL_UTIL_H_
#define TDF_SRC_CUDA_CUDA_KERNEL_UTIL_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cuda/cuda_device.h"
#include "tdf/kernel.h"
#include "tdf/status.h"
#include "tdf/tensor.h"

// nvcc warns (#2810) that `status = F()` discards the Status& returned by
// the assignment, because absl::Status is a [[nodiscard]] class; host
// compilers do not, and nothing is discarded.
#pragma nv_diag_suppress 2810

namespace tdf {
namespace cuda {

// Broadcasting and strided copies support tensors up to this rank.
inline constexpr int kMaxRank = 8;

// Passed by value to kernels.
struct Strides {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
};

// What a kernel needs to launch: the device and the stream.
struct Launch {
  CudaDevice* device;
  cudaStream_t stream;
  Device where;
};

inline absl::StatusOr<Launch> PrepareLaunch(const KernelContext& ctx, Device device) {
  TDF_ASSIGN_OR_RETURN(CudaDevice * dev, CudaDevice::Get(device.index));
  TDF_RETURN_IF_ERROR(dev->MakeCurrent());
  return Launch{dev, StreamFor(ctx.device_context(), *dev), device};
}

// FailedPrecondition unless every input is valid and on `device`: placement
// inserts CopyToDevice for values that come from elsewhere.
inline absl::Status CheckDeviceInputs(const KernelContext& ctx, Device device, int first = 0, int last = -1) {
  if (last < 0) last = ctx.num_inputs();
  for (int i = first; i < last; ++i) {
    const Tensor& t = ctx.input(i);
    if (!t.valid()) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is an invalid (empty) tensor"));
    if (t.device() != device)
      return absl::FailedPreconditionError(absl::StrCat("input ", i, " is on ", t.device().ToString(),
                                                        "; this CUDA kernel runs on ", device.ToString(),
                                                        " (a CopyToDevice is missing)"));
  }
  return absl::OkStatus();
}

inline absl::Status CheckArity(const KernelContext& ctx, int want) {
  if (ctx.num_inputs() != want)
    return absl::InvalidArgumentError(absl::StrCat("expects ", want, " inputs, got ", ctx.num_inputs()));
  return absl::OkStatus();
}

inline absl::Status UnsupportedDType(const char* what, DType dtype) {
  return absl::InvalidArgumentError(absl::StrCat(what, " does not support dtype ", DTypeName(dtype)));
}

inline absl::Status RankTooHigh(const char* what, int rank) {
  return absl::UnimplementedError(
      absl::StrCat(what, " on CUDA supports tensors up to rank ", kMaxRank, ", got rank ", rank));
}

// Grid for a grid-stride loop over n elements.
inline unsigned int GridFor(int64_t n, int block = 256) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535 * 8)));
}

// The device of a kernel: the node's (cuda:N), else cuda:0.
inline Device KernelDevice(const NodeDef& node) {
  absl::StatusOr<Device> d = Device::Parse(node.device);
  if (d.ok() && d->type == Device::Type::kCuda) return *d;
  return Device::Cuda(0);
}

// Registers Kernel (with a static Create(const NodeDef&, Device)) for `op`.
template <typename Kernel>
void RegisterCuda(KernelRegistry& registry, const std::string& op) {
  registry.Register(op, Device::Type::kCuda,
                    [](const NodeDef& node) { return Kernel::Create(node, KernelDevice(node)); });
}

// For kernels constructed from the device alone.
template <typename Kernel>
void RegisterCudaSimple(KernelRegistry& registry, const std::string& op) {
  registry.Register(op, Device::Type::kCuda, [](const NodeDef& node) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(std::make_unique<Kernel>(KernelDevice(node)));
  });
}

// out [m, n] = op(a) op(b), or out += op(a) op(b) with `accumulate`, for
// float32/float64 operands already checked (m, n, k > 0, each < 2^31):
// one plain kernel for small products, cuBLAS otherwise. Used by MatMul and
// MatMulAdd (matmul_kernels.cu).
absl::Status GemmInto(const Launch& launch, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                      bool accumulate, Tensor& out);

// Per-file registration hooks (called from RegisterCudaKernels).
void RegisterCudaElementwiseKernels(KernelRegistry& registry);
void RegisterCudaReductionKernels(KernelRegistry& registry);
void RegisterCudaArrayKernels(KernelRegistry& registry);
void RegisterCudaMatMulKernels(KernelRegistry& registry);
void RegisterCudaGradientKernels(KernelRegistry& registry);
void RegisterCudaRowKernels(KernelRegistry& registry);

}  // namespace cuda
}  // namespace tdf

#endif  // TDF_SRC_CUDA_CUDA_KERNEL_UTIL_H_
