// The builder's operators (tdf/builder.h): the nodes they add, the dtype of
// the literals beside an Output, errors, and programs written with them
// running to the same answers as the named calls. Includes only the
// umbrella header, which must be enough.
#include "tdf/tdf.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;
using Outs = std::vector<Output>;

const NodeDef* NodeOf(const Graph& g, const GraphBuilder& b, Output o) {
  const std::string name = b.Name(o);
  return g.FindNode(name.substr(0, name.find(':')));
}

// The op of `o`'s node and the ops (and Const dtypes) of its inputs.
struct Shape {
  std::string op;
  std::vector<std::string> inputs;  // op, or "Const:<dtype>"
};

Shape ShapeOf(const Graph& g, const GraphBuilder& b, Output o) {
  Shape s;
  const NodeDef* n = NodeOf(g, b, o);
  if (n == nullptr) return s;
  s.op = n->op;
  for (const std::string& in : n->input) {
    const NodeDef* src = g.FindNode(in.substr(0, in.find(':')));
    if (src == nullptr) {
      s.inputs.push_back("?");
    } else if (src->op == "Const") {
      s.inputs.push_back("Const:" + std::string(DTypeName(*src->GetType("dtype"))));
    } else {
      s.inputs.push_back(src->op);
    }
  }
  return s;
}

TEST(BuilderOperators, EachOperatorAddsItsOp) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat64);
  Output y = b.Placeholder("y", DType::kFloat64);
  Output p = b.Placeholder("p", DType::kBool);
  Output q = b.Placeholder("q", DType::kBool);
  const std::vector<std::pair<Output, std::string>> cases = {
      {x + y, "Add"},          {x - y, "Sub"},           {x * y, "Mul"},          {x / y, "Div"},
      {x % y, "Mod"},          {-x, "Neg"},              {x < y, "Less"},         {x <= y, "LessEqual"},
      {x > y, "Greater"},      {x >= y, "GreaterEqual"}, {p && q, "LogicalAnd"},  {p || q, "LogicalOr"},
      {!p, "LogicalNot"},      {Equal(x, y), "Equal"},   {NotEqual(x, y), "NotEqual"},
  };
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  for (const auto& [out, op] : cases) EXPECT_EQ(ShapeOf(*g, b, out).op, op);
  // Operand order is kept: x - y is Sub(x, y).
  const NodeDef* sub = NodeOf(*g, b, cases[1].first);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->input, (std::vector<std::string>{"x", "y"}));
}

TEST(BuilderOperators, LiteralsTakeTheOperandsDtype) {
  GraphBuilder b;
  Output i64 = b.Placeholder("i64", DType::kInt64);
  Output i32 = b.Placeholder("i32", DType::kInt32);
  Output f32 = b.Placeholder("f32", DType::kFloat32);
  Output f64 = b.Placeholder("f64", DType::kFloat64);
  Output p = b.Placeholder("p", DType::kBool);
  Output a = i64 - 1;
  Output c = 2 * i32;
  Output d = f32 + 1;
  Output e = f64 / 4.5f;
  Output h = i64 * 2.0;  // a whole number beside an integer is that integer
  Output k = p && true;
  Output m = 1 - i64;
  Output n = Equal(i32, 7);
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ShapeOf(*g, b, a).inputs, (std::vector<std::string>{"Placeholder", "Const:int64"}));
  EXPECT_EQ(ShapeOf(*g, b, c).inputs, (std::vector<std::string>{"Const:int32", "Placeholder"}));
  EXPECT_EQ(ShapeOf(*g, b, d).inputs, (std::vector<std::string>{"Placeholder", "Const:float32"}));
  EXPECT_EQ(ShapeOf(*g, b, e).inputs, (std::vector<std::string>{"Placeholder", "Const:float64"}));
  EXPECT_EQ(ShapeOf(*g, b, h).inputs, (std::vector<std::string>{"Placeholder", "Const:int64"}));
  EXPECT_EQ(ShapeOf(*g, b, k).inputs, (std::vector<std::string>{"Placeholder", "Const:bool"}));
  EXPECT_EQ(ShapeOf(*g, b, m).op, "Sub");
  EXPECT_EQ(ShapeOf(*g, b, m).inputs, (std::vector<std::string>{"Const:int64", "Placeholder"}));
  EXPECT_EQ(ShapeOf(*g, b, n).inputs, (std::vector<std::string>{"Placeholder", "Const:int32"}));
  EXPECT_EQ(b.dtype(a), DType::kInt64);
  EXPECT_EQ(b.dtype(e), DType::kFloat64);
  EXPECT_EQ(b.dtype(n), DType::kBool);
}

// What a dtype cannot hold exactly is an error, never a silent rounding.
TEST(BuilderOperators, LiteralsThatDoNotFitAreErrors) {
  struct Case {
    std::function<Output(GraphBuilder&)> build;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](GraphBuilder& b) { return b.Placeholder("n", DType::kInt64) * 0.5; }, "0.5 beside the int64 'n'"},
      {[](GraphBuilder& b) { return b.Placeholder("n", DType::kInt32) + (int64_t{1} << 40); },
       "1099511627776 beside the int32 'n'"},
      {[](GraphBuilder& b) { return b.Placeholder("n", DType::kInt64) + ~uint64_t{0}; }, "beside the int64 'n'"},
      {[](GraphBuilder& b) { return b.Placeholder("p", DType::kBool) + 1; }, "1 beside the bool 'p'"},
      {[](GraphBuilder& b) { return b.Placeholder("n", DType::kInt64) + true; }, "true beside the int64 'n'"},
  };
  for (const Case& c : cases) {
    GraphBuilder b;
    Output out = c.build(b);
    EXPECT_FALSE(out.valid());
    EXPECT_THAT(b.status().message(), HasSubstr(c.message));
    EXPECT_FALSE(b.Build().ok());
  }
}

TEST(BuilderOperators, InvalidAndForeignOperands) {
  // No builder at all: nothing to record into, an invalid Output.
  EXPECT_FALSE((Output{} + Output{}).valid());
  EXPECT_FALSE((Output{} + 1).valid());
  EXPECT_FALSE((-Output{}).valid());
  {
    GraphBuilder b;
    Output x = b.Placeholder("x", DType::kInt64);
    EXPECT_FALSE((x + Output{}).valid());
    EXPECT_FALSE(b.status().ok());
  }
  {
    GraphBuilder b1, b2;
    Output x = b1.Placeholder("x", DType::kInt64);
    Output y = b2.Placeholder("y", DType::kInt64);
    EXPECT_FALSE((x + y).valid());
    EXPECT_THAT(b1.status().message(), HasSubstr("another builder"));
  }
  {
    // After an error the operators are no-ops like every builder call.
    GraphBuilder b;
    Output x = b.Placeholder("x", DType::kInt64);
    Output bad = x * 0.5;
    EXPECT_FALSE((bad + 1).valid());
    EXPECT_FALSE((x + 1).valid());
    EXPECT_THAT(b.status().message(), HasSubstr("0.5"));
  }
  {
    // A mismatch between two Outputs stays the op's dtype error.
    GraphBuilder b;
    Output x = b.Placeholder("x", DType::kInt64);
    Output y = b.Placeholder("y", DType::kInt32);
    EXPECT_FALSE((x + y).valid());
    EXPECT_FALSE(b.status().ok());
  }
}

// fib as its definition reads, against the reference number.
Graph MathFib() {
  GraphBuilder b;
  absl::Status defined = b.DefineFunction({"fib", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                                          [](GraphBuilder& f, const Outs& args) -> Outs {
                                            Output n = args[0];
                                            return {f.Cond(
                                                n <= 1, [&] { return f.ConstLike(n, 1); },
                                                [&] { return f.Call("fib", {n - 1})[0] + f.Call("fib", {n - 2})[0]; })};
                                          });
  EXPECT_TRUE(defined.ok()) << defined;
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("fib", {n})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

TEST(BuilderOperators, FibReadsLikeItsDefinitionAndRuns) {
  const Graph g = MathFib();
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SessionOptions options;
    options.mode = mode;
    options.num_workers = 2;
    absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(g, options);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run({{"n", Tensor::Scalar<int64_t>(20)}}, {"result"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int64_t>(), 10946);
  }
}

// Operators in a loop body and a Cond in it (captures through the
// builder's contexts), and Outputs given to Run as feeds and fetches.
TEST(BuilderOperators, LoopsAndFeedsAndFetchesByOutput) {
  GraphBuilder b;
  Output limit = b.Placeholder("limit", DType::kInt64);
  std::vector<Output> loop = b.While([&](const Outs& v) { return v[0] < limit; },
                                     [&](const Outs& v) -> Outs {
                                       Output i = v[0];
                                       Output even = Equal(i % 2, 0);
                                       Output step = b.Cond(even, [&] { return i * i; }, [&] { return -i; });
                                       return {i + 1, v[1] + step};
                                     },
                                     {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  Output total = loop[1] * 2;
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(*g, SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  // Run takes the Outputs themselves: they convert to their names.
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run({{limit, Tensor::Scalar<int64_t>(7)}}, {total, loop[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  int64_t expected = 0;
  for (int64_t i = 0; i < 7; ++i) expected += i % 2 == 0 ? i * i : -i;
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 2 * expected);
  EXPECT_EQ((*out)[1].scalar<int64_t>(), 7);
  EXPECT_EQ(std::string(Output{}), "<invalid>");
}

}  // namespace
}  // namespace tdf
