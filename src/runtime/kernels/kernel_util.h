// Internal helpers shared by the CPU kernel files (src/runtime/kernels/*.cc).
//
// Everything here is either trivially inlinable (used on the scalar fast
// paths, which the executor runs billions of times) or an out-of-line error
// builder (cold: only runs when a kernel fails).
#ifndef TDF_RUNTIME_KERNELS_KERNEL_UTIL_H_
#define TDF_RUNTIME_KERNELS_KERNEL_UTIL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tdf/kernel.h"
#include "tdf/status.h"
#include "tdf/tensor.h"

namespace tdf {
namespace kernels {

// Registers a kernel class constructed from the NodeDef. `Kernel` must have a
// static `Create(const NodeDef&)` returning StatusOr<unique_ptr<OpKernel>>.
template <typename Kernel>
void RegisterCpu(KernelRegistry& registry, const std::string& op) {
  registry.Register(op, Device::Type::kCpu, [](const NodeDef& node) { return Kernel::Create(node); });
}

// For kernels without attributes.
template <typename Kernel>
absl::StatusOr<std::unique_ptr<OpKernel>> CreateSimple(const NodeDef&) {
  return std::unique_ptr<OpKernel>(std::make_unique<Kernel>());
}

// Intra-op parallelism: splits [0, n) into contiguous blocks and runs
// `block(begin, end)` on them, on the idle workers of the run's arena (a
// session's num_workers) when there are any and the work is large enough
// to pay for the hand-off (`cost` is the whole range's, in multiply-adds);
// otherwise, or with one worker, one call on [0, n), inline. The calling
// worker runs a block too, and takes nothing else while it waits
// (isolated), so a kernel never finds another firing nested inside it.
int64_t ParallelBlocks(int64_t n, double cost);
void RunBlocks(int64_t n, int64_t blocks, const std::function<void(int64_t, int64_t)>& block);
template <typename F>
void ParallelFor(int64_t n, double cost, F&& block) {
  const int64_t blocks = ParallelBlocks(n, cost);
  if (blocks > 1) {
    RunBlocks(n, blocks, block);
  } else if (n > 0) {
    block(int64_t{0}, n);  // the common case: no std::function, no task
  }
}

// ---- Cold error builders (defined in kernel_util.cc). ----

// "expects N inputs, got M".
absl::Status ArityError(int want, int got);
// "expects at least N inputs, got M".
absl::Status MinArityError(int want, int got);
// "input i is on cuda:0; CPU kernels need CPU tensors".
absl::Status NotOnCpuError(int input, Device device);
// "dtype mismatch: input 0 is int64, input 1 is float32".
absl::Status DTypeMismatchError(DType a, DType b);
// "<what> does not support dtype bool".
absl::Status UnsupportedDTypeError(const char* what, DType dtype);
// "incompatible shapes for broadcasting: [2,3] vs [4]".
absl::Status BroadcastError(const Shape& a, const Shape& b);
// "axis 3 out of range for rank 2".
absl::Status AxisError(int64_t axis, int rank);

// FailedPrecondition unless every input is a CPU tensor. Inline scalars are
// always on the CPU, so this only touches heap tensors.
inline absl::Status CheckCpuInputs(const KernelContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (ABSL_PREDICT_FALSE(!t.is_inline_scalar() && !t.device().is_cpu())) return NotOnCpuError(i, t.device());
  }
  return absl::OkStatus();
}

// Validates arity then CPU placement: the common prologue of a slow path.
inline absl::Status CheckInputs(const KernelContext& ctx, int want) {
  if (ABSL_PREDICT_FALSE(ctx.num_inputs() != want)) return ArityError(want, ctx.num_inputs());
  return CheckCpuInputs(ctx);
}

// Normalizes a possibly negative axis into [0, rank).
inline absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return AxisError(axis, rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// ---- Broadcasting ----

using Dims = absl::InlinedVector<int64_t, 6>;

// NumPy broadcasting of several shapes: right-aligned; each dim equal or 1.
absl::StatusOr<Shape> BroadcastShapes(absl::Span<const Shape* const> shapes);

// Element strides of `shape` viewed in `out`'s (right-aligned) index space:
// 0 for a broadcast dim. `shape` must broadcast to `out`.
Dims BroadcastStrides(const Shape& shape, const Shape& out);

// Calls fn(out_index, offset_0, ..., offset_{N-1}) for every element of
// `out` in row-major order, where offset_k is the element index in input k
// (strides from BroadcastStrides). The innermost dim runs in a tight loop.
template <size_t N, typename Fn>
void ForEachBroadcast(const Shape& out, const std::array<Dims, N>& strides, Fn&& fn) {
  const int rank = out.rank();
  const int64_t total = out.num_elements();
  if (total == 0) return;
  if (rank == 0) {
    std::array<int64_t, N> off{};
    std::apply([&](auto... o) { fn(int64_t{0}, o...); }, off);
    return;
  }
  const int64_t inner = out.dim(rank - 1);
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][rank - 1];
  Dims index(rank, 0);
  std::array<int64_t, N> base{};
  for (int64_t o = 0; o < total; o += inner) {
    std::array<int64_t, N> off = base;
    for (int64_t i = 0; i < inner; ++i) {
      std::apply([&](auto... x) { fn(o + i, x...); }, off);
      for (size_t k = 0; k < N; ++k) off[k] += inner_stride[k];
    }
    // Odometer over the outer dims.
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < out.dim(d)) {
        for (size_t k = 0; k < N; ++k) base[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) base[k] -= strides[k][d] * (out.dim(d) - 1);
      index[d] = 0;
    }
  }
}

// Row-major element strides of `shape`.
Dims RowMajorStrides(const Shape& shape);

// ---- Zeros ----

// Zeros of `dtype` and `shape` on the CPU. A large tensor (a page or more)
// is a view of one process-wide read-only zero mapping: no allocation, no
// memset, no physical memory (gradients of unused branches are mostly this).
// Tensors are immutable, so sharing is invisible; a write through
// mutable_data() faults instead of corrupting it. Small ones are ordinary.
absl::StatusOr<Tensor> Zeros(DType dtype, const Shape& shape);
// True for a tensor made by Zeros that shares the zero mapping: every
// element is zero and kernels may skip reading it (AddN does).
bool IsSharedZeros(const Tensor& t);

// ---- Wrapping integer arithmetic (signed overflow is UB in C++). ----

template <typename T>
inline T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
inline T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T>
inline T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

}  // namespace kernels

// Per-file registration hooks, called from RegisterCpuKernels.
void RegisterElementwiseKernels(KernelRegistry& registry);
void RegisterReductionKernels(KernelRegistry& registry);
void RegisterMatMulKernels(KernelRegistry& registry);
void RegisterArrayKernels(KernelRegistry& registry);
void RegisterNnKernels(KernelRegistry& registry);
void RegisterIndexedRowsKernels(KernelRegistry& registry);

}  // namespace tdf

#endif  // TDF_RUNTIME_KERNELS_KERNEL_UTIL_H_
