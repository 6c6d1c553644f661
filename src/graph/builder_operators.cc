// The builder's operators on Output, the literals beside them (ConstLike),
// Cond with one result per branch, and an Output's name for Session::Run.
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "tdf/builder.h"

namespace tdf {

Output::operator std::string() const { return builder == nullptr ? "<invalid>" : builder->Name(*this); }

namespace {

// The builder an operator adds its node to: the first operand's, else the
// second's (a default-constructed Output has none). The node then records
// an error for an operand of another builder or an invalid one.
GraphBuilder* BuilderOf(Output a, Output b = Output{}) { return a.builder != nullptr ? a.builder : b.builder; }

}  // namespace

Output operator+(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Add(a, b);
}
Output operator-(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Sub(a, b);
}
Output operator*(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Mul(a, b);
}
Output operator/(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Div(a, b);
}
Output operator%(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Mod(a, b);
}
Output operator-(Output x) { return x.builder == nullptr ? Output{} : x.builder->Neg(x); }
Output operator<(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Less(a, b);
}
Output operator<=(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->LessEqual(a, b);
}
Output operator>(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Greater(a, b);
}
Output operator>=(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->GreaterEqual(a, b);
}
Output operator&&(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->LogicalAnd(a, b);
}
Output operator||(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->LogicalOr(a, b);
}
Output operator!(Output x) { return x.builder == nullptr ? Output{} : x.builder->LogicalNot(x); }
Output Equal(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->Equal(a, b);
}
Output NotEqual(Output a, Output b) {
  GraphBuilder* g = BuilderOf(a, b);
  return g == nullptr ? Output{} : g->NotEqual(a, b);
}

// ---- literals ----

namespace {

// "int32 'n'" for messages about a literal beside n.
std::string Beside(const GraphBuilder& b, Output like) {
  return absl::StrCat(DTypeName(b.dtype(like)), " '", b.Name(like), "'");
}

}  // namespace

Output GraphBuilder::ConstLikeInteger(Output like, int64_t value) {
  if (!status_.ok()) return FailedOutput(1);
  if (!HasOutput(like)) {
    FailInvalid("the operand beside a literal", like);
    return FailedOutput(1);
  }
  switch (dtype(like)) {
    case DType::kInt32:
      if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) break;
      return Const<int32_t>(static_cast<int32_t>(value));
    case DType::kInt64:
      return Const<int64_t>(value);
    case DType::kFloat32:
      return Const<float>(static_cast<float>(value));
    case DType::kFloat64:
      return Const<double>(static_cast<double>(value));
    default:
      break;
  }
  Fail(absl::InvalidArgumentError(absl::StrCat("the literal ", value, " beside the ", Beside(*this, like),
                                               " does not fit its dtype")));
  return FailedOutput(1);
}

Output GraphBuilder::ConstLikeUnsigned(Output like, uint64_t value) {
  if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return ConstLikeInteger(like, static_cast<int64_t>(value));
  // Above int64: a float operand takes it; an integer one reports it.
  return ConstLikeFloating(like, static_cast<double>(value));
}

Output GraphBuilder::ConstLikeFloating(Output like, double value) {
  if (!status_.ok()) return FailedOutput(1);
  if (!HasOutput(like)) {
    FailInvalid("the operand beside a literal", like);
    return FailedOutput(1);
  }
  const DType t = dtype(like);
  if (t == DType::kFloat32) return Const<float>(static_cast<float>(value));
  if (t == DType::kFloat64) return Const<double>(value);
  // An integer operand takes a floating literal only when it is a whole
  // number in range: n * 0.5 on an int64 n would otherwise silently be n * 0.
  if (IsInteger(t) && std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 9.2e18)
    return ConstLikeInteger(like, static_cast<int64_t>(value));
  Fail(absl::InvalidArgumentError(absl::StrCat("the literal ", value, " beside the ", Beside(*this, like),
                                               " does not fit its dtype")));
  return FailedOutput(1);
}

Output GraphBuilder::ConstLikeBool(Output like, bool value) {
  if (!status_.ok()) return FailedOutput(1);
  if (!HasOutput(like)) {
    FailInvalid("the operand beside a literal", like);
    return FailedOutput(1);
  }
  if (dtype(like) == DType::kBool) return Const<bool>(value);
  Fail(absl::InvalidArgumentError(
      absl::StrCat("the literal ", value ? "true" : "false", " beside the ", Beside(*this, like), " is not a number")));
  return FailedOutput(1);
}

// ---- Cond with one result per branch ----

Output GraphBuilder::Cond(Output pred, const std::function<Output()>& then_fn, const std::function<Output()>& else_fn) {
  std::vector<Output> results = Cond(
      pred, [&] { return std::vector<Output>{then_fn()}; }, [&] { return std::vector<Output>{else_fn()}; });
  return results.empty() ? FailedOutput(1) : results[0];
}

}  // namespace tdf
