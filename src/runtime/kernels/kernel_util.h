// Internal helpers shared by the CPU kernel files (src/runtime/kernels/*.cc),
// some of them (axes, strides, the input checks) also by their CUDA twins
// (src/cuda/*.cu): nothing here names a CUDA type.
//
// Everything here is either trivially inlinable (used on the scalar fast
// paths, which the executor runs billions of times), an out-of-line error
// builder (cold: only runs when a kernel fails) or an out-of-line check of
// a kernel's input shapes (once per firing, on the slow paths).
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

// Registers a kernel class without attributes (made by CreateSimple).
template <typename Kernel>
void RegisterSimpleCpu(KernelRegistry& registry, const std::string& op) {
  registry.Register(op, Device::Type::kCpu, [](const NodeDef& node) { return CreateSimple<Kernel>(node); });
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

// Calls fn(U{}) with an unsigned integer type as wide as one element of
// `dtype` (1, 4 or 8 bytes), for kernels that only move elements.
template <typename Fn>
void DispatchBySize(DType dtype, Fn&& fn) {
  switch (DTypeSize(dtype)) {
    case 1: fn(uint8_t{}); break;
    case 4: fn(uint32_t{}); break;
    default: fn(uint64_t{}); break;
  }
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

// ---- Input checks shared by a CPU kernel and its CUDA twin ----
//
// Defined in kernel_util.cc. Each returns the first error in the order the
// CPU kernel has always checked, with its message and code, so the two
// kernels fail alike. They read dtypes and shapes only, never tensor data
// (a CUDA kernel's inputs live on the device): checks that read data, such
// as index ranges, stay in the kernels. The kernel checks its arity and
// where its inputs are first (CheckInputs on the CPU, CheckArity and
// CheckDeviceInputs on CUDA; ConcatGrad's arity is CheckConcatGradArity).

// "input i is an invalid (empty) tensor".
absl::Status InvalidInputError(int input);

// Concat and ConcatGrad: the parts along `axis` (normalized), their total
// size along it, and the products of the dims before (outer) and after
// (inner) it. These wrap rather than overflow: a product of some dims can
// only overflow when another dim is 0, and then there is nothing to copy.
struct ConcatGeometry {
  int axis;
  int64_t axis_total;
  int64_t outer, inner;
};
// Concat(x_0, ..., x_{n-1}): inputs 0..n-1 of ctx (n >= 1) of one dtype and
// rank >= 1, equal but along `axis`.
absl::StatusOr<ConcatGeometry> CheckConcat(const KernelContext& ctx, int64_t axis);
// ConcatGrad(dy, x_0, ..., x_{n-1}): at least one part and one output per
// part.
absl::Status CheckConcatGradArity(const KernelContext& ctx);
// ConcatGrad's shapes: dy of rank >= 1; each x_k (which gives only its
// shape) of dy's shape but along `axis`, the x_k adding up to dy's dim there.
absl::StatusOr<ConcatGeometry> CheckConcatGrad(const KernelContext& ctx, int64_t axis);

// Slice and SliceGrad: the slice's shape, the row-major offset of its first
// element in x, and x's row-major strides.
struct SliceGeometry {
  Shape slice;
  int64_t base = 0;
  Dims strides;
};
// The attrs of `op` (Slice, SliceGrad): begin and size, of one length.
struct SliceAttrs {
  std::vector<int64_t> begin, size;
};
absl::StatusOr<SliceAttrs> GetSliceAttrs(const NodeDef& node, const char* op);
// The slice of `x` at `begin` of `size` (a size of -1: to the end of the
// dim). `what` names x in the rank message ("the input", "x").
absl::StatusOr<SliceGeometry> CheckSlice(const char* op, const char* what, const Shape& x,
                                         absl::Span<const int64_t> begin, absl::Span<const int64_t> size);
// SliceGrad(x, dy): the slice of x, and dy of its shape and of x's dtype.
absl::StatusOr<SliceGeometry> CheckSliceGrad(const Tensor& x, const Tensor& dy, absl::Span<const int64_t> begin,
                                             absl::Span<const int64_t> size);

// GatherGrad(params, indices, dy): params (which gives only its shape) of
// rank >= 1 and dy's dtype, int32 or int64 indices, dy of Gather(params,
// indices)'s shape. Returns `axis`, normalized.
absl::StatusOr<int> CheckGatherGrad(const Tensor& params, const Tensor& indices, const Tensor& dy, int64_t axis);

// MatMul(a, b) and MatMulAdd(a, b, ...): the product is [m, n], k deep.
struct MatMulGeometry {
  int64_t m, k, n;
};
// a and b: one floating dtype, rank 2, equal inner dims.
absl::StatusOr<MatMulGeometry> CheckMatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                                           const char* op);
// MatMulAdd's addends (inputs 2.. of ctx): each of `dtype` and `shape`.
absl::Status CheckMatMulAddends(const KernelContext& ctx, DType dtype, const Shape& shape);

// Indexed rows (indexed_rows.cc): a table P [R, ...] and rows [m, 1 + D].
// P's rows R and the size D of one row; checks that P is a float table
// whose row indices fit the encoding (int32 bits in a float32).
absl::Status CheckIndexedRowsTable(const Tensor& like, const char* op, int64_t* rows, int64_t* row_size);
// Input `input` of `op`, t, is [m, 1 + D] (its indices are not read).
absl::Status CheckIndexedRowsShape(const Tensor& t, int64_t row_size, const char* op, int input);
// IndexedRows(P, indices, dy): P's table checks, int32 or int64 indices, dy
// of P's dtype and Gather(P, indices)'s shape.
absl::Status CheckIndexedRows(const Tensor& like, const Tensor& indices, const Tensor& dy, int64_t* rows,
                              int64_t* row_size);

// Outer-product rows (matmul.cc): a weight W [K, N] and rows [m, K + N].
// `like` is a rank-2 [K, N] of a floating dtype.
absl::Status CheckOuterRowsWeight(const Tensor& like, const char* op);
// ... and `rows` is [m, K + N] of the same dtype.
absl::Status CheckOuterRows(const Tensor& rows, const Tensor& like, const char* op);
// OuterRowsConcat(W, rows_0, ..., rows_{n-1}), n >= 0: the non-empty rows
// inputs, m rows in all, and cap = min(K, N), the most rows a sum keeps.
struct OuterRowsConcatGeometry {
  absl::InlinedVector<const Tensor*, 4> pieces;
  int64_t m = 0;
  int64_t K = 0, N = 0, cap = 0;
};
absl::StatusOr<OuterRowsConcatGeometry> CheckOuterRowsConcat(const KernelContext& ctx);

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
void RegisterElementwiseBinaryKernels(KernelRegistry& registry);
void RegisterElementwiseUnaryKernels(KernelRegistry& registry);
void RegisterElementwiseNaryKernels(KernelRegistry& registry);
void RegisterGraphOpKernels(KernelRegistry& registry);
void RegisterReductionKernels(KernelRegistry& registry);
void RegisterMatMulKernels(KernelRegistry& registry);
void RegisterArrayKernels(KernelRegistry& registry);
void RegisterNnKernels(KernelRegistry& registry);
void RegisterIndexedRowsKernels(KernelRegistry& registry);

}  // namespace tdf

#endif  // TDF_RUNTIME_KERNELS_KERNEL_UTIL_H_
