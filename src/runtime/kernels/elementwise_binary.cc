// Elementwise binary CPU kernels, NumPy broadcasting: arithmetic (Add, Sub,
// Mul, Div, Mod, Maximum, Minimum, Pow), the activation gradients (TanhGrad,
// SigmoidGrad, ReluGrad), comparisons (Less, LessEqual, Greater,
// GreaterEqual, Equal, NotEqual) and LogicalAnd / LogicalOr. One kernel
// template, BinaryKernel<F>, runs each op's functor F: on inline scalars
// without allocating, otherwise over whole tensors (BinaryGeneral).
// Integer semantics (wrapping, division by zero, Pow): elementwise.h.
#include <array>
#include <cmath>
#include <type_traits>

#include "runtime/kernels/elementwise.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernels::CheckCpuInputs;
using kernels::Dims;
using kernels::InvalidInputError;
using kernels::kIsFloat;
using kernels::kIsInt;
using kernels::kIsNumeric;
using kernels::WrapAdd;
using kernels::WrapMul;
using kernels::WrapSub;

// ---------------------------------------------------------------------------
// Binary functors. Each defines:
//   kName; kSupports<T>; Out<T> (result type); Apply(a, b);
//   kCanFail and, if set, Ok(a, b) and Error() (checked per element).

struct NoFail {
  static constexpr bool kCanFail = false;
  template <typename T>
  static bool Ok(T, T) { return true; }
  static absl::Status Error() { return absl::OkStatus(); }
};

struct NumericSame : NoFail {
  template <typename T>
  static constexpr bool kSupports = kIsNumeric<T>;
  template <typename T>
  using Out = T;
};

struct AddF : NumericSame {
  static constexpr const char* kName = "Add";
  template <typename T>
  static T Apply(T a, T b) { return WrapAdd(a, b); }
};
struct SubF : NumericSame {
  static constexpr const char* kName = "Sub";
  template <typename T>
  static T Apply(T a, T b) { return WrapSub(a, b); }
};
struct MulF : NumericSame {
  static constexpr const char* kName = "Mul";
  template <typename T>
  static T Apply(T a, T b) { return WrapMul(a, b); }
};

absl::Status DivisionByZero() { return absl::InvalidArgumentError("integer division by zero"); }

struct DivF : NumericSame {
  static constexpr const char* kName = "Div";
  static constexpr bool kCanFail = true;
  template <typename T>
  static bool Ok(T, T b) {
    if constexpr (kIsInt<T>) return b != 0;
    return true;
  }
  static absl::Status Error() { return DivisionByZero(); }
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsInt<T>) {
      // INT_MIN / -1 traps on x86; negate with wraparound instead.
      return b == -1 ? WrapSub(T{0}, a) : static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
struct ModF : NumericSame {
  static constexpr const char* kName = "Mod";
  static constexpr bool kCanFail = true;
  template <typename T>
  static bool Ok(T, T b) {
    if constexpr (kIsInt<T>) return b != 0;
    return true;
  }
  static absl::Status Error() { return DivisionByZero(); }
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsInt<T>) {
      return b == -1 ? T{0} : static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
struct MaximumF : NumericSame {
  static constexpr const char* kName = "Maximum";
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsFloat<T>) {
      // NaN propagates from either side.
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return a > b ? a : b;
  }
};
struct MinimumF : NumericSame {
  static constexpr const char* kName = "Minimum";
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsFloat<T>) {
      // NaN propagates from either side.
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return a < b ? a : b;
  }
};
struct PowF : NumericSame {
  static constexpr const char* kName = "Pow";
  static constexpr bool kCanFail = true;
  template <typename T>
  static bool Ok(T a, T b) {
    if constexpr (kIsInt<T>) return b >= 0 || a == 1 || a == -1;
    return true;
  }
  static absl::Status Error() {
    return absl::InvalidArgumentError("integer Pow with a negative exponent (base other than 1 or -1)");
  }
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsInt<T>) {
      if (b < 0) return (a == -1 && (b & 1)) ? T{-1} : T{1};  // Ok() admitted only |a| == 1.
      T result = 1;
      T base = a;
      while (b > 0) {
        if (b & 1) result = WrapMul(result, base);
        base = WrapMul(base, base);
        b >>= 1;
      }
      return result;
    } else {
      return std::pow(a, b);
    }
  }
};

// Float-only gradient helpers: (y or x, dy) -> dx.
struct FloatSame : NoFail {
  template <typename T>
  static constexpr bool kSupports = kIsFloat<T>;
  template <typename T>
  using Out = T;
};
struct TanhGradF : FloatSame {
  static constexpr const char* kName = "TanhGrad";
  template <typename T>
  static T Apply(T y, T dy) { return dy * (T{1} - y * y); }
};
struct SigmoidGradF : FloatSame {
  static constexpr const char* kName = "SigmoidGrad";
  template <typename T>
  static T Apply(T y, T dy) { return dy * y * (T{1} - y); }
};
struct ReluGradF : FloatSame {
  static constexpr const char* kName = "ReluGrad";
  template <typename T>
  static T Apply(T x, T dy) { return x > T{0} ? dy : T{0}; }
};

// Comparisons: any dtype in, bool out.
struct CompareBase : NoFail {
  template <typename T>
  static constexpr bool kSupports = true;
  template <typename T>
  using Out = bool;
};
struct LessF : CompareBase {
  static constexpr const char* kName = "Less";
  template <typename T>
  static bool Apply(T a, T b) { return a < b; }
};
struct LessEqualF : CompareBase {
  static constexpr const char* kName = "LessEqual";
  template <typename T>
  static bool Apply(T a, T b) { return a <= b; }
};
struct GreaterF : CompareBase {
  static constexpr const char* kName = "Greater";
  template <typename T>
  static bool Apply(T a, T b) { return a > b; }
};
struct GreaterEqualF : CompareBase {
  static constexpr const char* kName = "GreaterEqual";
  template <typename T>
  static bool Apply(T a, T b) { return a >= b; }
};
struct EqualF : CompareBase {
  static constexpr const char* kName = "Equal";
  template <typename T>
  static bool Apply(T a, T b) { return a == b; }
};
struct NotEqualF : CompareBase {
  static constexpr const char* kName = "NotEqual";
  template <typename T>
  static bool Apply(T a, T b) { return a != b; }
};

struct LogicalBase : NoFail {
  template <typename T>
  static constexpr bool kSupports = std::is_same_v<T, bool>;
  template <typename T>
  using Out = bool;
};
struct LogicalAndF : LogicalBase {
  static constexpr const char* kName = "LogicalAnd";
  template <typename T>
  static bool Apply(T a, T b) { return a && b; }
};
struct LogicalOrF : LogicalBase {
  static constexpr const char* kName = "LogicalOr";
  template <typename T>
  static bool Apply(T a, T b) { return a || b; }
};

// Runs F over two same-dtype CPU tensors with broadcasting.
template <typename F, typename T>
absl::Status BinaryGeneral(KernelContext& ctx, const Tensor& a, const Tensor& b) {
  using O = typename F::template Out<T>;
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  auto apply = [](T x, T y, O* out) -> bool {
    if constexpr (F::kCanFail) {
      if (ABSL_PREDICT_FALSE(!F::Ok(x, y))) return false;
    }
    *out = F::template Apply<T>(x, y);
    return true;
  };
  if (sa == sb || (a.num_elements() == 1 && sa.rank() <= sb.rank()) ||
      (b.num_elements() == 1 && sb.rank() <= sa.rank())) {
    // Equal shapes, or one side a single element: flat loops.
    const Shape& so = sa == sb ? sa : (a.num_elements() == 1 && sa.rank() <= sb.rank() ? sb : sa);
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(DTypeOf<O>::value, so));
    O* po = out.mutable_data<O>();
    const int64_t n = out.num_elements();
    bool ok = true;
    if (sa == sb) {
      if constexpr (F::kCanFail) {
        for (int64_t i = 0; i < n; ++i) ok &= apply(pa[i], pb[i], &po[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) po[i] = F::template Apply<T>(pa[i], pb[i]);
      }
    } else if (&so == &sb) {
      const T x = pa[0];
      if constexpr (F::kCanFail) {
        for (int64_t i = 0; i < n; ++i) ok &= apply(x, pb[i], &po[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) po[i] = F::template Apply<T>(x, pb[i]);  // vectorizes
      }
    } else {
      const T y = pb[0];
      if constexpr (F::kCanFail) {
        for (int64_t i = 0; i < n; ++i) ok &= apply(pa[i], y, &po[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) po[i] = F::template Apply<T>(pa[i], y);
      }
    }
    if (!ok) return F::Error();
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
  const Shape* shapes[] = {&sa, &sb};
  TDF_ASSIGN_OR_RETURN(Shape so, kernels::BroadcastShapes(shapes));
  TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(DTypeOf<O>::value, so));
  O* po = out.mutable_data<O>();
  bool ok = true;
  std::array<Dims, 2> strides = {kernels::BroadcastStrides(sa, so), kernels::BroadcastStrides(sb, so)};
  kernels::ForEachBroadcast<2>(so, strides, [&](int64_t o, int64_t ia, int64_t ib) {
    ok &= apply(pa[ia], pb[ib], &po[o]);
  });
  if (!ok) return F::Error();
  ctx.set_output(0, std::move(out));
  return absl::OkStatus();
}

template <typename F>
class BinaryKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ABSL_PREDICT_FALSE(ctx.num_inputs() != 2)) return kernels::ArityError(2, ctx.num_inputs());
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (ABSL_PREDICT_TRUE(a.is_inline_scalar() && b.is_inline_scalar() && a.dtype() == b.dtype())) {
      switch (a.dtype()) {
        case DType::kInt64: return Scalar<int64_t>(ctx, a, b);
        case DType::kInt32: return Scalar<int32_t>(ctx, a, b);
        case DType::kFloat64: return Scalar<double>(ctx, a, b);
        case DType::kFloat32: return Scalar<float>(ctx, a, b);
        case DType::kBool: return Scalar<bool>(ctx, a, b);
        default: break;
      }
    }
    return General(ctx, a, b);
  }

 private:
  template <typename T>
  static absl::Status Scalar(KernelContext& ctx, const Tensor& a, const Tensor& b) {
    if constexpr (!F::template kSupports<T>) {
      return kernels::UnsupportedDTypeError(F::kName, DTypeOf<T>::value);
    } else {
      const T x = a.scalar<T>();
      const T y = b.scalar<T>();
      if constexpr (F::kCanFail) {
        if (ABSL_PREDICT_FALSE(!F::Ok(x, y))) return F::Error();
      }
      ctx.set_output(0, Tensor::Scalar<typename F::template Out<T>>(F::template Apply<T>(x, y)));
      return absl::OkStatus();
    }
  }

  static absl::Status General(KernelContext& ctx, const Tensor& a, const Tensor& b) {
    if (!a.valid()) return InvalidInputError(0);
    if (!b.valid()) return InvalidInputError(1);
    TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
    if (a.dtype() != b.dtype()) return kernels::DTypeMismatchError(a.dtype(), b.dtype());
    absl::Status status;
    DispatchDType(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!F::template kSupports<T>) {
        status = kernels::UnsupportedDTypeError(F::kName, a.dtype());
      } else {
        status = BinaryGeneral<F, T>(ctx, a, b);
      }
    });
    return status;
  }
};

template <typename F>
void RegBinary(KernelRegistry& r) {
  kernels::RegisterSimpleCpu<BinaryKernel<F>>(r, F::kName);
}

}  // namespace

void RegisterElementwiseBinaryKernels(KernelRegistry& r) {
  RegBinary<AddF>(r);
  RegBinary<SubF>(r);
  RegBinary<MulF>(r);
  RegBinary<DivF>(r);
  RegBinary<ModF>(r);
  RegBinary<MaximumF>(r);
  RegBinary<MinimumF>(r);
  RegBinary<PowF>(r);
  RegBinary<TanhGradF>(r);
  RegBinary<SigmoidGradF>(r);
  RegBinary<ReluGradF>(r);
  RegBinary<LessF>(r);
  RegBinary<LessEqualF>(r);
  RegBinary<GreaterF>(r);
  RegBinary<GreaterEqualF>(r);
  RegBinary<EqualF>(r);
  RegBinary<NotEqualF>(r);
  RegBinary<LogicalAndF>(r);
  RegBinary<LogicalOrF>(r);
}

}  // namespace tdf
