// Elementwise CPU kernels: binary arithmetic and comparisons with NumPy
// broadcasting, unary math, logical ops, Cast, Select, AddN, and the trivial
// graph ops (Const, Identity, NoOp, LoopCond, ZerosLike, OnesLike).
//
// Every kernel has a fast path for inline scalars that neither allocates nor
// builds strings: scalar programs (fib, ack) run these billions of times.
//
// Integer semantics follow C++ (so results match native reference programs):
// Div truncates toward zero and Mod is C++ `%` (the sign follows the
// dividend); a zero divisor is an InvalidArgument error, and INT_MIN / -1
// wraps instead of trapping. Add/Sub/Mul/Neg/Abs/Square wrap on overflow
// (two's complement) rather than invoking undefined behaviour. Float Mod is
// std::fmod. Integer Pow with a negative exponent is an error unless the base
// is 1 or -1.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernels::CheckCpuInputs;
using kernels::CheckInputs;
using kernels::Dims;
using kernels::WrapAdd;
using kernels::WrapMul;
using kernels::WrapSub;

template <typename T>
constexpr bool kIsInt = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;
template <typename T>
constexpr bool kIsNumeric = kIsInt<T> || kIsFloat<T>;

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

absl::Status InvalidInputError(int i) {
  return absl::InvalidArgumentError(absl::StrCat("input ", i, " is an invalid (empty) tensor"));
}

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

// ---------------------------------------------------------------------------
// Select(cond, x, y)

class SelectKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 3));
    const Tensor& c = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    TDF_RETURN_IF_ERROR(c.CheckDType(DType::kBool, "Select condition"));
    if (!x.valid()) return InvalidInputError(1);
    if (x.dtype() != y.dtype())
      return absl::InvalidArgumentError(
          absl::StrCat("dtype mismatch: x is ", DTypeName(x.dtype()), ", y is ", DTypeName(y.dtype())));
    // One condition for same-shaped branches: forward a branch, no copy.
    if (c.num_elements() == 1 && x.shape() == y.shape() && c.rank() <= x.rank()) {
      ctx.set_output(0, c.scalar<bool>() ? x : y);
      return absl::OkStatus();
    }
    const Shape* shapes[] = {&c.shape(), &x.shape(), &y.shape()};
    TDF_ASSIGN_OR_RETURN(Shape so, kernels::BroadcastShapes(shapes));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), so));
    std::array<Dims, 3> strides = {kernels::BroadcastStrides(c.shape(), so), kernels::BroadcastStrides(x.shape(), so),
                                   kernels::BroadcastStrides(y.shape(), so)};
    const bool* pc = c.data<bool>();
    DispatchDType(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.data<T>();
      const T* py = y.data<T>();
      T* po = out.mutable_data<T>();
      kernels::ForEachBroadcast<3>(so, strides, [&](int64_t o, int64_t ic, int64_t ix, int64_t iy) {
        po[o] = pc[ic] ? px[ix] : py[iy];
      });
    });
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// AddN: sum of same-shaped inputs.

class AddNKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (ABSL_PREDICT_FALSE(n < 1)) return kernels::MinArityError(1, n);
    const Tensor& first = ctx.input(0);
    const DType dtype = first.dtype();
    bool all_inline = true;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != dtype)
        return absl::InvalidArgumentError(
            absl::StrCat("dtype mismatch: input 0 is ", DTypeName(dtype), ", input ", i, " is ", DTypeName(t.dtype())));
      all_inline &= t.is_inline_scalar();
    }
    if (!first.valid()) return InvalidInputError(0);
    if (dtype == DType::kBool) return kernels::UnsupportedDTypeError("AddN", dtype);
    if (n == 1) {
      TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
      ctx.set_output(0, first);
      return absl::OkStatus();
    }
    absl::Status status;
    if (all_inline) {
      DispatchDType(dtype, [&](auto zero) {
        using T = decltype(zero);
        T acc = first.scalar<T>();
        for (int i = 1; i < n; ++i) acc = WrapAdd(acc, ctx.input(i).scalar<T>());
        ctx.set_output(0, Tensor::Scalar<T>(acc));
      });
      return status;
    }
    TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
    for (int i = 1; i < n; ++i) {
      if (ctx.input(i).shape() != first.shape())
        return absl::InvalidArgumentError(absl::StrCat("AddN inputs must have the same shape: input 0 is ",
                                                       first.shape().DebugString(), ", input ", i, " is ",
                                                       ctx.input(i).shape().DebugString()));
    }
    // Known zeros (gradients of unused branches) add nothing: skip them, and
    // pass a lone remaining term through without copying.
    absl::InlinedVector<const Tensor*, 8> terms;
    for (int i = 0; i < n; ++i)
      if (!kernels::IsSharedZeros(ctx.input(i))) terms.push_back(&ctx.input(i));
    if (terms.size() <= 1) {
      ctx.set_output(0, terms.empty() ? first : *terms[0]);
      return status;
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(dtype, first.shape()));
    DispatchDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      const int64_t m = first.num_elements();
      T* po = out.mutable_data<T>();
      if constexpr (kIsFloat<T>) {
        using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
        auto in = [&](size_t k) { return Eigen::Map<const Arr>(terms[k]->data<T>(), m); };
        Eigen::Map<Arr> o(po, m);
        // Up to three more terms per pass over the output, added left to
        // right (the same rounding as one term at a time).
        const size_t t = terms.size();
        size_t k = 2;
        if (t == 2) {
          o = in(0) + in(1);
        } else {
          o = in(0) + in(1) + in(2);
          k = 3;
        }
        for (; k + 3 <= t; k += 3) o = o + in(k) + in(k + 1) + in(k + 2);
        if (k + 2 == t) o = o + in(k) + in(k + 1);
        if (k + 1 == t) o = o + in(k);
      } else {
        const T* p0 = terms[0]->data<T>();
        for (int64_t j = 0; j < m; ++j) po[j] = p0[j];
        for (size_t k = 1; k < terms.size(); ++k) {
          const T* pk = terms[k]->data<T>();
          for (int64_t j = 0; j < m; ++j) po[j] = WrapAdd(po[j], pk[j]);
        }
      }
    });
    ctx.set_output(0, std::move(out));
    return status;
  }
};

// ---------------------------------------------------------------------------
// Graph ops.

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

template <typename K>
void Reg(KernelRegistry& r, const char* op) {
  kernels::RegisterCpu<K>(r, op);
}

template <typename K>
struct Simple {
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return kernels::CreateSimple<K>(node);
  }
};

template <typename F>
void RegBinary(KernelRegistry& r) {
  Reg<Simple<BinaryKernel<F>>>(r, F::kName);
}
template <typename F>
void RegUnary(KernelRegistry& r) {
  Reg<Simple<UnaryKernel<F>>>(r, F::kName);
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
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

  Reg<CastKernel>(r, "Cast");
  Reg<Simple<SelectKernel>>(r, "Select");
  Reg<Simple<AddNKernel>>(r, "AddN");
  Reg<ConstKernel>(r, "Const");
  Reg<Simple<IdentityKernel>>(r, "Identity");
  Reg<Simple<LoopCondKernel>>(r, "LoopCond");
  Reg<Simple<NoOpKernel>>(r, "NoOp");
  Reg<Simple<FillLikeKernel<false>>>(r, "ZerosLike");
  Reg<Simple<FillLikeKernel<true>>>(r, "OnesLike");
}

}  // namespace tdf
