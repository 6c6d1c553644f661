// The executor's scalar fast path: elementwise ops on inline CPU scalars run
// here, inline in the firing loop, without a kernel call, a KernelContext or
// a Status (scalar programs such as fib fire tens of millions of them). Any
// case it does not cover (tensors, mixed dtypes, integer division by zero)
// falls back to the op's kernel, which reports errors.
#ifndef TDF_SRC_RUNTIME_SCALAR_OPS_H_
#define TDF_SRC_RUNTIME_SCALAR_OPS_H_

#include <cstdint>
#include <string>

#include "absl/base/attributes.h"
#include "runtime/kernels/kernel_util.h"
#include "tdf/tensor.h"

namespace tdf {
namespace runtime {

enum class ScalarOp : uint8_t {
  kNone,
  kIdentity,
  kAdd, kSub, kMul, kDiv, kMod, kMaximum, kMinimum,
  kNeg,
  kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual,
  kLogicalAnd, kLogicalOr, kLogicalNot,
  // The plumbing AddGradients emits around every differentiated op: on
  // scalars a gradient step is mostly these (exp_ext: 3 of 17 firings).
  kSumToShapeOf,  // of two scalars: input 0
  kZerosLike, kOnesLike,
};

ScalarOp ScalarOpFor(const std::string& op);

namespace internal {

template <typename T>
inline bool Binary(ScalarOp op, T a, T b, Tensor* out) {
  switch (op) {
    // Integers wrap on overflow, as the kernels do (kernels::WrapAdd):
    // signed overflow is undefined in C++, and INT_MIN / -1 traps on x86.
    case ScalarOp::kAdd: *out = Tensor::Scalar<T>(kernels::WrapAdd(a, b)); return true;
    case ScalarOp::kSub: *out = Tensor::Scalar<T>(kernels::WrapSub(a, b)); return true;
    case ScalarOp::kMul: *out = Tensor::Scalar<T>(kernels::WrapMul(a, b)); return true;
    case ScalarOp::kDiv:
      if constexpr (std::is_integral_v<T>) {
        if (b == 0) return false;  // the kernel reports the error
        *out = Tensor::Scalar<T>(b == -1 ? kernels::WrapSub(T{0}, a) : static_cast<T>(a / b));
        return true;
      }
      *out = Tensor::Scalar<T>(static_cast<T>(a / b));
      return true;
    case ScalarOp::kMod:
      if constexpr (std::is_integral_v<T>) {
        if (b == 0) return false;
        *out = Tensor::Scalar<T>(b == -1 ? T{0} : static_cast<T>(a % b));
        return true;
      } else {
        return false;
      }
    case ScalarOp::kMaximum: *out = Tensor::Scalar<T>(a > b ? a : b); return !std::is_floating_point_v<T>;
    case ScalarOp::kMinimum: *out = Tensor::Scalar<T>(a < b ? a : b); return !std::is_floating_point_v<T>;
    case ScalarOp::kLess: *out = Tensor::Scalar<bool>(a < b); return true;
    case ScalarOp::kLessEqual: *out = Tensor::Scalar<bool>(a <= b); return true;
    case ScalarOp::kGreater: *out = Tensor::Scalar<bool>(a > b); return true;
    case ScalarOp::kGreaterEqual: *out = Tensor::Scalar<bool>(a >= b); return true;
    case ScalarOp::kEqual: *out = Tensor::Scalar<bool>(a == b); return true;
    case ScalarOp::kNotEqual: *out = Tensor::Scalar<bool>(a != b); return true;
    default: return false;
  }
}

}  // namespace internal

// Computes `op` on inline scalars; false when the fast path does not apply.
// Always inline: each kBinaryScalarFns entry is this function with its op
// fixed, the op's tests folded away.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ComputeScalar(ScalarOp op, const Tensor& a, const Tensor* b,
                                                       Tensor* out) {
  if (!a.is_inline_scalar()) return false;
  if (op == ScalarOp::kIdentity) {
    *out = a;
    return true;
  }
  const DType t = a.dtype();
  if (op == ScalarOp::kSumToShapeOf) {  // nothing to sum between two scalars
    if (b == nullptr || !b->is_inline_scalar() || t == DType::kInvalid) return false;
    *out = a;
    return true;
  }
  if (b == nullptr) {
    switch (op) {
      case ScalarOp::kZerosLike:
      case ScalarOp::kOnesLike: {
        const int one = op == ScalarOp::kOnesLike ? 1 : 0;
        if (t == DType::kInt64) { *out = Tensor::Scalar<int64_t>(one); return true; }
        if (t == DType::kFloat64) { *out = Tensor::Scalar<double>(one); return true; }
        if (t == DType::kInt32) { *out = Tensor::Scalar<int32_t>(one); return true; }
        if (t == DType::kFloat32) { *out = Tensor::Scalar<float>(static_cast<float>(one)); return true; }
        if (t == DType::kBool) { *out = Tensor::Scalar<bool>(one != 0); return true; }
        return false;
      }
      case ScalarOp::kNeg:
        if (t == DType::kInt64) { *out = Tensor::Scalar<int64_t>(kernels::WrapSub(int64_t{0}, a.scalar<int64_t>())); return true; }
        if (t == DType::kFloat64) { *out = Tensor::Scalar<double>(-a.scalar<double>()); return true; }
        if (t == DType::kInt32) { *out = Tensor::Scalar<int32_t>(kernels::WrapSub(int32_t{0}, a.scalar<int32_t>())); return true; }
        if (t == DType::kFloat32) { *out = Tensor::Scalar<float>(-a.scalar<float>()); return true; }
        return false;
      case ScalarOp::kLogicalNot:
        if (t != DType::kBool) return false;
        *out = Tensor::Scalar<bool>(!a.scalar<bool>());
        return true;
      default:
        return false;
    }
  }
  if (!b->is_inline_scalar() || b->dtype() != t) return false;
  switch (t) {
    case DType::kInt64: return internal::Binary<int64_t>(op, a.scalar<int64_t>(), b->scalar<int64_t>(), out);
    case DType::kFloat64: return internal::Binary<double>(op, a.scalar<double>(), b->scalar<double>(), out);
    case DType::kInt32: return internal::Binary<int32_t>(op, a.scalar<int32_t>(), b->scalar<int32_t>(), out);
    case DType::kFloat32: return internal::Binary<float>(op, a.scalar<float>(), b->scalar<float>(), out);
    case DType::kBool:
      if (op == ScalarOp::kLogicalAnd) { *out = Tensor::Scalar<bool>(a.scalar<bool>() && b->scalar<bool>()); return true; }
      if (op == ScalarOp::kLogicalOr) { *out = Tensor::Scalar<bool>(a.scalar<bool>() || b->scalar<bool>()); return true; }
      if (op == ScalarOp::kEqual) { *out = Tensor::Scalar<bool>(a.scalar<bool>() == b->scalar<bool>()); return true; }
      if (op == ScalarOp::kNotEqual) { *out = Tensor::Scalar<bool>(a.scalar<bool>() != b->scalar<bool>()); return true; }
      return false;
    default:
      return false;
  }
}

// ComputeScalar(op, a, &b, out) with `op` resolved per table entry: the
// lean firings of two-input scalar ops call these. Each entry is
// ComputeScalar specialised for its op, so a firing branches only on the
// dtype (one call of the general function was ~47 instructions, most of
// them deciding the op again; fib fires 2.5 such ops per call).
using BinaryScalarFn = bool (*)(const Tensor& a, const Tensor& b, Tensor* out);
extern const BinaryScalarFn kBinaryScalarFns[];

inline bool ComputeScalarBinary(ScalarOp op, const Tensor& a, const Tensor& b, Tensor* out) {
  return kBinaryScalarFns[static_cast<uint8_t>(op)](a, b, out);
}

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_SCALAR_OPS_H_
