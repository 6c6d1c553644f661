// Reduction CPU kernels: Sum, Mean, Max over `axes`, and SumToShapeOf (the
// gradient of broadcasting).
//
// A reduction is done as a sequence of [outer, reduced, inner] passes: the
// dims are first compressed (size-1 dims dropped, adjacent kept or reduced
// dims merged), which turns the common cases (all axes, last axis, leading
// axes) into a single pass; reducing the last axis uses Eigen's vectorized
// row reductions.
//
// Mean of an integer tensor truncates (integer division). Max over zero
// elements yields the lowest value of the dtype (-inf for floats); Mean over
// zero elements is NaN for floats and an error for integers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernels::CheckInputs;
using kernels::Dims;

enum class ReduceKind { kSum, kMean, kMax };

template <typename T, ReduceKind K>
T Identity() {
  if constexpr (K == ReduceKind::kMax) {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  } else {
    return T{0};
  }
}

template <typename T, ReduceKind K>
inline T Combine(T acc, T v) {
  if constexpr (K == ReduceKind::kMax) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v)) return v;  // NaN wins, as in a plain comparison chain with propagation.
    }
    return v > acc ? v : acc;
  } else {
    return kernels::WrapAdd(acc, v);
  }
}

// out[o, i] = reduce_r in[o, r, i].
template <typename T, ReduceKind K>
void Reduce3D(const T* in, int64_t outer, int64_t reduced, int64_t inner, T* out) {
  if (inner == 1 && std::is_floating_point_v<T> && reduced > 0) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Mat> m(in, outer, reduced);
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> o(out, outer);
    if constexpr (K == ReduceKind::kMax) {
      // Eigen's maxCoeff does not propagate NaN; keep our semantics.
      for (int64_t i = 0; i < outer; ++i) {
        T acc = Identity<T, K>();
        const T* row = in + i * reduced;
        for (int64_t r = 0; r < reduced; ++r) acc = Combine<T, K>(acc, row[r]);
        out[i] = acc;
      }
    } else {
      o = m.rowwise().sum();
    }
    return;
  }
  const T init = Identity<T, K>();
  for (int64_t o = 0; o < outer; ++o) {
    T* dst = out + o * inner;
    std::fill_n(dst, inner, init);
    const T* src = in + o * reduced * inner;
    for (int64_t r = 0; r < reduced; ++r) {
      const T* row = src + r * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = Combine<T, K>(dst[i], row[i]);
    }
  }
}

struct Group {
  int64_t size;
  bool reduced;
};

// Reduces `in` (shape `dims`) over the dims flagged in `reduce`, writing
// prod(kept dims) elements to `out` in row-major order of the kept dims.
template <typename T, ReduceKind K>
void ReduceDims(const T* in, absl::Span<const int64_t> dims, const std::vector<bool>& reduce, T* out) {
  int64_t total = 1, kept = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    total *= dims[i];
    if (!reduce[i]) kept *= dims[i];
  }
  if (kept == 0) return;
  if (total == 0) {  // some reduced dim is 0: every output is the identity.
    std::fill_n(out, kept, Identity<T, K>());
    return;
  }
  std::vector<Group> groups;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduce[i]) {
      groups.back().size *= dims[i];
    } else {
      groups.push_back({dims[i], reduce[i]});
    }
  }
  int passes = 0;
  for (const Group& g : groups) passes += g.reduced;
  if (passes == 0) {
    std::copy_n(in, total, out);
    return;
  }
  std::vector<T> scratch[2];
  const T* cur = in;
  for (int pass = 0; pass < passes; ++pass) {
    // The last reduced group.
    int g = static_cast<int>(groups.size()) - 1;
    while (!groups[g].reduced) --g;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < g; ++i) outer *= groups[i].size;
    for (size_t i = g + 1; i < groups.size(); ++i) inner *= groups[i].size;
    T* dst = out;
    if (pass + 1 < passes) {
      scratch[pass % 2].resize(outer * inner);
      dst = scratch[pass % 2].data();
    }
    Reduce3D<T, K>(cur, outer, groups[g].size, inner, dst);
    cur = dst;
    groups.erase(groups.begin() + g);
    // The groups around g were both kept (groups alternate): merge them.
    if (g > 0 && g < static_cast<int>(groups.size())) {
      groups[g - 1].size *= groups[g].size;
      groups.erase(groups.begin() + g);
    }
  }
}

absl::Status EmptyIntMeanError() {
  return absl::InvalidArgumentError("Mean of an integer tensor over zero elements (division by zero)");
}

// Runs the reduction of `x` over `reduce` into a new tensor of `out_shape`.
template <ReduceKind K>
absl::StatusOr<Tensor> ReduceTensor(const Tensor& x, const std::vector<bool>& reduce, const Shape& out_shape,
                                    const char* op) {
  if (x.dtype() == DType::kBool) return kernels::UnsupportedDTypeError(op, x.dtype());
  int64_t count = 1;
  for (int i = 0; i < x.rank(); ++i)
    if (reduce[i]) count *= x.shape().dim(i);
  if (K == ReduceKind::kMean && count == 0 && IsInteger(x.dtype())) return EmptyIntMeanError();
  TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), out_shape));
  DispatchDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      constexpr ReduceKind kInner = K == ReduceKind::kMean ? ReduceKind::kSum : K;
      T* po = out.mutable_data<T>();
      ReduceDims<T, kInner>(x.data<T>(), x.shape().dims(), reduce, po);
      if constexpr (K == ReduceKind::kMean) {
        const int64_t n = out.num_elements();
        if constexpr (std::is_floating_point_v<T>) {
          const T scale = static_cast<T>(count);  // 0 -> NaN, as 0/0 should be
          for (int64_t i = 0; i < n; ++i) po[i] = po[i] / scale;
        } else {
          // count > 0 here (checked above).
          for (int64_t i = 0; i < n; ++i) po[i] = static_cast<T>(static_cast<int64_t>(po[i]) / count);
        }
      }
    }
  });
  return out;
}

template <ReduceKind K>
class ReduceKernel final : public OpKernel {
 public:
  ReduceKernel(std::optional<std::vector<int64_t>> axes, bool keep_dims, const char* op)
      : axes_(std::move(axes)), keep_dims_(keep_dims), op_(op) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Make(const NodeDef& node, const char* op) {
    std::optional<std::vector<int64_t>> axes;
    if (node.FindAttr("axes") != nullptr) {
      TDF_ASSIGN_OR_RETURN(axes, node.GetIntList("axes"));
    }
    return std::unique_ptr<OpKernel>(
        std::make_unique<ReduceKernel>(std::move(axes), node.GetBoolOr("keep_dims", false), op));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 1));
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return absl::InvalidArgumentError("input 0 is an invalid (empty) tensor");
    const int rank = x.rank();
    if (rank == 0 && (!axes_ || axes_->empty())) {
      // Reducing a scalar is the identity (for every kind).
      if (x.dtype() == DType::kBool) return kernels::UnsupportedDTypeError(op_, x.dtype());
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    std::vector<bool> reduce(rank, !axes_.has_value());
    if (axes_) {
      for (int64_t a : *axes_) {
        TDF_ASSIGN_OR_RETURN(int axis, kernels::NormalizeAxis(a, rank));
        reduce[axis] = true;
      }
    }
    Shape out_shape;
    for (int i = 0; i < rank; ++i) {
      if (!reduce[i]) {
        out_shape.AddDim(x.shape().dim(i));
      } else if (keep_dims_) {
        out_shape.AddDim(1);
      }
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, ReduceTensor<K>(x, reduce, out_shape, op_));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::optional<std::vector<int64_t>> axes_;
  const bool keep_dims_;
  const char* const op_;
};

absl::Status NotReducibleError(const Shape& x, const Shape& like) {
  return absl::InvalidArgumentError(absl::StrCat("SumToShapeOf: cannot sum shape ", x.DebugString(), " to shape ",
                                                 like.DebugString(), " (it is not a broadcast of it)"));
}

class SumToShapeOfKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ABSL_PREDICT_FALSE(ctx.num_inputs() != 2)) return kernels::ArityError(2, ctx.num_inputs());
    const Tensor& x = ctx.input(0);
    const Tensor& like = ctx.input(1);
    // Scalar programs: both scalars, nothing to sum.
    if (ABSL_PREDICT_TRUE(x.is_inline_scalar() && like.is_inline_scalar() && x.valid())) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    TDF_RETURN_IF_ERROR(kernels::CheckCpuInputs(ctx));
    if (!x.valid()) return absl::InvalidArgumentError("input 0 is an invalid (empty) tensor");
    const Shape& xs = x.shape();
    const Shape& ls = like.shape();
    if (xs == ls) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    const int rx = xs.rank(), rl = ls.rank();
    for (int j = 0; j < rl - rx; ++j)
      if (ls.dim(j) != 1) return NotReducibleError(xs, ls);
    std::vector<bool> reduce(rx, false);
    for (int i = 0; i < rx; ++i) {
      const int j = i - (rx - rl);
      if (j < 0) {
        reduce[i] = true;
      } else if (ls.dim(j) == xs.dim(i)) {
        reduce[i] = false;
      } else if (ls.dim(j) == 1) {
        reduce[i] = true;
      } else {
        return NotReducibleError(xs, ls);
      }
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, ReduceTensor<ReduceKind::kSum>(x, reduce, ls, "SumToShapeOf"));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  r.Register("Sum", Device::Type::kCpu,
             [](const NodeDef& n) { return ReduceKernel<ReduceKind::kSum>::Make(n, "Sum"); });
  r.Register("Mean", Device::Type::kCpu,
             [](const NodeDef& n) { return ReduceKernel<ReduceKind::kMean>::Make(n, "Mean"); });
  r.Register("Max", Device::Type::kCpu,
             [](const NodeDef& n) { return ReduceKernel<ReduceKind::kMax>::Make(n, "Max"); });
  r.Register("SumToShapeOf", Device::Type::kCpu, [](const NodeDef& n) {
    return kernels::CreateSimple<SumToShapeOfKernel>(n);
  });
}

}  // namespace tdf
