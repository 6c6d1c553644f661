// CUDA kernels for the gradient helpers that the autodiff emits, so that a
// backward pass placed on a GPU stays there: ConcatGrad, SliceGrad and
// GatherGrad (CPU twins in src/runtime/kernels/array_ops.cc) and MatMulAdd
// (src/runtime/kernels/matmul.cc). Their checks, dtypes and status codes
// are the CPU kernels' (the shape checks are the same functions, in
// kernel_util.h); inputs that give only their shape (ConcatGrad's x_k,
// SliceGrad's x, GatherGrad's params) may live on any device, like
// BroadcastTo's `like`.
//
//   ConcatGrad  one cudaMemcpy(2D)Async per output (a block of dy).
//   SliceGrad   a zeroed output and one scatter kernel over dy's elements
//               (dims coalesced first; a contiguous slice is one memcpy).
//   GatherGrad  a zeroed output and one kernel over dy's elements that
//               atomicAdds each into its row (repeated indices accumulate;
//               integers wrap, as on the CPU). An index out of range is
//               skipped and sets kErrGatherIndexOutOfRange, reported by the
//               next Synchronize as InvalidArgument, like the CUDA Gather.
//   MatMulAdd   the addends summed (or copied) into the output, then one
//               cuBLAS GEMM with beta = 1 accumulates the product onto it.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_kernel_util.h"
#include "cuda/small_ops.cuh"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace cuda {
namespace {

using kernels::DispatchBySize;

// ---------------------------------------------------------------------------
// ConcatGrad(dy, x_0, ..., x_{n-1}): output k is the block of dy that came
// from x_k (x_k gives only its shape).

class ConcatGradKernel final : public OpKernel {
 public:
  ConcatGradKernel(int64_t axis, Device device) : axis_(axis), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    TDF_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis"));
    return std::unique_ptr<OpKernel>(std::make_unique<ConcatGradKernel>(axis, device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckConcatGradArity(ctx));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 0, 1));  // the x_k give only their shapes
    TDF_ASSIGN_OR_RETURN(const kernels::ConcatGeometry g, kernels::CheckConcatGrad(ctx, axis_));
    const int n = ctx.num_inputs() - 1;
    const Tensor& dy = ctx.input(0);
    if (n == 1) {
      ctx.set_output(0, dy);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    const size_t elem = DTypeSize(dy.dtype());
    const int axis = g.axis;
    const int64_t axis_total = g.axis_total, outer = g.outer, inner = g.inner;
    const char* src = static_cast<const char*>(dy.raw_data());
    const size_t dy_row = static_cast<size_t>(axis_total * inner) * elem;
    if (n <= kMaxBlockPieces && static_cast<int64_t>(dy.bytes()) <= kMaxBlockCopyBytes && outer * axis_total * inner > 0) {
      // Small: one kernel writes every part instead of a copy per part.
      BlockPieces pieces;
      pieces.n = n;
      std::vector<Tensor> outs;
      int64_t offset = 0;
      for (int i = 1; i <= n; ++i) {
        TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(dy.dtype(), ctx.input(i).shape(), device_));
        pieces.ptr[i - 1] = static_cast<char*>(out.raw_mutable_data());
        pieces.width[i - 1] = ctx.input(i).shape().dim(axis) * inner;
        pieces.offset[i - 1] = offset;
        offset += pieces.width[i - 1];
        outs.push_back(std::move(out));
      }
      TDF_RETURN_IF_ERROR(LaunchBlockCopy<false>(pieces, const_cast<char*>(src), outer, axis_total * inner, elem,
                                                 launch.stream));
      for (int i = 0; i < n; ++i) ctx.set_output(i, std::move(outs[i]));
      return absl::OkStatus();
    }
    size_t col = 0;
    for (int i = 1; i <= n; ++i) {
      const Tensor& x = ctx.input(i);
      TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(dy.dtype(), x.shape(), device_));
      const size_t row = static_cast<size_t>(x.shape().dim(axis) * inner) * elem;
      char* dst = static_cast<char*>(out.raw_mutable_data());
      if (row > 0 && outer > 0) {
        if (outer == 1) {
          TDF_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(dst, src + col, row, cudaMemcpyDeviceToDevice, launch.stream));
        } else {
          // Output k is an [outer, row] block of dy: one 2-D copy.
          TDF_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst, row, src + col, dy_row, row, static_cast<size_t>(outer),
                                                     cudaMemcpyDeviceToDevice, launch.stream));
        }
      }
      col += row;
      ctx.set_output(i - 1, std::move(out));
    }
    return absl::OkStatus();
  }

 private:
  const int64_t axis_;
  const Device device_;
};

// ---------------------------------------------------------------------------
// SliceGrad(x, dy): zeros of x's shape with dy written at `begin`.

// out[base + sum_d index_d(o) * s.stride[d]] = in[o], s.dims = in's dims.
template <typename U>
__global__ void StridedScatterKernel(const U* in, U* out, int64_t n, int64_t base, Strides s) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rest = o, off = base;
    for (int d = s.rank - 1; d >= 0; --d) {
      off += (rest % s.dims[d]) * s.stride[d];
      rest /= s.dims[d];
    }
    out[off] = in[o];
  }
}

class SliceGradKernel final : public OpKernel {
 public:
  SliceGradKernel(std::vector<int64_t> begin, std::vector<int64_t> size, Device device)
      : begin_(std::move(begin)), size_(std::move(size)), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    TDF_ASSIGN_OR_RETURN(kernels::SliceAttrs attrs, kernels::GetSliceAttrs(node, "SliceGrad"));
    return std::unique_ptr<OpKernel>(
        std::make_unique<SliceGradKernel>(std::move(attrs.begin), std::move(attrs.size), device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    if (!x.valid()) return kernels::InvalidInputError(0);        // x gives only its shape
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 1, 2));  // dy
    TDF_ASSIGN_OR_RETURN(const kernels::SliceGeometry g, kernels::CheckSliceGrad(x, dy, begin_, size_));
    const int rank = x.rank();
    const Shape& slice = g.slice;
    const kernels::Dims& strides = g.strides;
    const int64_t base = g.base;
    if (slice == x.shape()) {
      ctx.set_output(0, dy);
      return absl::OkStatus();
    }
    // The slice's dims as (size, stride in x), innermost first: size-1 dims
    // dropped, and a dim merged into the one inside it when they are
    // contiguous in x (its stride is the inner one's size times stride).
    struct Dim {
      int64_t size, stride;
    };
    std::vector<Dim> dims;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t s = slice.dim(d);
      if (s == 1) continue;
      if (!dims.empty() && strides[d] == dims.back().size * dims.back().stride) {
        dims.back().size *= s;
      } else {
        dims.push_back({s, strides[d]});
      }
    }
    const int64_t n = dy.num_elements();
    if (n > 0 && static_cast<int>(dims.size()) > kMaxRank) return RankTooHigh("SliceGrad", rank);
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), x.shape(), device_));
    const size_t elem = DTypeSize(x.dtype());
    if (out.bytes() > 0)
      TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_mutable_data(), 0, out.bytes(), launch.stream));
    if (n > 0) {
      char* dst = static_cast<char*>(out.raw_mutable_data());
      if (dims.empty() || (dims.size() == 1 && dims[0].stride == 1)) {
        // dy is one contiguous run of x.
        TDF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + static_cast<size_t>(base) * elem, dy.raw_data(),
                                                 static_cast<size_t>(n) * elem, cudaMemcpyDeviceToDevice,
                                                 launch.stream));
      } else {
        Strides s;
        s.rank = static_cast<int>(dims.size());
        for (int d = 0; d < s.rank; ++d) {
          s.dims[d] = dims[s.rank - 1 - d].size;  // outermost first
          s.stride[d] = dims[s.rank - 1 - d].stride;
        }
        DispatchBySize(x.dtype(), [&](auto zero) {
          using U = decltype(zero);
          StridedScatterKernel<U><<<GridFor(n), 256, 0, launch.stream>>>(
              static_cast<const U*>(dy.raw_data()), static_cast<U*>(out.raw_mutable_data()), n, base, s);
        });
        TDF_CUDA_RETURN_IF_LAUNCH_FAILED("StridedScatterKernel");
      }
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::vector<int64_t> begin_;
  const std::vector<int64_t> size_;
  const Device device_;
};

// ---------------------------------------------------------------------------
// GatherGrad(params, indices, dy): zeros of params' shape; the slice of dy
// for index j is added at row indices[j] along `axis` (params gives only its
// shape). Repeated indices accumulate.

// *p += v, atomically; integers wrap (two's complement), as WrapAdd does.
__device__ __forceinline__ void AtomicAccumulate(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAccumulate(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAccumulate(int32_t* p, int32_t v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAccumulate(int64_t* p, int64_t v) {
  static_assert(sizeof(int64_t) == sizeof(unsigned long long), "64-bit atomics");
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// out[o, idx[j], i] += dy[o, j, i] for every element of dy (n of them); an
// index outside [0, limit) adds nothing and sets kErrGatherIndexOutOfRange.
template <typename T, typename I>
__global__ void GatherGradKernelImpl(const T* dy, const I* idx, T* out, int64_t n, int64_t count, int64_t inner,
                                     int64_t limit, unsigned int* err) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t i = e % inner;
    const int64_t j = (e / inner) % count;
    const int64_t o = e / (inner * count);
    const int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0 || k >= limit) {
      atomicOr(err, kErrGatherIndexOutOfRange);
    } else {
      AtomicAccumulate(out + (o * limit + k) * inner + i, dy[e]);
    }
  }
}

// Sets `bit` for an index outside [0, limit). GatherGrad runs it when dy is
// empty but indices are not (the CPU still checks every index);
// ScatterAddRows runs it before the update, which only happens when no bit
// was set: all or nothing, in stream order.
template <typename I>
__global__ void CheckIndicesKernel(const I* idx, int64_t count, int64_t limit, unsigned int bit, unsigned int* err) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < count;
       j += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0 || k >= limit) atomicOr(err, bit);
  }
}

template <typename T, typename I>
__global__ void ScatterAddRowsKernel(const T* updates, const I* idx, T* target, int64_t n, int64_t inner,
                                     const unsigned int* err) {
  if (*err != 0) return;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    AtomicAccumulate(target + static_cast<int64_t>(idx[e / inner]) * inner + e % inner, updates[e]);
  }
}

class GatherGradKernel final : public OpKernel {
 public:
  GatherGradKernel(int64_t axis, Device device) : axis_(axis), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    return std::unique_ptr<OpKernel>(std::make_unique<GatherGradKernel>(node.GetIntOr("axis", 0), device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 3));
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    if (!params.valid()) return kernels::InvalidInputError(0);   // params gives only its shape
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 1, 3));  // indices, dy
    TDF_ASSIGN_OR_RETURN(const int axis, kernels::CheckGatherGrad(params, indices, dy, axis_));
    switch (params.dtype()) {
      case DType::kFloat32: return Scatter<float>(ctx, params, indices, dy, axis);
      case DType::kFloat64: return Scatter<double>(ctx, params, indices, dy, axis);
      case DType::kInt32: return Scatter<int32_t>(ctx, params, indices, dy, axis);
      case DType::kInt64: return Scatter<int64_t>(ctx, params, indices, dy, axis);
      default: return kernels::UnsupportedDTypeError("GatherGrad", params.dtype());
    }
  }

 private:
  template <typename T>
  absl::Status Scatter(KernelContext& ctx, const Tensor& params, const Tensor& indices, const Tensor& dy,
                       int axis) const {
    const Shape& ps = params.shape();
    const int64_t limit = ps.dim(axis);
    const int64_t count = indices.num_elements();
    int64_t inner = 1;
    for (int d = axis + 1; d < ps.rank(); ++d) inner *= ps.dim(d);
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(params.dtype(), ps, device_));
    if (out.bytes() > 0)
      TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_mutable_data(), 0, out.bytes(), launch.stream));
    const int64_t n = dy.num_elements();  // outer * count * inner
    CheckedLaunch checked(launch.device, ctx);
    TDF_RETURN_IF_ERROR(checked.status());
    unsigned int* err = checked.word();
    if (n > 0) {
      const T* src = dy.data<T>();
      T* dst = out.mutable_data<T>();
      if (indices.dtype() == DType::kInt64) {
        GatherGradKernelImpl<T, int64_t><<<GridFor(n), 256, 0, launch.stream>>>(src, indices.data<int64_t>(), dst, n,
                                                                                count, inner, limit, err);
      } else {
        GatherGradKernelImpl<T, int32_t><<<GridFor(n), 256, 0, launch.stream>>>(src, indices.data<int32_t>(), dst, n,
                                                                                count, inner, limit, err);
      }
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("GatherGradKernelImpl");
    } else if (count > 0) {
      if (indices.dtype() == DType::kInt64) {
        CheckIndicesKernel<int64_t><<<GridFor(count), 256, 0, launch.stream>>>(indices.data<int64_t>(), count,
                                                                               limit, kErrGatherIndexOutOfRange, err);
      } else {
        CheckIndicesKernel<int32_t><<<GridFor(count), 256, 0, launch.stream>>>(indices.data<int32_t>(), count,
                                                                               limit, kErrGatherIndexOutOfRange, err);
      }
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("CheckIndicesKernel");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

  const int64_t axis_;
  const Device device_;
};

// ---------------------------------------------------------------------------
// MatMulAdd(a, b, addends...) = MatMul(a, b) + the sum of the addends (each
// of the product's shape [m, n]). See matmul_kernels.cu for the row-major /
// column-major "transpose trick".

// Up to this many addends per launch of SumKernel.
constexpr int kMaxSummands = 8;

template <typename T>
struct Summands {
  const T* p[kMaxSummands];
  int count;
};

// out[i] = ((p[0][i] + p[1][i]) + p[2][i]) + ..., left to right as on the CPU.
// out may be p[0] (a later chunk of addends continues the sum in place).
template <typename T>
__global__ void SumKernel(T* out, Summands<T> s, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T acc = s.p[0][i];
    for (int t = 1; t < s.count; ++t) acc += s.p[t][i];
    out[i] = acc;
  }
}

class MatMulAddKernel final : public OpKernel {
 public:
  MatMulAddKernel(bool transpose_a, bool transpose_b, Device device)
      : transpose_a_(transpose_a), transpose_b_(transpose_b), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    return std::unique_ptr<OpKernel>(std::make_unique<MatMulAddKernel>(
        node.GetBoolOr("transpose_a", false), node.GetBoolOr("transpose_b", false), device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    if (ctx.num_inputs() < 2) return kernels::MinArityError(2, ctx.num_inputs());
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    TDF_ASSIGN_OR_RETURN(const kernels::MatMulGeometry d,
                         kernels::CheckMatMul(a, b, transpose_a_, transpose_b_, "MatMulAdd"));
    const int64_t m = d.m, k = d.k, n = d.n;
    const Shape shape({m, n});
    const int num_addends = ctx.num_inputs() - 2;
    TDF_RETURN_IF_ERROR(kernels::CheckMatMulAddends(ctx, a.dtype(), shape));
    const int64_t kMaxDim = 0x7fffffff;
    if (m > kMaxDim || n > kMaxDim || k > kMaxDim)
      return absl::UnimplementedError("MatMulAdd on CUDA: a dimension exceeds 2^31-1 (cuBLAS int API)");
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(a.dtype(), shape, device_));
    if (m > 0 && n > 0) {
      // out = the sum of the addends (0 when there are none)...
      if (num_addends == 0) {
        if (k == 0) TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_mutable_data(), 0, out.bytes(), launch.stream));
      } else if (num_addends == 1) {
        TDF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.raw_mutable_data(), ctx.input(2).raw_data(), out.bytes(),
                                                 cudaMemcpyDeviceToDevice, launch.stream));
      } else if (a.dtype() == DType::kFloat32) {
        TDF_RETURN_IF_ERROR(SumAddends<float>(ctx, launch, out));
      } else {
        TDF_RETURN_IF_ERROR(SumAddends<double>(ctx, launch, out));
      }
      // ... plus the product (beta 1 accumulates onto the addends; beta 0
      // never reads out's uninitialized contents). k == 0 is an empty sum.
      if (k > 0)
        TDF_RETURN_IF_ERROR(GemmInto(launch, a, b, transpose_a_, transpose_b_, /*accumulate=*/num_addends > 0, out));
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  // out = addend 0 + addend 1 + ... (inputs 2.. of ctx; at least two), in
  // chunks of kMaxSummands: each later chunk starts from out.
  template <typename T>
  static absl::Status SumAddends(const KernelContext& ctx, const Launch& launch, Tensor& out) {
    const int64_t size = out.num_elements();
    T* dst = out.mutable_data<T>();
    int next = 2;  // the next input to add
    bool first = true;
    while (next < ctx.num_inputs()) {
      Summands<T> s{};
      s.count = 0;
      if (!first) s.p[s.count++] = dst;
      while (s.count < kMaxSummands && next < ctx.num_inputs()) s.p[s.count++] = ctx.input(next++).data<T>();
      SumKernel<T><<<GridFor(size), 256, 0, launch.stream>>>(dst, s, size);
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("SumKernel");
      first = false;
    }
    return absl::OkStatus();
  }

  const bool transpose_a_;
  const bool transpose_b_;
  const Device device_;
};

}  // namespace

template <typename T>
absl::StatusOr<Tensor> ScatterAddRowsAs(const Tensor& target_in, const Tensor& indices, const Tensor& updates,
                                        const KernelContext& ctx) {
  TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, target_in.device()));
  const int64_t rows = target_in.rank() == 0 ? 0 : target_in.shape().dim(0);
  const int64_t inner = rows == 0 ? 0 : target_in.num_elements() / rows;
  const int64_t count = indices.num_elements();
  if (count == 0) return target_in;
  const bool exclusive = target_in.RefCountIsOne();
  Tensor target = target_in;
  if (!exclusive) {
    // Someone still holds the old value (a fetched Read): update a copy.
    TDF_ASSIGN_OR_RETURN(target, Tensor::Empty(target_in.dtype(), target_in.shape(), target_in.device()));
    TDF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(target.raw_mutable_data(), target_in.raw_data(), target_in.bytes(),
                                             cudaMemcpyDeviceToDevice, launch.stream));
  }
  Tensor idx = indices;
  if (idx.device() != target.device()) {
    // Stream-ordered before the kernels; the runtime stages the pageable
    // source before returning, so it may go away at once.
    TDF_ASSIGN_OR_RETURN(idx, Tensor::Empty(indices.dtype(), indices.shape(), target.device()));
    TDF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(idx.raw_mutable_data(), indices.raw_data(), indices.bytes(),
                                             cudaMemcpyHostToDevice, launch.stream));
  }
  const int64_t n = count * inner;
  CheckedLaunch checked(launch.device, ctx);
  TDF_RETURN_IF_ERROR(checked.status());
  T* dst = target.mutable_data<T>();
  const T* src = updates.data<T>();
  if (idx.dtype() == DType::kInt64) {
    CheckIndicesKernel<int64_t><<<GridFor(count), 256, 0, launch.stream>>>(
        idx.data<int64_t>(), count, rows, kErrScatterIndexOutOfRange, checked.word());
    if (n > 0)
      ScatterAddRowsKernel<T, int64_t>
          <<<GridFor(n), 256, 0, launch.stream>>>(src, idx.data<int64_t>(), dst, n, inner, checked.word());
  } else {
    CheckIndicesKernel<int32_t><<<GridFor(count), 256, 0, launch.stream>>>(
        idx.data<int32_t>(), count, rows, kErrScatterIndexOutOfRange, checked.word());
    if (n > 0)
      ScatterAddRowsKernel<T, int32_t>
          <<<GridFor(n), 256, 0, launch.stream>>>(src, idx.data<int32_t>(), dst, n, inner, checked.word());
  }
  TDF_CUDA_RETURN_IF_LAUNCH_FAILED("ScatterAddRowsKernel");
  return target;
}

void RegisterCudaGradientKernels(KernelRegistry& r) {
  RegisterCuda<ConcatGradKernel>(r, "ConcatGrad");
  RegisterCuda<SliceGradKernel>(r, "SliceGrad");
  RegisterCuda<GatherGradKernel>(r, "GatherGrad");
  RegisterCuda<MatMulAddKernel>(r, "MatMulAdd");
}

}  // namespace cuda
}  // namespace tdf

namespace tdf {

absl::StatusOr<Tensor> DeviceBackend::ScatterAddRows(const Tensor& target, const Tensor& indices,
                                                     const Tensor& updates, const KernelContext& ctx) {
  switch (target.dtype()) {
    case DType::kFloat32: return cuda::ScatterAddRowsAs<float>(target, indices, updates, ctx);
    case DType::kFloat64: return cuda::ScatterAddRowsAs<double>(target, indices, updates, ctx);
    case DType::kInt32: return cuda::ScatterAddRowsAs<int32_t>(target, indices, updates, ctx);
    case DType::kInt64: return cuda::ScatterAddRowsAs<int64_t>(target, indices, updates, ctx);
    default:
      return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: dtype ", DTypeName(target.dtype()), " on a GPU"));
  }
}

}  // namespace tdf
