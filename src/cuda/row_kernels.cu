// CUDA kernels for the row gradients that the autodiff emits for recursive
// functions (autodiff.cc, RowsKind), so that the gradient of a recursive
// network placed on a GPU stays there: a call adds its rows to its caller's
// on the device, and nothing is read back on the host per invocation.
//
//   indexed rows (a table P [R, ...] read by Gather; CPU twins in
//   src/runtime/kernels/indexed_rows.cc): rows [idx | dy row] of one
//   [m, 1 + D] tensor, the index held bit for bit in the first element (an
//   int32 in a float32, an int64 in a float64);
//   outer-product rows (a weight W [K, N] used as x W; CPU twins in
//   src/runtime/kernels/matmul.cc): rows [x_i | g_i] of one [m, K + N]
//   tensor standing for sum_i x_i^T g_i.
//
// Attributes (none), dtypes (float32, float64), arity, shape checks, their
// status codes and empty inputs are the CPU kernels'. Inputs that give only
// their shape (P, W: the `like` inputs) may live on any device, like
// GatherGrad's params; rows and dy must be on the kernel's device.
//
//   IndexedRows        one kernel over the [count, 1 + D] output: the index
//                      column from `indices`, the rest copied from dy. The
//                      indices may be a host tensor (the placement pass
//                      keeps integer arithmetic on the host) or a device
//                      tensor; host indices are checked on the host (the
//                      CPU's message) and copied to the device with an
//                      asynchronous cudaMemcpyAsync on the launch stream,
//                      as CopyToDevice does.
//   IndexedRowsConcat  one non-empty input of at most R rows is shared, as
//                      on the CPU; otherwise up to R rows are concatenated
//                      by one copy kernel per 8 inputs; more than R rows are
//                      compacted (see below).
//   IndexedRowsSum     zeros of P's shape and one kernel that atomicAdds
//                      every row at its index.
//   IndexedRowsSplit   one kernel writes both outputs, int64 indices [m] and
//                      values [m, P's row shape], both on the device: their
//                      consumer is ScatterAdd, whose updates (-lr * values)
//                      are computed on the device too.
//   OuterRowsConcat    shared or concatenated as above (at most min(K, N)
//                      rows); more are compacted exactly as on the CPU: the
//                      dense sum formed by one cuBLAS GEMM per input
//                      (beta 1 after the first) straight into the output's
//                      columns, beside an identity block.
//   OuterRowsSum       one cuBLAS GEMM: [K, N] = X^T G over the rows [X | G].
//
// Where this deliberately differs from the CPU:
//
//   1. IndexedRowsConcat of more than R rows. The CPU compacts to one row
//      per distinct index, in index order: a data-dependent size, which the
//      host could only learn by waiting for the device. Here the result is
//      always all R rows, index r in row r, zeros plus every input row
//      added at its index (atomicAdd, so the float sum order varies). Every
//      reader gives the same dense gradient as the CPU's result (up to
//      rounding): IndexedRowsSum scatters both to the same table,
//      IndexedRowsSplit -> ScatterAdd adds zero rows for the indices no
//      input touched (x + (-lr) * 0 leaves x bit for bit unchanged for
//      lr > 0), and a further concatenation carries R rows instead of the
//      distinct ones (so it compacts again sooner, to the same R rows).
//      OuterRowsConcat's compaction depends on sizes alone on the CPU too,
//      and is the same here (up to rounding: cuBLAS instead of Eigen).
//   2. Index range errors. The CPU checks every index of every input before
//      it writes anything and fails with InvalidArgument. Here an index out
//      of range can only be seen by a kernel: the row is skipped (or, in
//      IndexedRows, stored as -1, which every reader skips) and the kernel
//      sets kErrRowIndexOutOfRange in its launch's error word (CheckedLaunch),
//      which the next DeviceBackend::Synchronize (CopyToHost does one)
//      reports as InvalidArgument naming the node and tag ("indexed rows: a
//      row index is out of range"), as the CUDA Gather does. IndexedRowsSplit still writes the bad index, and
//      the shared or concatenated rows are checked by the kernels that copy
//      them (or a check kernel when shared). Host indices of IndexedRows are
//      checked on the host, with the CPU's message.
//   3. A dimension of an OuterRows GEMM (K, N, K + N or a row count) above
//      2^31 - 1 is Unimplemented (cuBLAS's int API), as for MatMul.
//
// Every launch and copy is on the launch stream; no kernel waits for the
// device; buffers come from Tensor::Empty on the device; no grid is
// launched for zero elements.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "cuda/cuda_kernel_util.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace cuda {
namespace {

// The unsigned integer of a float type's size: elements are copied as bits
// (the index column holds an integer's bits, not a float value).
template <typename T>
using RawOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// The index whose bits a row's first element holds: int32 bits in a 32-bit
// element, int64 bits in a 64-bit one.
__device__ __forceinline__ int64_t DecodeIndex(uint32_t bits) { return static_cast<int32_t>(bits); }
__device__ __forceinline__ int64_t DecodeIndex(uint64_t bits) { return static_cast<int64_t>(bits); }
__device__ __forceinline__ int64_t DecodeIndex(float v) { return __float_as_int(v); }
__device__ __forceinline__ int64_t DecodeIndex(double v) { return __double_as_longlong(v); }
// `index` must fit the element's integer (it is in [0, R) or -1, and a
// float32 table has fewer than 2^31 rows).
template <typename U>
__device__ __forceinline__ U EncodeIndex(int64_t index) {
  if constexpr (sizeof(U) == 4) {
    return static_cast<U>(static_cast<uint32_t>(static_cast<int32_t>(index)));
  } else {
    return static_cast<U>(index);
  }
}

__device__ __forceinline__ bool OutOfRange(int64_t index, int64_t limit) { return index < 0 || index >= limit; }

// Up to this many inputs per launch of the kernels that read several.
constexpr int kMaxPieces = 8;

// Row tensors read by one launch, back to back: input k holds the elements
// [end[k - 1], end[k]) of the launch's range (end[-1] = 0). Passed by value.
template <typename P>
struct Pieces {
  const P* p[kMaxPieces];
  int64_t end[kMaxPieces];
  int count;
};

// The piece of element e (< end[count - 1]) and e's offset in it.
template <typename P>
__device__ __forceinline__ const P* PieceOf(const Pieces<P>& s, int64_t e, int64_t* local) {
  int k = 0;
  while (k + 1 < s.count && e >= s.end[k]) ++k;
  *local = e - (k == 0 ? 0 : s.end[k - 1]);
  return s.p[k];
}

// Calls fn(chunk, first, n) for `pieces` (non-empty row tensors of `width`
// columns, device pointers to P) in chunks of kMaxPieces: `first` is the
// chunk's first element in the pieces' concatenation, `n` its element count.
template <typename P, typename Fn>
absl::Status ForEachChunk(absl::Span<const Tensor* const> pieces, int64_t width, Fn&& fn) {
  size_t next = 0;
  int64_t first = 0;
  while (next < pieces.size()) {
    Pieces<P> s{};
    s.count = 0;
    int64_t n = 0;
    while (s.count < kMaxPieces && next < pieces.size()) {
      const Tensor* t = pieces[next++];
      s.p[s.count] = static_cast<const P*>(t->raw_data());
      n += t->shape().dim(0) * width;
      s.end[s.count++] = n;
    }
    TDF_RETURN_IF_ERROR(fn(s, first, n));
    first += n;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Device kernels. All are grid-stride loops over n > 0 elements.

// IndexedRows: out [count, w] (w = 1 + D): column 0 the index idx[j] (-1 and
// the error bit when out of [0, limit)), columns 1.. row j of dy [count, D].
template <typename U, typename I>
__global__ void IndexedRowsKernelImpl(const I* idx, const U* dy, U* out, int64_t n, int64_t w, int64_t limit,
                                      unsigned int* err) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t j = e / w;
    const int64_t c = e - j * w;
    if (c == 0) {
      int64_t i = static_cast<int64_t>(idx[j]);
      if (OutOfRange(i, limit)) {
        atomicOr(err, kErrRowIndexOutOfRange);
        i = -1;
      }
      out[e] = EncodeIndex<U>(i);
    } else {
      out[e] = dy[j * (w - 1) + (c - 1)];
    }
  }
}

// The pieces' elements copied to out (the chunk's place in the
// concatenation). kCheckIndices: rows of width w whose index (column 0)
// must be in [0, limit), else the error bit.
template <typename U, bool kCheckIndices>
__global__ void ConcatRowsKernel(Pieces<U> s, U* out, int64_t n, int64_t w, int64_t limit, unsigned int* err) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t local = 0;
    const U* src = PieceOf(s, e, &local);
    const U v = src[local];
    out[e] = v;
    if (kCheckIndices && local % w == 0 && OutOfRange(DecodeIndex(v), limit)) atomicOr(err, kErrRowIndexOutOfRange);
  }
}

// The error bit for every row of rows [m, w] whose index is out of range.
template <typename U>
__global__ void CheckRowIndicesKernel(const U* rows, int64_t m, int64_t w, int64_t limit, unsigned int* err) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < m;
       r += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    if (OutOfRange(DecodeIndex(rows[r * w]), limit)) atomicOr(err, kErrRowIndexOutOfRange);
  }
}

// out[index * out_stride + out_offset + c - 1] += row[c] for every column
// c >= 1 of every row [index | values] of the pieces (width w); a row whose
// index is out of [0, limit) adds nothing and sets the error bit.
template <typename T>
__global__ void ScatterRowsKernel(Pieces<T> s, int64_t n, int64_t w, T* out, int64_t out_stride, int64_t out_offset,
                                  int64_t limit, unsigned int* err) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t local = 0;
    const T* src = PieceOf(s, e, &local);
    const int64_t j = local / w;
    const int64_t c = local - j * w;
    const T* row = src + j * w;
    const int64_t index = DecodeIndex(row[0]);
    if (OutOfRange(index, limit)) {
      if (c == 0) atomicOr(err, kErrRowIndexOutOfRange);
    } else if (c > 0) {
      atomicAdd(out + index * out_stride + out_offset + (c - 1), row[c]);
    }
  }
}

// The compacted indexed rows before the scatter: row r is [r | 0 ... 0].
template <typename U>
__global__ void InitCompactRowsKernel(U* out, int64_t n, int64_t w) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = e / w;
    out[e] = e - r * w == 0 ? EncodeIndex<U>(r) : U(0);  // all-zero bits: +0.0
  }
}

// IndexedRowsSplit: rows [m, w] -> idx [m] (int64; the error bit when out of
// [0, limit), written anyway) and values [m, w - 1].
template <typename U>
__global__ void SplitRowsKernel(const U* rows, int64_t n, int64_t w, int64_t limit, int64_t* idx, U* values,
                                unsigned int* err) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t j = e / w;
    const int64_t c = e - j * w;
    const U v = rows[e];
    if (c == 0) {
      const int64_t i = DecodeIndex(v);
      if (OutOfRange(i, limit)) atomicOr(err, kErrRowIndexOutOfRange);
      idx[j] = i;
    } else {
      values[j * (w - 1) + (c - 1)] = v;
    }
  }
}

// An identity block of `size` x `size` at column `col` of the row-major out
// (row stride ld): out[i * ld + col + c] = (i == c).
template <typename T>
__global__ void IdentityBlockKernel(T* out, int64_t size, int64_t ld, int64_t col) {
  const int64_t n = size * size;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t i = e / size;
    const int64_t c = e - i * size;
    out[i * ld + col + c] = i == c ? T(1) : T(0);
  }
}

// ---------------------------------------------------------------------------
// Host-side checks: the CPU kernels' own (kernel_util.h's CheckIndexedRows*
// and CheckOuterRows*), so the messages and codes are theirs.

// rows [m, 1 + D] and P of IndexedRowsSum and IndexedRowsSplit: P's table
// checks (R, D), rows of P's dtype and width.
absl::Status CheckRowsOfTable(const Tensor& rows, const Tensor& like, const char* op, int64_t* R, int64_t* D) {
  TDF_RETURN_IF_ERROR(kernels::CheckIndexedRowsTable(like, op, R, D));
  if (rows.dtype() != like.dtype()) return kernels::DTypeMismatchError(rows.dtype(), like.dtype());
  return kernels::CheckIndexedRowsShape(rows, *D, op, 0);
}

// Chooses T (float, double) by the float dtype `dtype` (checked before).
template <typename Fn>
absl::Status DispatchFloat(DType dtype, Fn&& fn) {
  return dtype == DType::kFloat32 ? fn(float{}) : fn(double{});
}

// Adds every row [index | values] of `pieces` (non-empty, width w) into out
// at out + index * out_stride + out_offset, by ScatterRowsKernel: a row
// whose index is out of [0, limit) sets the error bit instead.
template <typename T>
absl::Status ScatterRows(const Launch& launch, unsigned int* err, absl::Span<const Tensor* const> pieces, int64_t w,
                         T* out, int64_t out_stride, int64_t out_offset, int64_t limit) {
  return ForEachChunk<T>(pieces, w, [&](const Pieces<T>& s, int64_t, int64_t count) -> absl::Status {
    ScatterRowsKernel<T>
        <<<GridFor(count), 256, 0, launch.stream>>>(s, count, w, out, out_stride, out_offset, limit, err);
    TDF_CUDA_RETURN_IF_LAUNCH_FAILED("ScatterRowsKernel");
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// IndexedRows(P, indices, dy) -> [count, 1 + D].

class IndexedRowsKernel final : public OpKernel {
 public:
  explicit IndexedRowsKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 3));
    const Tensor& like = ctx.input(0);     // P: only its shape
    const Tensor& indices = ctx.input(1);  // on the host or on this device
    const Tensor& dy = ctx.input(2);
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 2, 3));
    const bool host_indices = indices.device().is_cpu();
    if (indices.valid() && !host_indices && indices.device() != device_)
      return absl::FailedPreconditionError(absl::StrCat("input 1 is on ", indices.device().ToString(),
                                                        "; this CUDA kernel runs on ", device_.ToString(),
                                                        " (indices may be on the host or on its device)"));
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(kernels::CheckIndexedRows(like, indices, dy, &R, &D));
    const int64_t count = indices.num_elements();
    const bool wide = indices.dtype() == DType::kInt64;
    if (host_indices) {
      // Host indices are checked here, as on the CPU: no device round trip.
      for (int64_t j = 0; j < count; ++j) {
        const int64_t i = wide ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
        if (i < 0 || i >= R)
          return absl::InvalidArgumentError(
              absl::StrCat("IndexedRows: index ", i, " (at position ", j, ") is out of range [0, ", R, ")"));
      }
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), Shape({count, 1 + D}), device_));
    if (count > 0) {
      Tensor idx = indices;
      if (host_indices) {
        // Stream-ordered before the kernel below; the runtime stages the
        // pageable source before returning, so it may go away at once.
        TDF_ASSIGN_OR_RETURN(idx, Tensor::Empty(indices.dtype(), indices.shape(), device_));
        TDF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(idx.raw_mutable_data(), indices.raw_data(), indices.bytes(),
                                                 cudaMemcpyHostToDevice, launch.stream));
      }
      const int64_t w = 1 + D;
      const int64_t n = count * w;
      CheckedLaunch checked(launch.device, ctx);
      TDF_RETURN_IF_ERROR(checked.status());
      unsigned int* err = checked.word();
      TDF_RETURN_IF_ERROR(DispatchFloat(like.dtype(), [&](auto zero) -> absl::Status {
        using U = RawOf<decltype(zero)>;
        const U* src = static_cast<const U*>(dy.raw_data());
        U* dst = static_cast<U*>(out.raw_mutable_data());
        if (wide) {
          IndexedRowsKernelImpl<U, int64_t>
              <<<GridFor(n), 256, 0, launch.stream>>>(idx.data<int64_t>(), src, dst, n, w, R, err);
        } else {
          IndexedRowsKernelImpl<U, int32_t>
              <<<GridFor(n), 256, 0, launch.stream>>>(idx.data<int32_t>(), src, dst, n, w, R, err);
        }
        TDF_CUDA_RETURN_IF_LAUNCH_FAILED("IndexedRowsKernelImpl");
        return absl::OkStatus();
      }));
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

// ---------------------------------------------------------------------------
// IndexedRowsConcat(P, rows...) -> [m, 1 + D] (m <= R), or all R rows.

class IndexedRowsConcatKernel final : public OpKernel {
 public:
  explicit IndexedRowsConcatKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) return kernels::MinArityError(1, n);
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 1));  // the rows; P gives only its shape
    const Tensor& like = ctx.input(0);
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(kernels::CheckIndexedRowsTable(like, "IndexedRowsConcat", &R, &D));
    absl::InlinedVector<const Tensor*, 4> pieces;
    int64_t m = 0;
    for (int i = 1; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != like.dtype()) return kernels::DTypeMismatchError(like.dtype(), t.dtype());
      TDF_RETURN_IF_ERROR(kernels::CheckIndexedRowsShape(t, D, "IndexedRowsConcat", i));
      m += t.shape().dim(0);
      if (t.shape().dim(0) > 0) pieces.push_back(&t);
    }
    const int64_t w = 1 + D;
    if (pieces.size() == 1 && m <= R) {
      // One non-empty sum: shared, not copied; its indices still checked.
      TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
      CheckedLaunch checked(launch.device, ctx);
      TDF_RETURN_IF_ERROR(checked.status());
      TDF_RETURN_IF_ERROR(DispatchFloat(like.dtype(), [&](auto zero) -> absl::Status {
        using U = RawOf<decltype(zero)>;
        CheckRowIndicesKernel<U><<<GridFor(m), 256, 0, launch.stream>>>(static_cast<const U*>(pieces[0]->raw_data()),
                                                                        m, w, R, checked.word());
        TDF_CUDA_RETURN_IF_LAUNCH_FAILED("CheckRowIndicesKernel");
        return absl::OkStatus();
      }));
      ctx.set_output(0, *pieces[0]);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    const int64_t out_rows = m <= R ? m : R;
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), Shape({out_rows, w}), device_));
    CheckedLaunch checked(launch.device, ctx);
    TDF_RETURN_IF_ERROR(checked.status());
    unsigned int* err = checked.word();
    TDF_RETURN_IF_ERROR(DispatchFloat(like.dtype(), [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      using U = RawOf<T>;
      if (m <= R) {
        // Concatenated in order, indices checked on the way.
        U* dst = static_cast<U*>(out.raw_mutable_data());
        return ForEachChunk<U>(pieces, w, [&](const Pieces<U>& s, int64_t first, int64_t count) -> absl::Status {
          ConcatRowsKernel<U, true><<<GridFor(count), 256, 0, launch.stream>>>(s, dst + first, count, w, R, err);
          TDF_CUDA_RETURN_IF_LAUNCH_FAILED("ConcatRowsKernel");
          return absl::OkStatus();
        });
      }
      // Compacted: row r is [r | the sum of the rows of index r].
      const int64_t size = R * w;
      if (size > 0) {
        InitCompactRowsKernel<U><<<GridFor(size), 256, 0, launch.stream>>>(static_cast<U*>(out.raw_mutable_data()),
                                                                           size, w);
        TDF_CUDA_RETURN_IF_LAUNCH_FAILED("InitCompactRowsKernel");
      }
      return ScatterRows<T>(launch, err, pieces, w, static_cast<T*>(out.raw_mutable_data()), w, 1, R);
    }));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

// ---------------------------------------------------------------------------
// IndexedRowsSum(rows, P) -> P's shape.

class IndexedRowsSumKernel final : public OpKernel {
 public:
  explicit IndexedRowsSumKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 0, 1));  // rows; P gives only its shape
    const Tensor& rows = ctx.input(0);
    const Tensor& like = ctx.input(1);
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(CheckRowsOfTable(rows, like, "IndexedRowsSum", &R, &D));
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), like.shape(), device_));
    if (out.bytes() > 0)
      TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_mutable_data(), 0, out.bytes(), launch.stream));
    const int64_t w = 1 + D;
    const int64_t n = rows.shape().dim(0) * w;
    if (n > 0) {
      const Tensor* pieces[] = {&rows};
      CheckedLaunch checked(launch.device, ctx);
      TDF_RETURN_IF_ERROR(checked.status());
      TDF_RETURN_IF_ERROR(DispatchFloat(like.dtype(), [&](auto zero) -> absl::Status {
        using T = decltype(zero);
        return ScatterRows<T>(launch, checked.word(), pieces, w, static_cast<T*>(out.raw_mutable_data()), D, 0, R);
      }));
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

// ---------------------------------------------------------------------------
// IndexedRowsSplit(rows, P) -> (indices int64 [m], values [m, P's row shape]),
// both on the device.

class IndexedRowsSplitKernel final : public OpKernel {
 public:
  explicit IndexedRowsSplitKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 0, 1));  // rows; P gives only its shape
    // Two outputs, as the schema gives the node: never write past them.
    if (ctx.num_outputs() != 2)
      return absl::InvalidArgumentError(
          absl::StrCat("IndexedRowsSplit has 2 outputs, the node has ", ctx.num_outputs()));
    const Tensor& rows = ctx.input(0);
    const Tensor& like = ctx.input(1);
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(CheckRowsOfTable(rows, like, "IndexedRowsSplit", &R, &D));
    const int64_t m = rows.shape().dim(0);
    Shape value_shape({m});
    for (int d = 1; d < like.rank(); ++d) value_shape.AddDim(like.shape().dim(d));
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor indices, Tensor::Empty(DType::kInt64, Shape({m}), device_));
    TDF_ASSIGN_OR_RETURN(Tensor values, Tensor::Empty(like.dtype(), value_shape, device_));
    const int64_t w = 1 + D;
    const int64_t n = m * w;
    if (n > 0) {
      CheckedLaunch checked(launch.device, ctx);
      TDF_RETURN_IF_ERROR(checked.status());
      unsigned int* err = checked.word();
      TDF_RETURN_IF_ERROR(DispatchFloat(like.dtype(), [&](auto zero) -> absl::Status {
        using U = RawOf<decltype(zero)>;
        SplitRowsKernel<U><<<GridFor(n), 256, 0, launch.stream>>>(static_cast<const U*>(rows.raw_data()), n, w, R,
                                                                  indices.mutable_data<int64_t>(),
                                                                  static_cast<U*>(values.raw_mutable_data()), err);
        TDF_CUDA_RETURN_IF_LAUNCH_FAILED("SplitRowsKernel");
        return absl::OkStatus();
      }));
    }
    ctx.set_output(0, std::move(indices));
    ctx.set_output(1, std::move(values));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

// ---------------------------------------------------------------------------
// Outer-product rows. See matmul_kernels.cu for the row-major /
// column-major "transpose trick".

cublasStatus_t Gemm(const CublasFunctions& blas, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                    int n, int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                    const float* beta, float* c, int ldc) {
  return blas.sgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t Gemm(const CublasFunctions& blas, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                    int n, int k, const double* alpha, const double* a, int lda, const double* b, int ldb,
                    const double* beta, double* c, int ldc) {
  return blas.dgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Unimplemented when a GEMM dimension or leading dimension exceeds cuBLAS's int.
absl::Status CheckGemmDims(const char* op, int64_t K, int64_t N, int64_t rows) {
  const int64_t kMaxDim = std::numeric_limits<int>::max();
  if (K + N > kMaxDim || rows > kMaxDim)
    return absl::UnimplementedError(absl::StrCat(op, " on CUDA: a dimension exceeds 2^31-1 (cuBLAS int API)"));
  return absl::OkStatus();
}

// The sum S [K, N] = sum_r x_r^T g_r over the r > 0 rows [x_r | g_r] (row-
// major, K + N wide, K, N > 0) at `rows`, written (accumulate: added) into
// the row-major matrix at `c` with row stride ldc, as S [K, N] or, with
// `transposed`, as S^T [N, K]. Read column-major, the rows' buffer is the
// (K + N) x r matrix [X^T; G^T] (leading dim K + N): X^T at offset 0, G^T at
// offset K; a row-major [a, b] result at c is the column-major b x a matrix
// with leading dim ldc. So S^T (column-major N x K) = G^T X and S (K x N) =
// X^T G, each one GEMM without copies.
template <typename T>
absl::Status OuterGemm(const Launch& launch, const T* rows, int64_t r, int64_t K, int64_t N, bool transposed, T* c,
                       int64_t ldc, bool accumulate) {
  cublasHandle_t handle = launch.device->cublas();
  const CublasFunctions& blas = launch.device->blas();
  TDF_CUBLAS_RETURN_IF_ERROR(blas.set_stream(handle, launch.stream));
  const T one = T(1), beta = accumulate ? T(1) : T(0);
  const int lda = static_cast<int>(K + N);
  const T* x = rows;      // X^T: K x r
  const T* g = rows + K;  // G^T: N x r
  if (!transposed) {
    // Column-major N x K = G^T (N x r) * (X^T)^T (r x K).
    TDF_CUBLAS_RETURN_IF_ERROR(Gemm(blas, handle, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(N), static_cast<int>(K),
                                    static_cast<int>(r), &one, g, lda, x, lda, &beta, c, static_cast<int>(ldc)));
  } else {
    // Column-major K x N = X^T (K x r) * (G^T)^T (r x N).
    TDF_CUBLAS_RETURN_IF_ERROR(Gemm(blas, handle, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(K), static_cast<int>(N),
                                    static_cast<int>(r), &one, x, lda, g, lda, &beta, c, static_cast<int>(ldc)));
  }
  return absl::OkStatus();
}

// OuterRowsConcat(W [K, N], rows...) -> [m, K + N] (m <= min(K, N)), or the
// min(K, N) compacted rows.
class OuterRowsConcatKernel final : public OpKernel {
 public:
  explicit OuterRowsConcatKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) return kernels::MinArityError(1, n);
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 1));  // the rows; W gives only its shape
    const Tensor& like = ctx.input(0);
    TDF_ASSIGN_OR_RETURN(const kernels::OuterRowsConcatGeometry g, kernels::CheckOuterRowsConcat(ctx));
    const auto& pieces = g.pieces;
    const int64_t m = g.m, K = g.K, N = g.N, cap = g.cap;
    if (pieces.size() == 1 && m <= cap) {
      ctx.set_output(0, *pieces[0]);  // one non-empty sum: shared, not copied
      return absl::OkStatus();
    }
    const int64_t w = K + N;
    if (m > cap) {
      for (const Tensor* p : pieces) TDF_RETURN_IF_ERROR(CheckGemmDims("OuterRowsConcat", K, N, p->shape().dim(0)));
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    const int64_t out_rows = m <= cap ? m : cap;
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), Shape({out_rows, w}), device_));
    TDF_RETURN_IF_ERROR(DispatchFloat(like.dtype(), [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      using U = RawOf<T>;
      if (m <= cap) {
        U* dst = static_cast<U*>(out.raw_mutable_data());
        return ForEachChunk<U>(pieces, w, [&](const Pieces<U>& s, int64_t first, int64_t count) -> absl::Status {
          ConcatRowsKernel<U, false><<<GridFor(count), 256, 0, launch.stream>>>(s, dst + first, count, w, 0, nullptr);
          TDF_CUDA_RETURN_IF_LAUNCH_FAILED("ConcatRowsKernel");
          return absl::OkStatus();
        });
      }
      if (cap == 0) return absl::OkStatus();  // [0, K + N]: nothing to write
      // The dense sum S [K, N] as min(K, N) rows, as on the CPU:
      // [S[:, j] | e_j] per column j when N <= K, else [e_i | S[i, :]] per row i.
      T* dst = static_cast<T*>(out.raw_mutable_data());
      const bool by_columns = N <= K;
      IdentityBlockKernel<T><<<GridFor(cap * cap), 256, 0, launch.stream>>>(dst, cap, w, by_columns ? K : 0);
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("IdentityBlockKernel");
      bool accumulate = false;
      for (const Tensor* p : pieces) {
        // By columns: out[:, :K] (N rows, stride K + N) = S^T; by rows:
        // out[:, K:] (K rows, stride K + N) = S.
        TDF_RETURN_IF_ERROR(OuterGemm<T>(launch, p->data<T>(), p->shape().dim(0), K, N, /*transposed=*/by_columns,
                                         by_columns ? dst : dst + K, w, accumulate));
        accumulate = true;
      }
      return absl::OkStatus();
    }));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

// OuterRowsSum(rows [m, K + N], W [K, N]) -> [K, N]: the dense sum.
class OuterRowsSumKernel final : public OpKernel {
 public:
  explicit OuterRowsSumKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 0, 1));  // rows; W gives only its shape
    const Tensor& rows = ctx.input(0);
    const Tensor& like = ctx.input(1);
    TDF_RETURN_IF_ERROR(kernels::CheckOuterRows(rows, like, "OuterRowsSum"));
    const int64_t K = like.shape().dim(0), N = like.shape().dim(1);
    const int64_t m = rows.shape().dim(0);
    const bool product = m > 0 && K > 0 && N > 0;
    if (product) TDF_RETURN_IF_ERROR(CheckGemmDims("OuterRowsSum", K, N, m));
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), like.shape(), device_));
    if (product) {
      TDF_RETURN_IF_ERROR(DispatchFloat(like.dtype(), [&](auto zero) -> absl::Status {
        using T = decltype(zero);
        return OuterGemm<T>(launch, rows.data<T>(), m, K, N, /*transposed=*/false, out.mutable_data<T>(), N,
                            /*accumulate=*/false);
      }));
    } else if (out.bytes() > 0) {
      // No rows: the empty sum (cuBLAS would not touch C).
      TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_mutable_data(), 0, out.bytes(), launch.stream));
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

}  // namespace

void RegisterCudaRowKernels(KernelRegistry& r) {
  RegisterCudaSimple<IndexedRowsKernel>(r, "IndexedRows");
  RegisterCudaSimple<IndexedRowsConcatKernel>(r, "IndexedRowsConcat");
  RegisterCudaSimple<IndexedRowsSumKernel>(r, "IndexedRowsSum");
  RegisterCudaSimple<IndexedRowsSplitKernel>(r, "IndexedRowsSplit");
  RegisterCudaSimple<OuterRowsConcatKernel>(r, "OuterRowsConcat");
  RegisterCudaSimple<OuterRowsSumKernel>(r, "OuterRowsSum");
}

}  // namespace cuda
}  // namespace tdf
