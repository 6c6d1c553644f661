#include "runtime/scalar_ops.h"

namespace tdf {
namespace runtime {

ScalarOp ScalarOpFor(const std::string& op) {
  // string_views: compared by length first, not by strlen and memcmp per
  // entry (every CPU kernel node of a Session::Create asks).
  static constexpr std::pair<absl::string_view, ScalarOp> kOps[] = {
      {"Identity", ScalarOp::kIdentity}, {"LoopCond", ScalarOp::kIdentity}, {"Add", ScalarOp::kAdd},
      {"Sub", ScalarOp::kSub}, {"Mul", ScalarOp::kMul}, {"Div", ScalarOp::kDiv}, {"Mod", ScalarOp::kMod},
      {"Maximum", ScalarOp::kMaximum}, {"Minimum", ScalarOp::kMinimum}, {"Neg", ScalarOp::kNeg},
      {"Less", ScalarOp::kLess}, {"LessEqual", ScalarOp::kLessEqual}, {"Greater", ScalarOp::kGreater},
      {"GreaterEqual", ScalarOp::kGreaterEqual}, {"Equal", ScalarOp::kEqual}, {"NotEqual", ScalarOp::kNotEqual},
      {"LogicalAnd", ScalarOp::kLogicalAnd}, {"LogicalOr", ScalarOp::kLogicalOr},
      {"LogicalNot", ScalarOp::kLogicalNot},
      // AddN of two inputs is Add (one or more than two: its kernel).
      {"AddN", ScalarOp::kAdd}, {"SumToShapeOf", ScalarOp::kSumToShapeOf},
      {"ZerosLike", ScalarOp::kZerosLike}, {"OnesLike", ScalarOp::kOnesLike},
  };
  for (const auto& [name, code] : kOps)
    if (absl::string_view(op) == name) return code;
  return ScalarOp::kNone;
}

namespace {

constexpr bool IsArithmetic(ScalarOp op) {
  return op >= ScalarOp::kAdd && op <= ScalarOp::kNotEqual && op != ScalarOp::kNeg;
}

template <ScalarOp op>
bool BinaryFor(const Tensor& a, const Tensor& b, Tensor* out) {
  if constexpr (IsArithmetic(op)) {
    // Two inline int64 scalars (every op of the recursion benchmarks),
    // decided before the general dtype dispatch.
    if (a.is_inline_scalar() && b.is_inline_scalar() && a.dtype() == DType::kInt64 && b.dtype() == DType::kInt64)
      return internal::Binary<int64_t>(op, a.scalar<int64_t>(), b.scalar<int64_t>(), out);
  }
  return ComputeScalar(op, a, &b, out);
}

}  // namespace

// Indexed by ScalarOp: keep in its order (checked below).
const BinaryScalarFn kBinaryScalarFns[] = {
    BinaryFor<ScalarOp::kNone>,       BinaryFor<ScalarOp::kIdentity>,     BinaryFor<ScalarOp::kAdd>,
    BinaryFor<ScalarOp::kSub>,        BinaryFor<ScalarOp::kMul>,          BinaryFor<ScalarOp::kDiv>,
    BinaryFor<ScalarOp::kMod>,        BinaryFor<ScalarOp::kMaximum>,      BinaryFor<ScalarOp::kMinimum>,
    BinaryFor<ScalarOp::kNeg>,        BinaryFor<ScalarOp::kLess>,         BinaryFor<ScalarOp::kLessEqual>,
    BinaryFor<ScalarOp::kGreater>,    BinaryFor<ScalarOp::kGreaterEqual>, BinaryFor<ScalarOp::kEqual>,
    BinaryFor<ScalarOp::kNotEqual>,   BinaryFor<ScalarOp::kLogicalAnd>,   BinaryFor<ScalarOp::kLogicalOr>,
    BinaryFor<ScalarOp::kLogicalNot>, BinaryFor<ScalarOp::kSumToShapeOf>, BinaryFor<ScalarOp::kZerosLike>,
    BinaryFor<ScalarOp::kOnesLike>,
};
static_assert(sizeof(kBinaryScalarFns) / sizeof(kBinaryScalarFns[0]) ==
                  static_cast<size_t>(ScalarOp::kOnesLike) + 1,
              "one entry per ScalarOp");

}  // namespace runtime
}  // namespace tdf
