// Elementwise unary CPU kernels: Neg, Abs, Square, Sign, Exp, Log, Tanh,
// Sigmoid, Relu, Sqrt, Rsqrt, Reciprocal, LogicalNot (one kernel template,
// UnaryKernel<F>, over each op's functor F: inline scalars without
// allocating, tensors through Eigen), and Cast between any two dtypes.
// Integer semantics (wrapping Neg/Abs/Square): elementwise.h.
#include <cmath>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "runtime/kernels/elementwise.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernels::CheckCpuInputs;
using kernels::CheckInputs;
using kernels::InvalidInputError;
using kernels::kIsFloat;
using kernels::kIsInt;
using kernels::kIsNumeric;
using kernels::WrapMul;
using kernels::WrapSub;

// ---------------------------------------------------------------------------
// Unary functors: kName, kSupports<T>, Apply(x) (the scalar path), and
// Array(x) over an Eigen array (the tensor path; Eigen vectorizes exp, log,
// tanh, ...). Out is always T except for LogicalNot (bool -> bool anyway).

template <typename T>
using ArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using MutArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

struct NumericUnary {
  template <typename T>
  static constexpr bool kSupports = kIsNumeric<T>;
};
struct FloatUnary {
  template <typename T>
  static constexpr bool kSupports = kIsFloat<T>;
};

struct NegF : NumericUnary {
  static constexpr const char* kName = "Neg";
  template <typename T>
  static T Apply(T x) { return WrapSub(T{0}, x); }
  template <typename A>
  static auto Array(const A& x) { return x.unaryExpr([](auto v) { return Apply(v); }); }
};
struct AbsF : NumericUnary {
  static constexpr const char* kName = "Abs";
  template <typename T>
  static T Apply(T x) {
    if constexpr (kIsInt<T>) return x < 0 ? WrapSub(T{0}, x) : x;
    return std::abs(x);
  }
  template <typename A>
  static auto Array(const A& x) { return x.unaryExpr([](auto v) { return Apply(v); }); }
};
struct SquareF : NumericUnary {
  static constexpr const char* kName = "Square";
  template <typename T>
  static T Apply(T x) { return WrapMul(x, x); }
  template <typename A>
  static auto Array(const A& x) { return x.unaryExpr([](auto v) { return Apply(v); }); }
};
struct SignF : NumericUnary {
  static constexpr const char* kName = "Sign";
  template <typename T>
  static T Apply(T x) {
    if constexpr (kIsFloat<T>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<T>((x > T{0}) - (x < T{0}));
  }
  template <typename A>
  static auto Array(const A& x) { return x.unaryExpr([](auto v) { return Apply(v); }); }
};
struct ExpF : FloatUnary {
  static constexpr const char* kName = "Exp";
  template <typename T>
  static T Apply(T x) { return std::exp(x); }
  template <typename A>
  static auto Array(const A& x) { return x.exp(); }
};
struct LogF : FloatUnary {
  static constexpr const char* kName = "Log";
  template <typename T>
  static T Apply(T x) { return std::log(x); }
  template <typename A>
  static auto Array(const A& x) { return x.log(); }
};
struct TanhF : FloatUnary {
  static constexpr const char* kName = "Tanh";
  template <typename T>
  static T Apply(T x) { return std::tanh(x); }
  template <typename A>
  static auto Array(const A& x) { return x.tanh(); }
};
struct SigmoidF : FloatUnary {
  static constexpr const char* kName = "Sigmoid";
  // exp(-x) overflows to inf for very negative x, giving exactly 0: fine.
  template <typename T>
  static T Apply(T x) { return T{1} / (T{1} + std::exp(-x)); }
  template <typename A>
  static auto Array(const A& x) { return x.logistic(); }
};
struct ReluF : FloatUnary {
  static constexpr const char* kName = "Relu";
  template <typename T>
  static T Apply(T x) { return x > T{0} ? x : T{0}; }
  template <typename A>
  static auto Array(const A& x) { return x.unaryExpr([](auto v) { return Apply(v); }); }
};
struct SqrtF : FloatUnary {
  static constexpr const char* kName = "Sqrt";
  template <typename T>
  static T Apply(T x) { return std::sqrt(x); }
  template <typename A>
  static auto Array(const A& x) { return x.sqrt(); }
};
struct RsqrtF : FloatUnary {
  static constexpr const char* kName = "Rsqrt";
  template <typename T>
  static T Apply(T x) { return T{1} / std::sqrt(x); }
  template <typename A>
  static auto Array(const A& x) { return x.sqrt().inverse(); }
};
struct ReciprocalF : FloatUnary {
  static constexpr const char* kName = "Reciprocal";
  template <typename T>
  static T Apply(T x) { return T{1} / x; }
  template <typename A>
  static auto Array(const A& x) { return x.inverse(); }
};
struct LogicalNotF {
  static constexpr const char* kName = "LogicalNot";
  template <typename T>
  static constexpr bool kSupports = std::is_same_v<T, bool>;
  template <typename T>
  static T Apply(T x) { return !x; }
  template <typename A>
  static auto Array(const A& x) { return x.unaryExpr([](bool v) { return !v; }); }
};

template <typename F>
class UnaryKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ABSL_PREDICT_FALSE(ctx.num_inputs() != 1)) return kernels::ArityError(1, ctx.num_inputs());
    const Tensor& x = ctx.input(0);
    if (ABSL_PREDICT_TRUE(x.is_inline_scalar())) {
      switch (x.dtype()) {
        case DType::kInt64: return Scalar<int64_t>(ctx, x);
        case DType::kInt32: return Scalar<int32_t>(ctx, x);
        case DType::kFloat64: return Scalar<double>(ctx, x);
        case DType::kFloat32: return Scalar<float>(ctx, x);
        case DType::kBool: return Scalar<bool>(ctx, x);
        default: return InvalidInputError(0);
      }
    }
    TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
    absl::Status status;
    DispatchDType(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!F::template kSupports<T>) {
        status = kernels::UnsupportedDTypeError(F::kName, x.dtype());
      } else {
        absl::StatusOr<Tensor> out = Tensor::Empty(x.dtype(), x.shape());
        if (!out.ok()) {
          status = out.status();
          return;
        }
        const int64_t n = x.num_elements();
        MutArrayMap<T>(out->mutable_data<T>(), n) = F::Array(ArrayMap<T>(x.data<T>(), n));
        ctx.set_output(0, *std::move(out));
      }
    });
    return status;
  }

 private:
  template <typename T>
  static absl::Status Scalar(KernelContext& ctx, const Tensor& x) {
    if constexpr (!F::template kSupports<T>) {
      return kernels::UnsupportedDTypeError(F::kName, DTypeOf<T>::value);
    } else {
      ctx.set_output(0, Tensor::Scalar<T>(F::template Apply<T>(x.scalar<T>())));
      return absl::OkStatus();
    }
  }
};

// ---------------------------------------------------------------------------
// Cast

// Defined conversions: float -> int saturates and maps NaN to 0 (a plain
// static_cast would be undefined behaviour out of range); anything -> bool
// is `!= 0`.
template <typename D, typename S>
inline D CastValue(S s) {
  if constexpr (std::is_same_v<D, bool>) {
    return s != S{0};
  } else if constexpr (kIsInt<D> && kIsFloat<S>) {
    if (std::isnan(s)) return D{0};
    if (s <= static_cast<S>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (s >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(s);
  } else {
    return static_cast<D>(s);
  }
}

class CastKernel final : public OpKernel {
 public:
  explicit CastKernel(DType dst) : dst_(dst) {}
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    TDF_ASSIGN_OR_RETURN(DType dst, node.GetType("DstT"));
    if (dst == DType::kInvalid) return absl::InvalidArgumentError("Cast: DstT must not be invalid");
    return std::unique_ptr<OpKernel>(std::make_unique<CastKernel>(dst));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 1));
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return InvalidInputError(0);
    if (x.dtype() == dst_) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    absl::Status status;
    DispatchDType(x.dtype(), [&](auto src_zero) {
      using S = decltype(src_zero);
      DispatchDType(dst_, [&](auto dst_zero) {
        using D = decltype(dst_zero);
        if (x.is_inline_scalar()) {
          ctx.set_output(0, Tensor::Scalar<D>(CastValue<D, S>(x.scalar<S>())));
          return;
        }
        absl::StatusOr<Tensor> out = Tensor::Empty(dst_, x.shape());
        if (!out.ok()) {
          status = out.status();
          return;
        }
        const S* in = x.data<S>();
        D* po = out->mutable_data<D>();
        for (int64_t i = 0, n = x.num_elements(); i < n; ++i) po[i] = CastValue<D, S>(in[i]);
        ctx.set_output(0, *std::move(out));
      });
    });
    return status;
  }

 private:
  DType dst_;
};

template <typename F>
void RegUnary(KernelRegistry& r) {
  kernels::RegisterSimpleCpu<UnaryKernel<F>>(r, F::kName);
}

}  // namespace

void RegisterElementwiseUnaryKernels(KernelRegistry& r) {
  RegUnary<NegF>(r);
  RegUnary<AbsF>(r);
  RegUnary<SquareF>(r);
  RegUnary<SignF>(r);
  RegUnary<ExpF>(r);
  RegUnary<LogF>(r);
  RegUnary<TanhF>(r);
  RegUnary<SigmoidF>(r);
  RegUnary<ReluF>(r);
  RegUnary<SqrtF>(r);
  RegUnary<RsqrtF>(r);
  RegUnary<ReciprocalF>(r);
  RegUnary<LogicalNotF>(r);

  kernels::RegisterCpu<CastKernel>(r, "Cast");
}

}  // namespace tdf
