// Shape-manipulating CUDA kernels: Reshape and ReshapeLike (metadata only:
// the output shares the input's device buffer), Transpose, Slice and
// BroadcastTo (one strided-copy kernel), Concat (a cudaMemcpy2DAsync per
// input) and Gather. They move elements by size (1, 4 or 8 bytes), like the
// CPU kernels in src/runtime/kernels/array_ops.cc, whose checks and messages
// they repeat (Concat's and Slice's are the same functions, in
// kernel_util.h).
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_join.h"
#include "cuda/cuda_kernel_util.h"
#include "cuda/small_ops.cuh"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace cuda {
namespace {

using kernels::DispatchBySize;

// out[o] = in[base + sum_d index_d(o) * s.stride[d]], s.dims = out's dims.
template <typename U>
__global__ void StridedCopyKernel(const U* in, U* out, int64_t n, int64_t base, Strides s) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rest = o, off = base;
    for (int d = s.rank - 1; d >= 0; --d) {
      off += (rest % s.dims[d]) * s.stride[d];
      rest /= s.dims[d];
    }
    out[o] = in[off];
  }
}

absl::Status StridedCopy(const Launch& launch, const Tensor& in, const kernels::Dims& strides, int64_t base,
                         Tensor& out, const char* op) {
  const int64_t n = out.num_elements();
  if (n == 0) return absl::OkStatus();
  if (out.rank() > kMaxRank) return RankTooHigh(op, out.rank());
  Strides s;
  s.rank = out.rank();
  for (int d = 0; d < s.rank; ++d) {
    s.dims[d] = out.shape().dim(d);
    s.stride[d] = strides[d];
  }
  DispatchBySize(in.dtype(), [&](auto zero) {
    using U = decltype(zero);
    StridedCopyKernel<U><<<GridFor(n), 256, 0, launch.stream>>>(static_cast<const U*>(in.raw_data()),
                                                                 static_cast<U*>(out.raw_mutable_data()), n, base, s);
  });
  TDF_CUDA_RETURN_IF_LAUNCH_FAILED("StridedCopyKernel");
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------

class ReshapeKernel final : public OpKernel {
 public:
  ReshapeKernel(std::vector<int64_t> dims, int unknown, Device device)
      : dims_(std::move(dims)), unknown_(unknown), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    TDF_ASSIGN_OR_RETURN(std::vector<int64_t> dims, node.GetIntList("shape"));
    int unknown = -1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1 && unknown < 0) {
        unknown = static_cast<int>(i);
      } else if (dims[i] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("Reshape: bad target shape [", absl::StrJoin(dims, ","),
                                                       "]: dims must be >= 0, with at most one -1"));
      }
    }
    return std::unique_ptr<OpKernel>(std::make_unique<ReshapeKernel>(std::move(dims), unknown, device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& x = ctx.input(0);
    Shape shape(absl::MakeConstSpan(dims_));
    if (unknown_ >= 0) {
      int64_t known = 1;
      for (size_t i = 0; i < dims_.size(); ++i)
        if (static_cast<int>(i) != unknown_) known *= dims_[i];
      const int64_t n = x.num_elements();
      if (known == 0 || n % known != 0)
        return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", x.shape().DebugString(), " (", n,
                                                       " elements) to [", absl::StrJoin(dims_, ","), "]"));
      shape.set_dim(unknown_, n / known);
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, x.Reshape(shape));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::vector<int64_t> dims_;
  const int unknown_;
  const Device device_;
};

class ReshapeLikeKernel final : public OpKernel {
 public:
  explicit ReshapeLikeKernel(Device device) : device_(device) {}
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 0, 1));  // `like` gives only its shape
    TDF_ASSIGN_OR_RETURN(Tensor out, ctx.input(0).Reshape(ctx.input(1).shape()));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

class TransposeKernel final : public OpKernel {
 public:
  TransposeKernel(std::optional<std::vector<int64_t>> perm, Device device) : perm_(std::move(perm)), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    std::optional<std::vector<int64_t>> perm;
    if (node.FindAttr("perm") != nullptr) {
      TDF_ASSIGN_OR_RETURN(perm, node.GetIntList("perm"));
    }
    return std::unique_ptr<OpKernel>(std::make_unique<TransposeKernel>(std::move(perm), device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    std::vector<int64_t> perm(rank);
    if (perm_) {
      bool ok = static_cast<int>(perm_->size()) == rank;
      std::vector<bool> seen(rank, false);
      for (int i = 0; ok && i < rank; ++i) {
        const int64_t p = (*perm_)[i];
        ok = p >= 0 && p < rank && !seen[p];
        if (ok) seen[p] = true;
        perm[i] = p;
      }
      if (!ok)
        return absl::InvalidArgumentError(absl::StrCat("Transpose: perm [", absl::StrJoin(*perm_, ","),
                                                       "] is not a permutation of the ", rank,
                                                       " dims of the input"));
    } else {
      for (int i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
    }
    bool identity = true;
    for (int i = 0; i < rank; ++i) identity &= perm[i] == i;
    if (identity) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    const kernels::Dims in_strides = kernels::RowMajorStrides(x.shape());
    Shape out_shape;
    kernels::Dims strides(rank);
    for (int i = 0; i < rank; ++i) {
      out_shape.AddDim(x.shape().dim(perm[i]));
      strides[i] = in_strides[perm[i]];
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), out_shape, device_));
    TDF_RETURN_IF_ERROR(StridedCopy(launch, x, strides, 0, out, "Transpose"));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::optional<std::vector<int64_t>> perm_;
  const Device device_;
};

class ConcatKernel final : public OpKernel {
 public:
  ConcatKernel(int64_t axis, Device device) : axis_(axis), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    TDF_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis"));
    return std::unique_ptr<OpKernel>(std::make_unique<ConcatKernel>(axis, device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) return kernels::MinArityError(1, n);
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    TDF_ASSIGN_OR_RETURN(const kernels::ConcatGeometry g, kernels::CheckConcat(ctx, axis_));
    const Tensor& first = ctx.input(0);
    if (n == 1) {
      ctx.set_output(0, first);
      return absl::OkStatus();
    }
    const int axis = g.axis;
    const int64_t axis_total = g.axis_total, outer = g.outer, inner = g.inner;
    Shape out_shape = first.shape();
    out_shape.set_dim(axis, axis_total);
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(first.dtype(), out_shape, device_));
    const size_t elem = DTypeSize(first.dtype());
    char* dst = static_cast<char*>(out.raw_mutable_data());
    const size_t out_row = static_cast<size_t>(axis_total * inner) * elem;
    if (n <= kMaxBlockPieces && static_cast<int64_t>(out.bytes()) <= kMaxBlockCopyBytes && outer * axis_total * inner > 0) {
      // Small: one kernel instead of a 2-D copy per input.
      BlockPieces pieces;
      pieces.n = n;
      int64_t offset = 0;
      for (int i = 0; i < n; ++i) {
        pieces.ptr[i] = static_cast<char*>(const_cast<void*>(ctx.input(i).raw_data()));
        pieces.width[i] = ctx.input(i).shape().dim(axis) * inner;
        pieces.offset[i] = offset;
        offset += pieces.width[i];
      }
      TDF_RETURN_IF_ERROR(LaunchBlockCopy<true>(pieces, dst, outer, axis_total * inner, elem, launch.stream));
      ctx.set_output(0, std::move(out));
      return absl::OkStatus();
    }
    size_t col = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      const size_t row = static_cast<size_t>(t.shape().dim(axis) * inner) * elem;
      // Each input is an [outer, row] block of the output: one 2-D copy.
      if (row > 0 && outer > 0)
        TDF_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst + col, out_row, t.raw_data(), row, row,
                                                   static_cast<size_t>(outer), cudaMemcpyDeviceToDevice,
                                                   launch.stream));
      col += row;
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const int64_t axis_;
  const Device device_;
};

class SliceKernel final : public OpKernel {
 public:
  SliceKernel(std::vector<int64_t> begin, std::vector<int64_t> size, Device device)
      : begin_(std::move(begin)), size_(std::move(size)), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    TDF_ASSIGN_OR_RETURN(kernels::SliceAttrs attrs, kernels::GetSliceAttrs(node, "Slice"));
    return std::unique_ptr<OpKernel>(
        std::make_unique<SliceKernel>(std::move(attrs.begin), std::move(attrs.size), device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& x = ctx.input(0);
    TDF_ASSIGN_OR_RETURN(const kernels::SliceGeometry g,
                         kernels::CheckSlice("Slice", "the input", x.shape(), begin_, size_));
    if (g.slice == x.shape()) {  // the whole of x
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), g.slice, device_));
    TDF_RETURN_IF_ERROR(StridedCopy(launch, x, g.strides, g.base, out, "Slice"));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::vector<int64_t> begin_;
  const std::vector<int64_t> size_;
  const Device device_;
};

// out[o, j, i] = params[o, idx[j], i]; an index outside [0, limit) writes 0
// and sets kErrGatherIndexOutOfRange in its CheckedLaunch's word.
template <typename U, typename I>
__global__ void GatherKernelImpl(const U* params, const I* idx, U* out, int64_t n, int64_t count, int64_t inner,
                                 int64_t limit, unsigned int* err) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t i = e % inner;
    const int64_t j = (e / inner) % count;
    const int64_t o = e / (inner * count);
    const int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0 || k >= limit) {
      atomicOr(err, kErrGatherIndexOutOfRange);
      out[e] = U{0};
    } else {
      out[e] = params[(o * limit + k) * inner + i];
    }
  }
}

class GatherKernel final : public OpKernel {
 public:
  GatherKernel(int64_t axis, Device device) : axis_(axis), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    return std::unique_ptr<OpKernel>(std::make_unique<GatherKernel>(node.GetIntOr("axis", 0), device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    if (params.rank() == 0) return absl::InvalidArgumentError("Gather: params must have rank >= 1, got a scalar");
    TDF_ASSIGN_OR_RETURN(int axis, kernels::NormalizeAxis(axis_, params.rank()));
    if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32)
      return absl::InvalidArgumentError(
          absl::StrCat("Gather: indices must be int32 or int64, got ", DTypeName(indices.dtype())));
    const Shape& ps = params.shape();
    Shape out_shape;
    int64_t inner = 1;
    for (int d = 0; d < axis; ++d) out_shape.AddDim(ps.dim(d));
    for (int64_t d : indices.shape().dims()) out_shape.AddDim(d);
    for (int d = axis + 1; d < ps.rank(); ++d) {
      out_shape.AddDim(ps.dim(d));
      inner *= ps.dim(d);
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(params.dtype(), out_shape, device_));
    const int64_t n = out.num_elements();
    if (n > 0) {
      const int64_t count = indices.num_elements();
      CheckedLaunch checked(launch.device, ctx);
      TDF_RETURN_IF_ERROR(checked.status());
      DispatchBySize(params.dtype(), [&](auto zero) {
        using U = decltype(zero);
        const U* p = static_cast<const U*>(params.raw_data());
        U* o = static_cast<U*>(out.raw_mutable_data());
        if (indices.dtype() == DType::kInt64) {
          GatherKernelImpl<U, int64_t><<<GridFor(n), 256, 0, launch.stream>>>(
              p, indices.data<int64_t>(), o, n, count, inner, ps.dim(axis), checked.word());
        } else {
          GatherKernelImpl<U, int32_t><<<GridFor(n), 256, 0, launch.stream>>>(
              p, indices.data<int32_t>(), o, n, count, inner, ps.dim(axis), checked.word());
        }
      });
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("GatherKernelImpl");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const int64_t axis_;
  const Device device_;
};

// BroadcastTo(x, like): `like` gives only its shape.
class BroadcastToKernel final : public OpKernel {
 public:
  explicit BroadcastToKernel(Device device) : device_(device) {}
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 0, 1));
    const Tensor& x = ctx.input(0);
    const Shape& target = ctx.input(1).shape();
    if (x.shape() == target) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    const Shape* shapes[] = {&x.shape(), &target};
    absl::StatusOr<Shape> joint = kernels::BroadcastShapes(shapes);
    if (!joint.ok() || *joint != target)
      return absl::InvalidArgumentError(absl::StrCat("BroadcastTo: cannot broadcast shape ", x.shape().DebugString(),
                                                     " to shape ", target.DebugString()));
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), target, device_));
    TDF_RETURN_IF_ERROR(StridedCopy(launch, x, kernels::BroadcastStrides(x.shape(), target), 0, out, "BroadcastTo"));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

}  // namespace

void RegisterCudaArrayKernels(KernelRegistry& r) {
  RegisterCuda<ReshapeKernel>(r, "Reshape");
  RegisterCudaSimple<ReshapeLikeKernel>(r, "ReshapeLike");
  RegisterCuda<TransposeKernel>(r, "Transpose");
  RegisterCuda<ConcatKernel>(r, "Concat");
  RegisterCuda<SliceKernel>(r, "Slice");
  RegisterCuda<GatherKernel>(r, "Gather");
  RegisterCudaSimple<BroadcastToKernel>(r, "BroadcastTo");
}

}  // namespace cuda
}  // namespace tdf
