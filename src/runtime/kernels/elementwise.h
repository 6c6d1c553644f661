// Shared by the elementwise CPU kernels, which live by arity:
//   elementwise_binary.cc  arithmetic (Add, Sub, Mul, Div, Mod, Maximum,
//                          Minimum, Pow), the activation gradients (TanhGrad,
//                          SigmoidGrad, ReluGrad), comparisons (Less ...
//                          NotEqual), LogicalAnd, LogicalOr; NumPy broadcasting
//   elementwise_unary.cc   unary math (Neg, Abs, Square, Sign, Exp, Log, Tanh,
//                          Sigmoid, Relu, Sqrt, Rsqrt, Reciprocal), LogicalNot,
//                          Cast
//   elementwise_nary.cc    Select(cond, x, y) with broadcasting, AddN
// and the trivial graph ops (Const, Identity, NoOp, LoopCond, ZerosLike,
// OnesLike) in graph_ops.cc. Their CUDA twins are in
// src/cuda/elementwise_kernels.cu.
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
#ifndef TDF_RUNTIME_KERNELS_ELEMENTWISE_H_
#define TDF_RUNTIME_KERNELS_ELEMENTWISE_H_

#include <cstdint>
#include <type_traits>

namespace tdf {
namespace kernels {

// The dtype classes an elementwise op supports (bool is neither).
template <typename T>
inline constexpr bool kIsInt = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T>;
template <typename T>
inline constexpr bool kIsNumeric = kIsInt<T> || kIsFloat<T>;

}  // namespace kernels
}  // namespace tdf

#endif  // TDF_RUNTIME_KERNELS_ELEMENTWISE_H_
