// Elementwise CUDA kernels: binary arithmetic and comparisons with NumPy
// broadcasting, unary math, Cast, AddN, and the graph ops that live on a
// device (Const, Identity, ZerosLike, OnesLike).
//
// Semantics match the CPU kernels (src/runtime/kernels/elementwise.h):
// integer Add/Sub/Mul/Neg/Abs/Square wrap, integer Div truncates and Mod is
// C++ `%`, INT_MIN / -1 wraps, Maximum/Minimum propagate NaN, Cast from float
// to int saturates and maps NaN to 0. An integer division by zero cannot fail
// the launch (the kernel is already queued): it writes 0, sets a bit in the
// launch's error word, and the next DeviceBackend::Synchronize reports it.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "cuda/cuda_kernel_util.h"
#include "cuda/device_backend.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace cuda {
namespace {

template <typename T>
constexpr bool kIsInt = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;
template <typename T>
constexpr bool kIsNumeric = kIsInt<T> || kIsFloat<T>;

template <typename T>
__device__ __forceinline__ T WrapAdd(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
__device__ __forceinline__ T WrapSub(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T>
__device__ __forceinline__ T WrapMul(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// ---------------------------------------------------------------------------
// Binary functors: kName, Supports<T>, Out<T>, and a __device__ Apply that
// may set a bit of the launch's error word (kCanFail).

struct NumericSame {
  template <typename T>
  static constexpr bool Supports() { return kIsNumeric<T>; }
  template <typename T>
  using Out = T;
};
struct FloatSame {
  template <typename T>
  static constexpr bool Supports() { return kIsFloat<T>; }
  template <typename T>
  using Out = T;
};
struct CompareBase {
  template <typename T>
  static constexpr bool Supports() { return true; }
  template <typename T>
  using Out = bool;
};
struct LogicalBase {
  template <typename T>
  static constexpr bool Supports() { return std::is_same_v<T, bool>; }
  template <typename T>
  using Out = bool;
};

#define TDF_BINARY(Name, Base, expr)                                            \
  struct Name##F : Base {                                                       \
    static constexpr const char* kName = #Name;                                 \
    template <typename T>                                                       \
    __device__ static auto Apply(T a, T b, unsigned int* err) { return expr; } \
  };

TDF_BINARY(Add, NumericSame, WrapAdd(a, b))
TDF_BINARY(Sub, NumericSame, WrapSub(a, b))
TDF_BINARY(Mul, NumericSame, WrapMul(a, b))
TDF_BINARY(TanhGrad, FloatSame, b * (T{1} - a * a))
TDF_BINARY(SigmoidGrad, FloatSame, b * a * (T{1} - a))
TDF_BINARY(ReluGrad, FloatSame, a > T{0} ? b : T{0})
TDF_BINARY(Less, CompareBase, a < b)
TDF_BINARY(LessEqual, CompareBase, a <= b)
TDF_BINARY(Greater, CompareBase, a > b)
TDF_BINARY(GreaterEqual, CompareBase, a >= b)
TDF_BINARY(Equal, CompareBase, a == b)
TDF_BINARY(NotEqual, CompareBase, a != b)
TDF_BINARY(LogicalAnd, LogicalBase, a && b)
TDF_BINARY(LogicalOr, LogicalBase, a || b)
#undef TDF_BINARY

struct DivF : NumericSame {
  static constexpr const char* kName = "Div";
  template <typename T>
  __device__ static T Apply(T a, T b, unsigned int* err) {
    if constexpr (kIsInt<T>) {
      if (b == 0) {
        atomicOr(err, kErrIntegerDivisionByZero);
        return T{0};
      }
      return b == -1 ? WrapSub(T{0}, a) : static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
struct ModF : NumericSame {
  static constexpr const char* kName = "Mod";
  template <typename T>
  __device__ static T Apply(T a, T b, unsigned int* err) {
    if constexpr (kIsInt<T>) {
      if (b == 0) {
        atomicOr(err, kErrIntegerDivisionByZero);
        return T{0};
      }
      return b == -1 ? T{0} : static_cast<T>(a % b);
    } else {
      return fmod(a, b);
    }
  }
};
struct MaximumF : NumericSame {
  static constexpr const char* kName = "Maximum";
  template <typename T>
  __device__ static T Apply(T a, T b, unsigned int*) {
    if constexpr (kIsFloat<T>) {
      if (isnan(a)) return a;
      if (isnan(b)) return b;
    }
    return a > b ? a : b;
  }
};
struct MinimumF : NumericSame {
  static constexpr const char* kName = "Minimum";
  template <typename T>
  __device__ static T Apply(T a, T b, unsigned int*) {
    if constexpr (kIsFloat<T>) {
      if (isnan(a)) return a;
      if (isnan(b)) return b;
    }
    return a < b ? a : b;
  }
};
struct PowF : NumericSame {
  static constexpr const char* kName = "Pow";
  template <typename T>
  __device__ static T Apply(T a, T b, unsigned int* err) {
    if constexpr (kIsInt<T>) {
      if (b < 0) {
        if (a == 1) return T{1};
        if (a == -1) return (b & 1) ? T{-1} : T{1};
        atomicOr(err, kErrIntegerPowNegativeExponent);
        return T{0};
      }
      T result = 1;
      T base = a;
      while (b > 0) {
        if (b & 1) result = WrapMul(result, base);
        base = WrapMul(base, base);
        b >>= 1;
      }
      return result;
    } else {
      return pow(a, b);
    }
  }
};

// Integer Div, Mod and Pow are the binary ops whose Apply can fail.
template <typename F, typename T>
inline constexpr bool kCanFail =
    kIsInt<T> && (std::is_same_v<F, DivF> || std::is_same_v<F, ModF> || std::is_same_v<F, PowF>);

// Equal shapes (mode 0), `a` one element (1), `b` one element (2).
template <typename F, typename T, typename O>
__global__ void BinaryFlatKernel(const T* a, const T* b, O* out, int64_t n, int mode, unsigned int* err) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T x = mode == 1 ? a[0] : a[i];
    const T y = mode == 2 ? b[0] : b[i];
    out[i] = F::template Apply<T>(x, y, err);
  }
}

// General NumPy broadcasting: `sa`/`sb` hold out's dims and each input's
// strides in out's index space (0 on broadcast dims).
template <typename F, typename T, typename O>
__global__ void BinaryBroadcastKernel(const T* a, const T* b, O* out, int64_t n, Strides sa, Strides sb,
                                      unsigned int* err) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rest = i, ia = 0, ib = 0;
    for (int d = sa.rank - 1; d >= 0; --d) {
      const int64_t idx = rest % sa.dims[d];
      rest /= sa.dims[d];
      ia += idx * sa.stride[d];
      ib += idx * sb.stride[d];
    }
    out[i] = F::template Apply<T>(a[ia], b[ib], err);
  }
}

Strides MakeStrides(const Shape& out, const kernels::Dims& strides) {
  Strides s;
  s.rank = out.rank();
  for (int d = 0; d < out.rank(); ++d) {
    s.dims[d] = out.dim(d);
    s.stride[d] = strides[d];
  }
  return s;
}

template <typename F>
class BinaryKernel final : public OpKernel {
 public:
  explicit BinaryKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype()) return kernels::DTypeMismatchError(a.dtype(), b.dtype());
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    absl::Status status;
    DispatchDType(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!F::template Supports<T>()) {
        status = UnsupportedDType(F::kName, a.dtype());
      } else {
        status = Run<T>(ctx, launch, a, b);
      }
    });
    return status;
  }

 private:
  template <typename T>
  absl::Status Run(KernelContext& ctx, const Launch& launch, const Tensor& a, const Tensor& b) {
    using O = typename F::template Out<T>;
    const Shape& sa = a.shape();
    const Shape& sb = b.shape();
    const Shape* shapes[] = {&sa, &sb};
    TDF_ASSIGN_OR_RETURN(Shape so, kernels::BroadcastShapes(shapes));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(DTypeOf<O>::value, so, device_));
    const int64_t n = out.num_elements();
    if (n > 0) {
      // Only ops that can fail take an error word; the rest launch unchecked.
      std::optional<CheckedLaunch> checked;
      if constexpr (kCanFail<F, T>) {
        checked.emplace(launch.device, ctx);
        TDF_RETURN_IF_ERROR(checked->status());
      }
      unsigned int* err = checked ? checked->word() : nullptr;
      int mode = -1;
      if (sa == so && sb == so) {
        mode = 0;
      } else if (a.num_elements() == 1 && sb == so) {
        mode = 1;
      } else if (b.num_elements() == 1 && sa == so) {
        mode = 2;
      }
      if (mode >= 0) {
        BinaryFlatKernel<F, T, O><<<GridFor(n), 256, 0, launch.stream>>>(
            a.data<T>(), b.data<T>(), out.mutable_data<O>(), n, mode, err);
      } else {
        if (so.rank() > kMaxRank) return RankTooHigh(F::kName, so.rank());
        BinaryBroadcastKernel<F, T, O><<<GridFor(n), 256, 0, launch.stream>>>(
            a.data<T>(), b.data<T>(), out.mutable_data<O>(), n,
            MakeStrides(so, kernels::BroadcastStrides(sa, so)), MakeStrides(so, kernels::BroadcastStrides(sb, so)),
            err);
      }
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("BinaryKernel");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

  const Device device_;
};

// ---------------------------------------------------------------------------
// Unary functors.

struct NumericUnary {
  template <typename T>
  static constexpr bool Supports() { return kIsNumeric<T>; }
};
struct FloatUnary {
  template <typename T>
  static constexpr bool Supports() { return kIsFloat<T>; }
};

#define TDF_UNARY(Name, Base, expr)                          \
  struct Name##F : Base {                                    \
    static constexpr const char* kName = #Name;              \
    template <typename T>                                    \
    __device__ static T Apply(T x) { return expr; }          \
  };

TDF_UNARY(Neg, NumericUnary, WrapSub(T{0}, x))
TDF_UNARY(Square, NumericUnary, WrapMul(x, x))
TDF_UNARY(Exp, FloatUnary, exp(x))
TDF_UNARY(Log, FloatUnary, log(x))
TDF_UNARY(Tanh, FloatUnary, tanh(x))
TDF_UNARY(Sigmoid, FloatUnary, T{1} / (T{1} + exp(-x)))
TDF_UNARY(Relu, FloatUnary, x > T{0} ? x : T{0})
TDF_UNARY(Sqrt, FloatUnary, sqrt(x))
TDF_UNARY(Rsqrt, FloatUnary, T{1} / sqrt(x))
TDF_UNARY(Reciprocal, FloatUnary, T{1} / x)
#undef TDF_UNARY

struct AbsF : NumericUnary {
  static constexpr const char* kName = "Abs";
  template <typename T>
  __device__ static T Apply(T x) {
    if constexpr (kIsInt<T>) {
      return x < 0 ? WrapSub(T{0}, x) : x;
    } else {
      return fabs(x);
    }
  }
};
struct SignF : NumericUnary {
  static constexpr const char* kName = "Sign";
  template <typename T>
  __device__ static T Apply(T x) {
    if constexpr (kIsFloat<T>) {
      if (isnan(x)) return x;
    }
    return static_cast<T>((x > T{0}) - (x < T{0}));
  }
};
struct LogicalNotF {
  static constexpr const char* kName = "LogicalNot";
  template <typename T>
  static constexpr bool Supports() { return std::is_same_v<T, bool>; }
  template <typename T>
  __device__ static T Apply(T x) { return !x; }
};

template <typename F, typename T>
__global__ void UnaryKernelImpl(const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = F::template Apply<T>(x[i]);
}

template <typename F>
class UnaryKernel final : public OpKernel {
 public:
  explicit UnaryKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& x = ctx.input(0);
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    absl::Status status;
    DispatchDType(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!F::template Supports<T>()) {
        status = UnsupportedDType(F::kName, x.dtype());
      } else {
        absl::StatusOr<Tensor> out = Tensor::Empty(x.dtype(), x.shape(), device_);
        if (!out.ok()) {
          status = out.status();
          return;
        }
        const int64_t n = x.num_elements();
        if (n > 0) {
          UnaryKernelImpl<F, T><<<GridFor(n), 256, 0, launch.stream>>>(x.data<T>(), out->mutable_data<T>(), n);
          cudaError_t err = cudaGetLastError();
          if (err != cudaSuccess) {
            status = CudaErrorStatus(err, "launch of kernel UnaryKernel", __FILE__, __LINE__);
            return;
          }
        }
        ctx.set_output(0, *std::move(out));
      }
    });
    return status;
  }

 private:
  const Device device_;
};

// ---------------------------------------------------------------------------
// Cast

template <typename D>
struct IntLimits;
template <>
struct IntLimits<int32_t> {
  static constexpr int32_t kMin = INT32_MIN;
  static constexpr int32_t kMax = INT32_MAX;
};
template <>
struct IntLimits<int64_t> {
  static constexpr int64_t kMin = INT64_MIN;
  static constexpr int64_t kMax = INT64_MAX;
};

template <typename D, typename S>
__device__ __forceinline__ D CastValue(S s) {
  if constexpr (std::is_same_v<D, bool>) {
    return s != S{0};
  } else if constexpr (kIsInt<D> && kIsFloat<S>) {
    if (isnan(s)) return D{0};
    if (s <= static_cast<S>(IntLimits<D>::kMin)) return IntLimits<D>::kMin;
    if (s >= static_cast<S>(IntLimits<D>::kMax)) return IntLimits<D>::kMax;
    return static_cast<D>(s);
  } else {
    return static_cast<D>(s);
  }
}

template <typename D, typename S>
__global__ void CastKernelImpl(const S* in, D* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = CastValue<D, S>(in[i]);
}

class CastKernel final : public OpKernel {
 public:
  CastKernel(DType dst, Device device) : dst_(dst), device_(device) {}
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    TDF_ASSIGN_OR_RETURN(DType dst, node.GetType("DstT"));
    if (dst == DType::kInvalid) return absl::InvalidArgumentError("Cast: DstT must not be invalid");
    return std::unique_ptr<OpKernel>(std::make_unique<CastKernel>(dst, device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& x = ctx.input(0);
    if (x.dtype() == dst_) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(dst_, x.shape(), device_));
    const int64_t n = x.num_elements();
    if (n > 0) {
      DispatchDType(x.dtype(), [&](auto src_zero) {
        using S = decltype(src_zero);
        DispatchDType(dst_, [&](auto dst_zero) {
          using D = decltype(dst_zero);
          CastKernelImpl<D, S><<<GridFor(n), 256, 0, launch.stream>>>(x.data<S>(), out.mutable_data<D>(), n);
        });
      });
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("CastKernel");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const DType dst_;
  const Device device_;
};

// ---------------------------------------------------------------------------
// AddN: out = in_0 + ... + in_{n-1}, same shapes.

template <typename T>
__global__ void AccumulateKernel(T* acc, const T* a, const T* b, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    acc[i] = WrapAdd(a[i], b[i]);
}

// Select(cond, x, y) with broadcasting among the three. Unlike the CPU
// kernel, a single condition is not read on the host to forward a branch
// (that would wait for the device): the kernel always runs.
template <typename T>
__global__ void SelectKernelImpl(const bool* c, const T* x, const T* y, T* out, int64_t n, Strides sc, Strides sx,
                                 Strides sy) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rest = i, ic = 0, ix = 0, iy = 0;
    for (int d = sc.rank - 1; d >= 0; --d) {
      const int64_t idx = rest % sc.dims[d];
      rest /= sc.dims[d];
      ic += idx * sc.stride[d];
      ix += idx * sx.stride[d];
      iy += idx * sy.stride[d];
    }
    out[i] = c[ic] ? x[ix] : y[iy];
  }
}

class SelectKernel final : public OpKernel {
 public:
  explicit SelectKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 3));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& c = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    TDF_RETURN_IF_ERROR(c.CheckDType(DType::kBool, "Select condition"));
    if (x.dtype() != y.dtype())
      return absl::InvalidArgumentError(
          absl::StrCat("dtype mismatch: x is ", DTypeName(x.dtype()), ", y is ", DTypeName(y.dtype())));
    const Shape* shapes[] = {&c.shape(), &x.shape(), &y.shape()};
    TDF_ASSIGN_OR_RETURN(Shape so, kernels::BroadcastShapes(shapes));
    if (so.rank() > kMaxRank) return RankTooHigh("Select", so.rank());
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), so, device_));
    const int64_t n = out.num_elements();
    if (n > 0) {
      const Strides sc = MakeStrides(so, kernels::BroadcastStrides(c.shape(), so));
      const Strides sx = MakeStrides(so, kernels::BroadcastStrides(x.shape(), so));
      const Strides sy = MakeStrides(so, kernels::BroadcastStrides(y.shape(), so));
      DispatchDType(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        SelectKernelImpl<T><<<GridFor(n), 256, 0, launch.stream>>>(c.data<bool>(), x.data<T>(), y.data<T>(),
                                                                   out.mutable_data<T>(), n, sc, sx, sy);
      });
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("SelectKernel");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

class AddNKernel final : public OpKernel {
 public:
  explicit AddNKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) return absl::InvalidArgumentError(absl::StrCat("expects at least 1 inputs, got ", n));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& first = ctx.input(0);
    if (first.dtype() == DType::kBool) return UnsupportedDType("AddN", first.dtype());
    for (int i = 1; i < n; ++i) {
      if (ctx.input(i).dtype() != first.dtype())
        return absl::InvalidArgumentError(absl::StrCat("dtype mismatch: input 0 is ", DTypeName(first.dtype()),
                                                       ", input ", i, " is ", DTypeName(ctx.input(i).dtype())));
      if (ctx.input(i).shape() != first.shape())
        return absl::InvalidArgumentError(absl::StrCat("AddN inputs must have the same shape: input 0 is ",
                                                       first.shape().DebugString(), ", input ", i, " is ",
                                                       ctx.input(i).shape().DebugString()));
    }
    if (n == 1) {
      ctx.set_output(0, first);
      return absl::OkStatus();
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(first.dtype(), first.shape(), device_));
    const int64_t m = first.num_elements();
    if (m > 0) {
      DispatchDType(first.dtype(), [&](auto zero) {
        using T = decltype(zero);
        if constexpr (kIsNumeric<T>) {
          T* po = out.mutable_data<T>();
          AccumulateKernel<T><<<GridFor(m), 256, 0, launch.stream>>>(po, first.data<T>(), ctx.input(1).data<T>(), m);
          for (int i = 2; i < n; ++i)
            AccumulateKernel<T><<<GridFor(m), 256, 0, launch.stream>>>(po, po, ctx.input(i).data<T>(), m);
        }
      });
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("AccumulateKernel");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

// ---------------------------------------------------------------------------
// Graph ops on a device.

// The host value is copied to the device once, when the kernel is created
// (the executor creates kernels when it compiles a graph); every firing then
// hands out the same device tensor.
class ConstKernel final : public OpKernel {
 public:
  explicit ConstKernel(Tensor value) : value_(std::move(value)) {}
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    TDF_ASSIGN_OR_RETURN(Tensor value, node.GetTensor("value"));
    if (!value.valid()) return absl::InvalidArgumentError("Const: attribute 'value' is an invalid tensor");
    if (!value.device().is_cpu())
      return absl::InvalidArgumentError("Const: attribute 'value' must be a host tensor");
    TDF_ASSIGN_OR_RETURN(Tensor on_device, Tensor::Empty(value.dtype(), value.shape(), device));
    TDF_RETURN_IF_ERROR(
        DeviceBackend::CopyHostToDevice(on_device.raw_mutable_data(), value.raw_data(), value.bytes(), device));
    return std::unique_ptr<OpKernel>(std::make_unique<ConstKernel>(std::move(on_device)));
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
  explicit IdentityKernel(Device device) : device_(device) {}
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    ctx.set_output(0, ctx.input(0));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = value;
}

template <bool kOnes>
class FillLikeKernel final : public OpKernel {
 public:
  explicit FillLikeKernel(Device device) : device_(device) {}
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    // Only the shape and dtype of the input are read, so it may live anywhere.
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return absl::InvalidArgumentError("input 0 is an invalid (empty) tensor");
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), x.shape(), device_));
    const int64_t n = out.num_elements();
    if (n > 0) {
      DispatchDType(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        FillKernel<T><<<GridFor(n), 256, 0, launch.stream>>>(out.mutable_data<T>(), n, kOnes ? T{1} : T{0});
      });
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("FillKernel");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

template <typename F>
void RegBinary(KernelRegistry& r) {
  RegisterCudaSimple<BinaryKernel<F>>(r, F::kName);
}
template <typename F>
void RegUnary(KernelRegistry& r) {
  RegisterCudaSimple<UnaryKernel<F>>(r, F::kName);
}

}  // namespace

void RegisterCudaElementwiseKernels(KernelRegistry& r) {
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

  RegisterCuda<CastKernel>(r, "Cast");
  RegisterCudaSimple<AddNKernel>(r, "AddN");
  RegisterCudaSimple<SelectKernel>(r, "Select");
  RegisterCuda<ConstKernel>(r, "Const");
  RegisterCudaSimple<IdentityKernel>(r, "Identity");
  RegisterCudaSimple<FillLikeKernel<false>>(r, "ZerosLike");
  RegisterCudaSimple<FillLikeKernel<true>>(r, "OnesLike");
}

}  // namespace cuda
}  // namespace tdf
