// Neural-network CPU kernels: Softmax and SoftmaxCrossEntropy, both over the
// last axis. Both subtract the row maximum before exponentiating, so large
// logits do not overflow.
#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

template <typename T>
using Row = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using MutRow = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

absl::Status CheckFloatRank1(const Tensor& t, const char* op, const char* what) {
  if (!IsFloating(t.dtype())) return kernels::UnsupportedDTypeError(op, t.dtype());
  if (t.rank() < 1)
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " must have rank >= 1, got a scalar"));
  return absl::OkStatus();
}

class SoftmaxKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 1));
    const Tensor& x = ctx.input(0);
    TDF_RETURN_IF_ERROR(CheckFloatRank1(x, "Softmax", "input"));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), x.shape()));
    if (x.dtype() == DType::kFloat32) {
      Run<float>(x, out);
    } else {
      Run<double>(x, out);
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static void Run(const Tensor& x, Tensor& out) {
    const int64_t cols = x.shape().dim(x.rank() - 1);
    if (cols == 0) return;
    const int64_t rows = x.num_elements() / cols;
    const T* in = x.data<T>();
    T* po = out.mutable_data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      Row<T> row(in + r * cols, cols);
      MutRow<T> o(po + r * cols, cols);
      const T m = row.maxCoeff();
      o = (row - m).exp();
      o /= o.sum();
    }
  }
};

class SoftmaxCrossEntropyKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 2));
    const Tensor& logits = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    TDF_RETURN_IF_ERROR(CheckFloatRank1(logits, "SoftmaxCrossEntropy", "logits"));
    if (labels.dtype() != logits.dtype()) return kernels::DTypeMismatchError(logits.dtype(), labels.dtype());
    if (labels.shape() != logits.shape())
      return absl::InvalidArgumentError(absl::StrCat("SoftmaxCrossEntropy: logits shape ",
                                                     logits.shape().DebugString(), " differs from labels shape ",
                                                     labels.shape().DebugString()));
    Shape loss_shape;
    for (int d = 0; d + 1 < logits.rank(); ++d) loss_shape.AddDim(logits.shape().dim(d));
    TDF_ASSIGN_OR_RETURN(Tensor loss, Tensor::Empty(logits.dtype(), loss_shape));
    TDF_ASSIGN_OR_RETURN(Tensor backprop, Tensor::Empty(logits.dtype(), logits.shape()));
    if (logits.dtype() == DType::kFloat32) {
      Run<float>(logits, labels, loss, backprop);
    } else {
      Run<double>(logits, labels, loss, backprop);
    }
    ctx.set_output(0, std::move(loss));
    if (ctx.num_outputs() > 1) ctx.set_output(1, std::move(backprop));
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static void Run(const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& backprop) {
    const int64_t cols = logits.shape().dim(logits.rank() - 1);
    const int64_t rows = loss.num_elements();
    const T* x = logits.data<T>();
    const T* y = labels.data<T>();
    T* pl = loss.mutable_data<T>();
    T* pb = backprop.mutable_data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      if (cols == 0) {
        pl[r] = T{0};
        continue;
      }
      Row<T> xr(x + r * cols, cols);
      Row<T> yr(y + r * cols, cols);
      MutRow<T> br(pb + r * cols, cols);
      const T m = xr.maxCoeff();
      const T lse = std::log((xr - m).exp().sum()) + m;  // log-sum-exp
      // loss = -sum(labels * log_softmax) = sum(labels * (lse - x)); a zero
      // label contributes nothing even where log_softmax is -inf.
      T sum = 0;
      for (int64_t c = 0; c < cols; ++c)
        if (yr[c] != T{0}) sum += yr[c] * (lse - xr[c]);
      pl[r] = sum;
      br = (xr - lse).exp() - yr;
    }
  }
};

}  // namespace

void RegisterNnKernels(KernelRegistry& r) {
  r.Register("Softmax", Device::Type::kCpu, [](const NodeDef& n) { return kernels::CreateSimple<SoftmaxKernel>(n); });
  r.Register("SoftmaxCrossEntropy", Device::Type::kCpu,
             [](const NodeDef& n) { return kernels::CreateSimple<SoftmaxCrossEntropyKernel>(n); });
}

}  // namespace tdf
