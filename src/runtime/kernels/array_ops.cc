// Shape-manipulating CPU kernels: Reshape, ReshapeLike, Transpose, Concat,
// Slice, Gather, BroadcastTo, and the gradient helpers ConcatGrad, SliceGrad
// and GatherGrad.
//
// These only move elements, so they copy by element size (1, 4 or 8 bytes)
// instead of by dtype. Reshape and ReshapeLike share the input's buffer.
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernels::CheckInputs;
using kernels::Dims;
using kernels::DispatchBySize;
using kernels::InvalidInputError;

// out[o] = in[offset(o)], where offsets come from `strides` in out's index
// space starting at `base`.
void StridedCopy(const Tensor& in, const Dims& strides, int64_t base, Tensor& out) {
  DispatchBySize(in.dtype(), [&](auto zero) {
    using U = decltype(zero);
    const U* src = static_cast<const U*>(in.raw_data()) + base;
    U* dst = static_cast<U*>(out.raw_mutable_data());
    std::array<Dims, 1> s = {strides};
    kernels::ForEachBroadcast<1>(out.shape(), s, [&](int64_t o, int64_t i) { dst[o] = src[i]; });
  });
}

// ---------------------------------------------------------------------------

class ReshapeKernel final : public OpKernel {
 public:
  ReshapeKernel(std::vector<int64_t> dims, int unknown, int64_t known)
      : dims_(std::move(dims)), unknown_(unknown), known_(known) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
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
    // The product of the known dims, checked once here: an attr such as
    // [-1, 2^40, 2^40] must be an error, not a signed overflow per firing.
    std::vector<int64_t> known_dims = dims;
    if (unknown >= 0) known_dims[unknown] = 1;
    const Shape known_shape(absl::MakeConstSpan(known_dims));
    if (absl::Status s = known_shape.Validate(); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("Reshape: bad target shape [", absl::StrJoin(dims, ","),
                                                     "]: ", s.message()));
    return std::unique_ptr<OpKernel>(
        std::make_unique<ReshapeKernel>(std::move(dims), unknown, known_shape.num_elements()));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 1));
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return InvalidInputError(0);
    if (dims_.empty() && x.is_inline_scalar()) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    Shape shape(absl::MakeConstSpan(dims_));
    if (unknown_ >= 0) {
      const int64_t n = x.num_elements();
      if (known_ == 0 || n % known_ != 0)
        return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", x.shape().DebugString(), " (", n,
                                                       " elements) to [", absl::StrJoin(dims_, ","), "]"));
      shape.set_dim(unknown_, n / known_);
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, x.Reshape(shape));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::vector<int64_t> dims_;
  const int unknown_;    // index of the -1 dim, or -1
  const int64_t known_;  // product of the other dims
};

class ReshapeLikeKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 2));
    const Tensor& x = ctx.input(0);
    const Tensor& like = ctx.input(1);
    if (!x.valid()) return InvalidInputError(0);
    if (x.is_inline_scalar() && like.is_inline_scalar()) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, x.Reshape(like.shape()));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------

class TransposeKernel final : public OpKernel {
 public:
  explicit TransposeKernel(std::optional<std::vector<int64_t>> perm) : perm_(std::move(perm)) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    std::optional<std::vector<int64_t>> perm;
    if (node.FindAttr("perm") != nullptr) {
      TDF_ASSIGN_OR_RETURN(perm, node.GetIntList("perm"));
    }
    return std::unique_ptr<OpKernel>(std::make_unique<TransposeKernel>(std::move(perm)));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 1));
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return InvalidInputError(0);
    const int rank = x.rank();
    std::vector<int64_t> perm(rank);
    if (perm_) {
      if (static_cast<int>(perm_->size()) != rank) return PermError(rank);
      std::vector<bool> seen(rank, false);
      for (int i = 0; i < rank; ++i) {
        const int64_t p = (*perm_)[i];
        if (p < 0 || p >= rank || seen[p]) return PermError(rank);
        seen[p] = true;
        perm[i] = p;
      }
    } else {
      for (int i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
    }
    bool identity = true;
    for (int i = 0; i < rank; ++i) identity &= perm[i] == i;
    if (identity) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    const Dims in_strides = kernels::RowMajorStrides(x.shape());
    Shape out_shape;
    Dims strides(rank);
    for (int i = 0; i < rank; ++i) {
      out_shape.AddDim(x.shape().dim(perm[i]));
      strides[i] = in_strides[perm[i]];
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), out_shape));
    StridedCopy(x, strides, 0, out);
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  absl::Status PermError(int rank) const {
    return absl::InvalidArgumentError(absl::StrCat("Transpose: perm [", absl::StrJoin(*perm_, ","),
                                                   "] is not a permutation of the ", rank, " dims of the input"));
  }

  const std::optional<std::vector<int64_t>> perm_;
};

// ---------------------------------------------------------------------------

class ConcatKernel final : public OpKernel {
 public:
  explicit ConcatKernel(int64_t axis) : axis_(axis) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    TDF_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis"));
    return std::unique_ptr<OpKernel>(std::make_unique<ConcatKernel>(axis));
  }

  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) return kernels::MinArityError(1, n);
    if (n > 1 && (axis_ == 1 || axis_ == -1) && ConcatRows(ctx)) return absl::OkStatus();
    TDF_RETURN_IF_ERROR(kernels::CheckCpuInputs(ctx));
    TDF_ASSIGN_OR_RETURN(const kernels::ConcatGeometry g, kernels::CheckConcat(ctx, axis_));
    const Tensor& first = ctx.input(0);
    if (n == 1) {
      ctx.set_output(0, first);
      return absl::OkStatus();
    }
    Shape out_shape = first.shape();
    out_shape.set_dim(g.axis, g.axis_total);
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(first.dtype(), out_shape));
    const size_t elem = DTypeSize(first.dtype());
    char* dst = static_cast<char*>(out.raw_mutable_data());
    const size_t out_row = static_cast<size_t>(g.axis_total * g.inner) * elem;
    size_t col = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      const size_t row = static_cast<size_t>(t.shape().dim(g.axis) * g.inner) * elem;
      const char* src = static_cast<const char*>(t.raw_data());
      if (row > 0)
        for (int64_t o = 0; o < g.outer; ++o) std::memcpy(dst + o * out_row + col, src + o * row, row);
      col += row;
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  // Row vectors [1, k_i] side by side (a TreeRNN node's [h_left, h_right, 1],
  // two per node): one copy each, without the general path's geometry. False,
  // having done nothing, for anything else (mismatches included: the
  // general path reports them).
  static bool ConcatRows(KernelContext& ctx) {
    const int n = ctx.num_inputs();
    const Tensor& first = ctx.input(0);
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != first.dtype() || t.rank() != 2 || t.shape().dim(0) != 1 || !t.device().is_cpu()) return false;
      total += t.shape().dim(1);
    }
    absl::StatusOr<Tensor> out = Tensor::Empty(first.dtype(), Shape({1, total}));
    if (!out.ok()) return false;
    const size_t elem = DTypeSize(first.dtype());
    char* dst = static_cast<char*>(out->raw_mutable_data());
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      const size_t bytes = static_cast<size_t>(t.shape().dim(1)) * elem;
      if (bytes > 0) std::memcpy(dst, t.raw_data(), bytes);
      dst += bytes;
    }
    ctx.set_output(0, *std::move(out));
    return true;
  }

  const int64_t axis_;
};

// ---------------------------------------------------------------------------

class SliceKernel final : public OpKernel {
 public:
  SliceKernel(std::vector<int64_t> begin, std::vector<int64_t> size)
      : begin_(std::move(begin)), size_(std::move(size)) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    TDF_ASSIGN_OR_RETURN(kernels::SliceAttrs attrs, kernels::GetSliceAttrs(node, "Slice"));
    return std::unique_ptr<OpKernel>(std::make_unique<SliceKernel>(std::move(attrs.begin), std::move(attrs.size)));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 1));
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return InvalidInputError(0);
    TDF_ASSIGN_OR_RETURN(const kernels::SliceGeometry g,
                         kernels::CheckSlice("Slice", "the input", x.shape(), begin_, size_));
    if (g.slice == x.shape()) {  // the whole of x
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), g.slice));
    if (out.num_elements() > 0) StridedCopy(x, g.strides, g.base, out);
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::vector<int64_t> begin_;
  const std::vector<int64_t> size_;
};

// ---------------------------------------------------------------------------

class GatherKernel final : public OpKernel {
 public:
  explicit GatherKernel(int64_t axis) : axis_(axis) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return std::unique_ptr<OpKernel>(std::make_unique<GatherKernel>(node.GetIntOr("axis", 0)));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 2));
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    if (!params.valid()) return InvalidInputError(0);
    if (params.rank() == 0) return absl::InvalidArgumentError("Gather: params must have rank >= 1, got a scalar");
    if ((axis_ == 0 || axis_ == -1) && params.rank() == 1 && indices.is_inline_scalar() && params.device().is_cpu() &&
        GatherScalar(ctx, params, indices)) {
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(int axis, kernels::NormalizeAxis(axis_, params.rank()));
    if (indices.dtype() == DType::kInt64) return Gather<int64_t>(ctx, params, indices, axis);
    if (indices.dtype() == DType::kInt32) return Gather<int32_t>(ctx, params, indices, axis);
    return absl::InvalidArgumentError(
        absl::StrCat("Gather: indices must be int32 or int64, got ", DTypeName(indices.dtype())));
  }

 private:
  // One element of a vector by a scalar index (a recursion reading its
  // node's fields, thousands per TreeRNN run): an inline scalar, without the
  // general path's shapes. False, having done nothing, for what it does not
  // cover (an index out of range included: the general path reports it).
  static bool GatherScalar(KernelContext& ctx, const Tensor& params, const Tensor& indices) {
    int64_t i;
    if (indices.dtype() == DType::kInt64) {
      i = indices.scalar<int64_t>();
    } else if (indices.dtype() == DType::kInt32) {
      i = indices.scalar<int32_t>();
    } else {
      return false;
    }
    if (i < 0 || i >= params.num_elements()) return false;
    switch (params.dtype()) {
      case DType::kInt64: ctx.set_output(0, Tensor::Scalar<int64_t>(params.data<int64_t>()[i])); return true;
      case DType::kInt32: ctx.set_output(0, Tensor::Scalar<int32_t>(params.data<int32_t>()[i])); return true;
      case DType::kFloat32: ctx.set_output(0, Tensor::Scalar<float>(params.data<float>()[i])); return true;
      case DType::kFloat64: ctx.set_output(0, Tensor::Scalar<double>(params.data<double>()[i])); return true;
      default: return false;
    }
  }

  template <typename I>
  static absl::Status Gather(KernelContext& ctx, const Tensor& params, const Tensor& indices, int axis) {
    const Shape& ps = params.shape();
    const int64_t limit = ps.dim(axis);
    const I* idx = indices.data<I>();
    const int64_t count = indices.num_elements();
    for (int64_t j = 0; j < count; ++j) {
      if (idx[j] < 0 || idx[j] >= limit)
        return absl::InvalidArgumentError(absl::StrCat("Gather: index ", idx[j], " (at position ", j,
                                                       ") is out of range [0, ", limit, ") for axis ", axis,
                                                       " of params shape ", ps.DebugString()));
    }
    Shape out_shape;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) {
      out_shape.AddDim(ps.dim(d));
      outer *= ps.dim(d);
    }
    for (int64_t d : indices.shape().dims()) out_shape.AddDim(d);
    for (int d = axis + 1; d < ps.rank(); ++d) {
      out_shape.AddDim(ps.dim(d));
      inner *= ps.dim(d);
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(params.dtype(), out_shape));
    const size_t chunk = static_cast<size_t>(inner) * DTypeSize(params.dtype());
    const char* src = static_cast<const char*>(params.raw_data());
    char* dst = static_cast<char*>(out.raw_mutable_data());
    if (chunk > 0) {
      for (int64_t o = 0; o < outer; ++o) {
        const char* block = src + o * limit * chunk;
        for (int64_t j = 0; j < count; ++j) {
          std::memcpy(dst, block + static_cast<int64_t>(idx[j]) * chunk, chunk);
          dst += chunk;
        }
      }
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

  const int64_t axis_;
};

// ---------------------------------------------------------------------------
// Gradient helpers.

// ConcatGrad(dy, x_0, ..., x_{n-1}): output k is the block of dy that came
// from x_k (x_k gives only its shape).
class ConcatGradKernel final : public OpKernel {
 public:
  explicit ConcatGradKernel(int64_t axis) : axis_(axis) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    TDF_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis"));
    return std::unique_ptr<OpKernel>(std::make_unique<ConcatGradKernel>(axis));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckConcatGradArity(ctx));
    TDF_RETURN_IF_ERROR(kernels::CheckCpuInputs(ctx));
    TDF_ASSIGN_OR_RETURN(const kernels::ConcatGeometry g, kernels::CheckConcatGrad(ctx, axis_));
    const int n = ctx.num_inputs() - 1;
    const Tensor& dy = ctx.input(0);
    if (n == 1) {
      ctx.set_output(0, dy);
      return absl::OkStatus();
    }
    const size_t elem = DTypeSize(dy.dtype());
    const char* src = static_cast<const char*>(dy.raw_data());
    const size_t dy_row = static_cast<size_t>(g.axis_total * g.inner) * elem;
    size_t col = 0;
    for (int i = 1; i <= n; ++i) {
      const Tensor& x = ctx.input(i);
      TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(dy.dtype(), x.shape()));
      const size_t row = static_cast<size_t>(x.shape().dim(g.axis) * g.inner) * elem;
      char* dst = static_cast<char*>(out.raw_mutable_data());
      if (row > 0)
        for (int64_t o = 0; o < g.outer; ++o) std::memcpy(dst + o * row, src + o * dy_row + col, row);
      col += row;
      ctx.set_output(i - 1, std::move(out));
    }
    return absl::OkStatus();
  }

 private:
  const int64_t axis_;
};

// SliceGrad(x, dy): zeros of x's shape with dy written at `begin`.
class SliceGradKernel final : public OpKernel {
 public:
  SliceGradKernel(std::vector<int64_t> begin, std::vector<int64_t> size)
      : begin_(std::move(begin)), size_(std::move(size)) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    TDF_ASSIGN_OR_RETURN(kernels::SliceAttrs attrs, kernels::GetSliceAttrs(node, "SliceGrad"));
    return std::unique_ptr<OpKernel>(std::make_unique<SliceGradKernel>(std::move(attrs.begin), std::move(attrs.size)));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 2));
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    if (!x.valid()) return InvalidInputError(0);
    if (!dy.valid()) return InvalidInputError(1);
    TDF_ASSIGN_OR_RETURN(const kernels::SliceGeometry g, kernels::CheckSliceGrad(x, dy, begin_, size_));
    if (g.slice == x.shape()) {
      ctx.set_output(0, dy);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(x.dtype(), x.shape()));
    if (dy.num_elements() > 0) {
      DispatchBySize(x.dtype(), [&](auto zero) {
        using U = decltype(zero);
        const U* src = static_cast<const U*>(dy.raw_data());
        U* dst = static_cast<U*>(out.raw_mutable_data()) + g.base;
        std::array<Dims, 1> s = {g.strides};
        kernels::ForEachBroadcast<1>(g.slice, s, [&](int64_t o, int64_t i) { dst[i] = src[o]; });
      });
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::vector<int64_t> begin_;
  const std::vector<int64_t> size_;
};

// GatherGrad(params, indices, dy): zeros of params' shape; the slice of dy
// for index j is added at row indices[j] along `axis` (params gives only its
// shape). Repeated indices accumulate.
class GatherGradKernel final : public OpKernel {
 public:
  explicit GatherGradKernel(int64_t axis) : axis_(axis) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return std::unique_ptr<OpKernel>(std::make_unique<GatherGradKernel>(node.GetIntOr("axis", 0)));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 3));
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    if (!params.valid()) return InvalidInputError(0);
    if (!dy.valid()) return InvalidInputError(2);
    TDF_ASSIGN_OR_RETURN(const int axis, kernels::CheckGatherGrad(params, indices, dy, axis_));
    absl::Status status = absl::OkStatus();
    switch (params.dtype()) {
      case DType::kFloat32: status = Dispatch<float>(ctx, params, indices, dy, axis); break;
      case DType::kFloat64: status = Dispatch<double>(ctx, params, indices, dy, axis); break;
      case DType::kInt32: status = Dispatch<int32_t>(ctx, params, indices, dy, axis); break;
      case DType::kInt64: status = Dispatch<int64_t>(ctx, params, indices, dy, axis); break;
      default: return kernels::UnsupportedDTypeError("GatherGrad", params.dtype());
    }
    return status;
  }

 private:
  template <typename T>
  static absl::Status Dispatch(KernelContext& ctx, const Tensor& params, const Tensor& indices, const Tensor& dy,
                               int axis) {
    if (indices.dtype() == DType::kInt64) return Scatter<T, int64_t>(ctx, params, indices, dy, axis);
    return Scatter<T, int32_t>(ctx, params, indices, dy, axis);
  }

  template <typename T, typename I>
  static absl::Status Scatter(KernelContext& ctx, const Tensor& params, const Tensor& indices, const Tensor& dy,
                              int axis) {
    const Shape& ps = params.shape();
    const int64_t limit = ps.dim(axis);
    const I* idx = indices.data<I>();
    const int64_t count = indices.num_elements();
    for (int64_t j = 0; j < count; ++j) {
      if (idx[j] < 0 || idx[j] >= limit)
        return absl::InvalidArgumentError(absl::StrCat("GatherGrad: index ", idx[j], " (at position ", j,
                                                       ") is out of range [0, ", limit, ") for axis ", axis,
                                                       " of params shape ", ps.DebugString()));
    }
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= ps.dim(d);
    for (int d = axis + 1; d < ps.rank(); ++d) inner *= ps.dim(d);
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(params.dtype(), ps));
    const T* src = dy.data<T>();
    T* dst = out.mutable_data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      T* block = dst + o * limit * inner;
      for (int64_t j = 0; j < count; ++j) {
        T* row = block + static_cast<int64_t>(idx[j]) * inner;
        for (int64_t k = 0; k < inner; ++k) row[k] = kernels::WrapAdd(row[k], src[k]);
        src += inner;
      }
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

  const int64_t axis_;
};

// ---------------------------------------------------------------------------

class BroadcastToKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ABSL_PREDICT_FALSE(ctx.num_inputs() != 2)) return kernels::ArityError(2, ctx.num_inputs());
    const Tensor& x = ctx.input(0);
    const Tensor& like = ctx.input(1);
    if (ABSL_PREDICT_TRUE(x.is_inline_scalar() && like.is_inline_scalar() && x.valid())) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    TDF_RETURN_IF_ERROR(kernels::CheckCpuInputs(ctx));
    if (!x.valid()) return InvalidInputError(0);
    const Shape& target = like.shape();
    if (x.shape() == target) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    const Shape* shapes[] = {&x.shape(), &target};
    absl::StatusOr<Shape> joint = kernels::BroadcastShapes(shapes);
    if (!joint.ok() || *joint != target)
      return absl::InvalidArgumentError(absl::StrCat("BroadcastTo: cannot broadcast shape ", x.shape().DebugString(),
                                                     " to shape ", target.DebugString()));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), target));
    StridedCopy(x, kernels::BroadcastStrides(x.shape(), target), 0, out);
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterArrayKernels(KernelRegistry& r) {
  kernels::RegisterCpu<ReshapeKernel>(r, "Reshape");
  r.Register("ReshapeLike", Device::Type::kCpu,
             [](const NodeDef& n) { return kernels::CreateSimple<ReshapeLikeKernel>(n); });
  kernels::RegisterCpu<TransposeKernel>(r, "Transpose");
  kernels::RegisterCpu<ConcatKernel>(r, "Concat");
  kernels::RegisterCpu<SliceKernel>(r, "Slice");
  kernels::RegisterCpu<GatherKernel>(r, "Gather");
  kernels::RegisterCpu<ConcatGradKernel>(r, "ConcatGrad");
  kernels::RegisterCpu<SliceGradKernel>(r, "SliceGrad");
  kernels::RegisterCpu<GatherGradKernel>(r, "GatherGrad");
  r.Register("BroadcastTo", Device::Type::kCpu,
             [](const NodeDef& n) { return kernels::CreateSimple<BroadcastToKernel>(n); });
}

}  // namespace tdf
