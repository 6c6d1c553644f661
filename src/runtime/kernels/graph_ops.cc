// CPU kernels of the trivial graph ops: Const (its value attribute),
// Identity, LoopCond (a bool passed through), NoOp, and ZerosLike /
// OnesLike (a filled tensor of the input's dtype and shape; a large
// ZerosLike is a view of the shared zero mapping, kernels::Zeros).
#include <algorithm>

#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernels::CheckCpuInputs;
using kernels::InvalidInputError;

class ConstKernel final : public OpKernel {
 public:
  explicit ConstKernel(Tensor value) : value_(std::move(value)) {}
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    TDF_ASSIGN_OR_RETURN(Tensor value, node.GetTensor("value"));
    if (!value.valid()) return absl::InvalidArgumentError("Const: attribute 'value' is an invalid tensor");
    return std::unique_ptr<OpKernel>(std::make_unique<ConstKernel>(std::move(value)));
  }
  absl::Status Compute(KernelContext& ctx) override {
    ctx.set_output(0, value_);
    return absl::OkStatus();
  }

 private:
  const Tensor value_;
};

class IdentityKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ABSL_PREDICT_FALSE(ctx.num_inputs() != 1)) return kernels::ArityError(1, ctx.num_inputs());
    const Tensor& x = ctx.input(0);
    if (ABSL_PREDICT_FALSE(!x.is_inline_scalar())) {
      TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
    } else if (ABSL_PREDICT_FALSE(!x.valid())) {
      return InvalidInputError(0);  // an OK status promises a valid output
    }
    ctx.set_output(0, x);
    return absl::OkStatus();
  }
};

class LoopCondKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ABSL_PREDICT_FALSE(ctx.num_inputs() != 1)) return kernels::ArityError(1, ctx.num_inputs());
    const Tensor& x = ctx.input(0);
    if (ABSL_PREDICT_FALSE(x.dtype() != DType::kBool)) return x.CheckDType(DType::kBool, "LoopCond predicate");
    if (ABSL_PREDICT_FALSE(!x.is_inline_scalar())) TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
    ctx.set_output(0, x);
    return absl::OkStatus();
  }
};

class NoOpKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext&) override { return absl::OkStatus(); }
};

template <bool kOnes>
class FillLikeKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ABSL_PREDICT_FALSE(ctx.num_inputs() != 1)) return kernels::ArityError(1, ctx.num_inputs());
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return InvalidInputError(0);
    if (!x.is_inline_scalar()) TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
    const Shape& shape = x.shape();
    absl::Status status;
    DispatchDType(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T value = kOnes ? T{1} : T{0};
      if (x.is_inline_scalar()) {
        ctx.set_output(0, Tensor::Scalar<T>(value));
        return;
      }
      if (!kOnes) {
        // The gradient of an unused value: often large, often only summed.
        absl::StatusOr<Tensor> out = kernels::Zeros(x.dtype(), shape);
        if (out.ok()) {
          ctx.set_output(0, *std::move(out));
        } else {
          status = out.status();
        }
        return;
      }
      absl::StatusOr<Tensor> out = Tensor::Empty(x.dtype(), shape);
      if (!out.ok()) {
        status = out.status();
        return;
      }
      std::fill_n(out->mutable_data<T>(), out->num_elements(), value);
      ctx.set_output(0, *std::move(out));
    });
    return status;
  }
};

}  // namespace

void RegisterGraphOpKernels(KernelRegistry& r) {
  kernels::RegisterCpu<ConstKernel>(r, "Const");
  kernels::RegisterSimpleCpu<IdentityKernel>(r, "Identity");
  kernels::RegisterSimpleCpu<LoopCondKernel>(r, "LoopCond");
  kernels::RegisterSimpleCpu<NoOpKernel>(r, "NoOp");
  kernels::RegisterSimpleCpu<FillLikeKernel<false>>(r, "ZerosLike");
  kernels::RegisterSimpleCpu<FillLikeKernel<true>>(r, "OnesLike");
}

}  // namespace tdf
