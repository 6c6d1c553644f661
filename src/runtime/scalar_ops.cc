#include "runtime/scalar_ops.h"

namespace tdf {
namespace runtime {

ScalarOp ScalarOpFor(const std::string& op) {
  static const std::pair<const char*, ScalarOp> kOps[] = {
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
    if (op == name) return code;
  return ScalarOp::kNone;
}

}  // namespace runtime
}  // namespace tdf
