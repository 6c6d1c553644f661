// Custom ops in one call (tdf/function_op.h): a C++ callable registered as
// an op runs in graphs built with GraphBuilder (main graph, recursive
// functions, loops), its signature is checked when the graph is built or
// validated, its gradient composes with AddGradients (through recursion
// too), and every failure ends in a Status naming the node, op and tag.
// Registrations are process-wide, so each test uses names of its own.
#include <array>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/tdf.h"

namespace tdf {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Outs = std::vector<Output>;

std::unique_ptr<Session> MakeSession(const Graph& graph) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(graph);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(FunctionOp, ScalarCallableRunsElementwiseWithItsDeducedSignature) {
  ASSERT_TRUE(RegisterFunctionOp("FnOpFma", [](double x, double y) { return x * y + 1; }).ok());
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat64);
  Output y = b.Placeholder("y", DType::kFloat64);
  Output z = b.Op("FnOpFma", {x, y}, {}, "z");
  EXPECT_EQ(b.dtype(z), DType::kFloat64);
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);

  auto scalars = session->Run({{"x", Tensor::Scalar(2.0)}, {"y", Tensor::Scalar(3.0)}}, {"z"});
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  EXPECT_EQ((*scalars)[0].scalar<double>(), 7.0);
  EXPECT_TRUE((*scalars)[0].is_inline_scalar());

  // A vector beside a scalar: the scalar broadcasts.
  auto vector = session->Run({{"x", Tensor::Vector<double>({1, 2, 3})}, {"y", Tensor::Scalar(10.0)}}, {"z"});
  ASSERT_TRUE(vector.ok()) << vector.status();
  EXPECT_TRUE((*vector)[0].Equals(Tensor::Vector<double>({11, 21, 31})));

  // Two vectors of different shapes: an error naming the node and op.
  auto mismatch =
      session->Run({{"x", Tensor::Vector<double>({1, 2, 3})}, {"y", Tensor::Vector<double>({1, 2})}}, {"z"});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(),
              AllOf(HasSubstr("node 'z' (FnOpFma)"), HasSubstr("input 0 is [3], input 1 is [2]")));
}

TEST(FunctionOp, MixedScalarTypesAndBoolResults) {
  ASSERT_TRUE(RegisterFunctionOp("FnOpInRange", [](int64_t v, float lo, double hi) { return v >= lo && v < hi; }).ok());
  GraphBuilder b;
  Output v = b.Placeholder("v", DType::kInt64);
  Output in = b.Op("FnOpInRange", {v, b.Const(1.5f), b.Const(4.0)}, {}, "in");
  EXPECT_EQ(b.dtype(in), DType::kBool);
  // The bool drives a Cond, as any predicate does.
  b.Identity(b.Cond(in, [&] { return b.ConstLike(v, 1); }, [&] { return b.ConstLike(v, 0); }), "r");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);
  for (int64_t value : {1, 2, 3, 4}) {
    auto out = session->Run({{"v", Tensor::Scalar<int64_t>(value)}}, {"r", "in"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int64_t>(), value >= 2 && value < 4 ? 1 : 0) << value;
  }
}

TEST(FunctionOp, WrongArityOrDtypeFailsWhenBuiltOrValidated) {
  ASSERT_TRUE(RegisterFunctionOp("FnOpTwice", [](int64_t n) { return 2 * n; }).ok());
  {
    GraphBuilder b;
    Output x = b.Placeholder("x", DType::kFloat64);
    b.Op("FnOpTwice", {x}, {}, "t");
    EXPECT_THAT(b.status().message(),
                AllOf(HasSubstr("node 't' (FnOpTwice)"), HasSubstr("input 0 must be int64, got float64")));
    EXPECT_FALSE(b.Build().ok());
  }
  {
    GraphBuilder b;
    Output n = b.Placeholder("n", DType::kInt64);
    b.Op("FnOpTwice", {n, n}, {}, "t");
    EXPECT_THAT(b.status().message(),
                AllOf(HasSubstr("node 't' (FnOpTwice)"), HasSubstr("wrong number of data inputs: has 2, op takes 1")));
  }
  // A loaded graph whose feed changed dtype: Validate and Session::Create
  // refuse it before anything runs.
  GraphBuilder b;
  b.Op("FnOpTwice", {b.Placeholder("n", DType::kInt64)}, {}, "t");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  for (NodeDef& node : g->node)
    if (node.name == "n") node.attr["dtype"] = AttrValue(DType::kInt32);
  absl::Status valid = Validate(*g);
  EXPECT_THAT(valid.message(), AllOf(HasSubstr("node 't' (FnOpTwice)"), HasSubstr("must be int64, got int32")));
  EXPECT_FALSE(Session::Create(*g).ok());
}

TEST(FunctionOp, DuplicateAndInvalidRegistrationsAreRefused) {
  ASSERT_TRUE(RegisterFunctionOp("FnOpOnce", [](double x) { return x; }).ok());
  absl::Status again = RegisterFunctionOp("FnOpOnce", [](double x) { return -x; });
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("op 'FnOpOnce' is already registered"));
  EXPECT_EQ(RegisterFunctionOp("Add", [](double x, double y) { return x - y; }).code(),
            absl::StatusCode::kAlreadyExists);
  // An op whose gradient's name is taken is refused whole.
  ASSERT_TRUE(RegisterFunctionOp("FnOpTakenGrad", [](double x) { return x; }).ok());
  EXPECT_EQ(RegisterFunctionOp(
                "FnOpTaken", [](double x) { return x; }, [](double, double dy) { return dy; })
                .code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(OpRegistry::Global()->Find("FnOpTaken"), nullptr);
  EXPECT_EQ(RegisterFunctionOp("", [](double x) { return x; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterFunctionOp(FunctionOp("FnOpNoFunction", {DType::kFloat64}, {DType::kFloat64}, nullptr)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterFunctionOp(FunctionOp("FnOpBadType", {DType::kInvalid}, {DType::kFloat64},
                                          [](absl::Span<const Tensor> in) -> absl::StatusOr<std::vector<Tensor>> {
                                            return std::vector<Tensor>{in[0]};
                                          }))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FunctionOp, AThrowingCallableFailsTheRunWithNodeOpAndTag) {
  ASSERT_TRUE(RegisterFunctionOp("FnOpThrows", [](int64_t n) -> int64_t {
                if (n == 3) throw std::runtime_error("three is not allowed");
                return n;
              }).ok());
  // Inside a recursive function, so the tag has the invocation's labels.
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"down", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs {
                                 Output n = f.Op("FnOpThrows", {a[0]}, {}, "checked");
                                 return {f.Cond(n <= 0, [&] { return n; },
                                                [&] { return f.Call("down", {n - 1})[0] + 1; })};
                               })
                  .ok());
  b.Identity(b.Call("down", {b.Placeholder("n", DType::kInt64)})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);
  auto fine = session->Run({{"n", Tensor::Scalar<int64_t>(2)}}, {"result"});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ((*fine)[0].scalar<int64_t>(), 2);
  auto thrown = session->Run({{"n", Tensor::Scalar<int64_t>(5)}}, {"result"});
  ASSERT_FALSE(thrown.ok());
  EXPECT_EQ(thrown.status().code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(thrown.status().message(),
              AllOf(HasSubstr("checked' (FnOpThrows) at tag ["),
                    HasSubstr("the function of op 'FnOpThrows' threw: three is not allowed")));
  // The session runs on.
  auto after = session->Run({{"n", Tensor::Scalar<int64_t>(1)}}, {"result"});
  ASSERT_TRUE(after.ok()) << after.status();
}

TEST(FunctionOp, RunsInWhileLoopsAndRecursion) {
  ASSERT_TRUE(RegisterFunctionOp("FnOpSquareInt", [](int64_t n) { return n * n; }).ok());
  GraphBuilder b;
  // sumsq(n) = n == 0 ? 0 : n^2 + sumsq(n - 1)
  ASSERT_TRUE(b.DefineFunction({"sumsq", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs {
                                 Output n = a[0];
                                 return {f.Cond(Equal(n, 0), [&] { return f.ConstLike(n, 0); }, [&] {
                                   return f.Op("FnOpSquareInt", {n}) + f.Call("sumsq", {n - 1})[0];
                                 })};
                               })
                  .ok());
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("sumsq", {n})[0], "recursive");
  // The same sum as a loop: (i, acc) while i > 0.
  Outs loop = b.While([](const Outs& v) { return v[0] > 0; },
                      [&](const Outs& v) { return Outs{v[0] - 1, v[1] + b.Op("FnOpSquareInt", {v[0]})}; },
                      {n, b.ConstLike(n, 0)});
  b.Identity(loop[1], "iterative");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);
  auto out = session->Run({{"n", Tensor::Scalar<int64_t>(30)}}, {"recursive", "iterative"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 30 * 31 * 61 / 6);
  EXPECT_EQ((*out)[1].scalar<int64_t>(), 30 * 31 * 61 / 6);

  // The dynamic baseline with two workers runs the same kernels.
  SessionOptions dynamic;
  dynamic.mode = ExecutionMode::kDynamic;
  dynamic.num_workers = 2;
  absl::StatusOr<std::unique_ptr<Session>> dynamic_session = Session::Create(*g, dynamic);
  ASSERT_TRUE(dynamic_session.ok()) << dynamic_session.status();
  auto again = (*dynamic_session)->Run({{"n", Tensor::Scalar<int64_t>(30)}}, {"recursive", "iterative"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].scalar<int64_t>(), 30 * 31 * 61 / 6);
  EXPECT_EQ((*again)[1].scalar<int64_t>(), 30 * 31 * 61 / 6);
}

TEST(FunctionOp, ScalarGradientComposesWithAddGradientsAndBroadcasts) {
  ASSERT_TRUE(RegisterFunctionOp(
                  "FnOpMulGrad1", [](double x, double y) { return x * y; },
                  [](double x, double y, double dz) { return std::make_tuple(dz * y, dz * x); })
                  .ok());
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat64);
  Output y = b.Placeholder("y", DType::kFloat64);
  b.Op("FnOpMulGrad1", {x, y}, {}, "z");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto grads = AddGradients(*g, {"z"}, {"x", "y"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);
  // x a scalar beside a vector y: dz/dx sums over y's elements.
  auto out = session->Run({{"x", Tensor::Scalar(2.0)}, {"y", Tensor::Vector<double>({1, 2, 4})}},
                          {"z", (*grads)[0], (*grads)[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].Equals(Tensor::Vector<double>({2, 4, 8})));
  EXPECT_EQ((*out)[1].scalar<double>(), 7.0);
  EXPECT_TRUE((*out)[2].Equals(Tensor::Vector<double>({2, 2, 2})));
  EXPECT_THAT(DifferentiableOps(), ::testing::Contains("FnOpMulGrad1"));
}

TEST(FunctionOp, GradientThroughRecursionIsNTimesXToTheNMinusOne) {
  ASSERT_TRUE(RegisterFunctionOp(
                  "FnOpMulGrad2", [](double x, double y) { return x * y; },
                  [](double x, double y, double dz) { return std::array<double, 2>{dz * y, dz * x}; })
                  .ok());
  GraphBuilder b;
  // pow(x, n) = n == 0 ? 1 : FnOpMulGrad2(x, pow(x, n - 1))
  ASSERT_TRUE(b.DefineFunction({"pow", {{"x", DType::kFloat64}, {"n", DType::kInt64}}, {{"y", DType::kFloat64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs {
                                 Output x = a[0], n = a[1];
                                 return {f.Cond(Equal(n, 0), [&] { return f.ConstLike(x, 1); }, [&] {
                                   return f.Op("FnOpMulGrad2", {x, f.Call("pow", {x, n - 1})[0]});
                                 })};
                               })
                  .ok());
  Output x = b.Placeholder("x", DType::kFloat64);
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("pow", {x, n})[0], "y");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto grads = AddGradients(*g, {"y"}, {"x"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);
  auto out = session->Run({{"x", Tensor::Scalar(1.5)}, {"n", Tensor::Scalar<int64_t>(7)}}, {"y", (*grads)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].scalar<double>(), std::pow(1.5, 7), 1e-12);
  EXPECT_NEAR((*out)[1].scalar<double>(), 7 * std::pow(1.5, 6), 1e-10);
}

// The general form: whole tensors, a shape rule, a tensor gradient.
FunctionOp RowSums(const std::string& name) {
  FunctionOp op(name, {DType::kFloat64}, {DType::kFloat64},
                [](absl::Span<const Tensor> in) -> absl::StatusOr<std::vector<Tensor>> {
                  const Tensor& m = in[0];
                  const int64_t rows = m.shape().dim(0), cols = m.shape().dim(1);
                  std::vector<double> sums(rows, 0.0);
                  for (int64_t r = 0; r < rows; ++r)
                    for (int64_t c = 0; c < cols; ++c) sums[r] += m.data<double>()[r * cols + c];
                  return std::vector<Tensor>{Tensor::Vector(sums)};
                });
  op.shape = [](absl::Span<const Shape> in) -> absl::StatusOr<std::vector<Shape>> {
    if (in[0].rank() != 2) return absl::InvalidArgumentError("expects a matrix");
    return std::vector<Shape>{Shape({in[0].dim(0)})};
  };
  // d/dm: dy broadcast along each row.
  op.gradient = [](absl::Span<const Tensor> in) -> absl::StatusOr<std::vector<Tensor>> {
    const Tensor& m = in[0];
    const Tensor& dy = in[1];
    std::vector<double> dm(m.num_elements());
    const int64_t cols = m.shape().dim(1);
    for (size_t k = 0; k < dm.size(); ++k) dm[k] = dy.data<double>()[k / cols];
    TDF_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(dm, m.shape()));
    return std::vector<Tensor>{t};
  };
  return op;
}

TEST(FunctionOp, TensorFormChecksItsShapeRuleAndDifferentiates) {
  ASSERT_TRUE(RegisterFunctionOp(RowSums("FnOpRowSums")).ok());
  GraphBuilder b;
  Output m = b.Placeholder("m", DType::kFloat64);
  Output s = b.Op("FnOpRowSums", {m}, {}, "s");
  b.Identity(b.Sum(b.Square(s)), "loss");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto grads = AddGradients(*g, {"loss"}, {"m"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);
  Tensor m23 = *Tensor::FromVector<double>({1, 2, 3, 4, 5, 6}, Shape({2, 3}));
  auto out = session->Run({{"m", m23}}, {"s", (*grads)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].Equals(Tensor::Vector<double>({6, 15})));
  // d/dm sum(s^2) = 2 s per row.
  EXPECT_TRUE((*out)[1].Equals(*Tensor::FromVector<double>({12, 12, 12, 30, 30, 30}, Shape({2, 3}))));

  auto rejected = session->Run({{"m", Tensor::Vector<double>({1, 2})}}, {"s"});
  ASSERT_FALSE(rejected.ok());
  EXPECT_THAT(rejected.status().message(),
              AllOf(HasSubstr("node 's' (FnOpRowSums)"),
                    HasSubstr("shape rule of op 'FnOpRowSums' rejects inputs [[2]]: expects a matrix")));
}

// The gradient op is an op like any other, which a graph may use with any
// inputs of its dtypes (MutatedGraphsTest did): its callable runs only on
// inputs that pass the forward's shape rule and on dys of the forward's
// output shapes, as the forward callable does; others end in a Status.
TEST(FunctionOp, TheGradientOpChecksTheForwardShapeRule) {
  ASSERT_TRUE(RegisterFunctionOp(RowSums("FnOpRowSums2")).ok());
  GraphBuilder b;
  b.Op("FnOpRowSums2Grad", {b.Placeholder("m", DType::kFloat64), b.Placeholder("dy", DType::kFloat64)}, {}, "g");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto session = MakeSession(*g);
  ASSERT_NE(session, nullptr);
  Tensor m23 = *Tensor::FromVector<double>({1, 2, 3, 4, 5, 6}, Shape({2, 3}));
  auto fine = session->Run({{"m", m23}, {"dy", Tensor::Vector<double>({1, 2})}}, {"g"});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE((*fine)[0].Equals(*Tensor::FromVector<double>({1, 1, 1, 2, 2, 2}, Shape({2, 3}))));

  auto scalars = session->Run({{"m", Tensor::Scalar(1.0)}, {"dy", Tensor::Scalar(1.0)}}, {"g"});
  ASSERT_FALSE(scalars.ok());
  EXPECT_THAT(scalars.status().message(),
              AllOf(HasSubstr("node 'g' (FnOpRowSums2Grad)"), HasSubstr("rejects inputs [[], []]: expects a matrix")));
  auto short_dy = session->Run({{"m", m23}, {"dy", Tensor::Vector<double>({1})}}, {"g"});
  ASSERT_FALSE(short_dy.ok());
  EXPECT_THAT(short_dy.status().message(), HasSubstr("the gradient of output 0 has shape [1]; the output has [2]"));
}

TEST(FunctionOp, ResultsTheSignatureOrShapeRuleForbidAreErrors) {
  FunctionOp wrong_shape = RowSums("FnOpWrongShape");
  wrong_shape.compute = [](absl::Span<const Tensor>) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{Tensor::Vector<double>({1, 2, 3})};
  };
  ASSERT_TRUE(RegisterFunctionOp(std::move(wrong_shape)).ok());
  ASSERT_TRUE(RegisterFunctionOp(FunctionOp("FnOpWrongType", {DType::kFloat64}, {DType::kFloat64},
                                            [](absl::Span<const Tensor>) -> absl::StatusOr<std::vector<Tensor>> {
                                              return std::vector<Tensor>{Tensor::Scalar<int64_t>(1)};
                                            }))
                  .ok());
  ASSERT_TRUE(RegisterFunctionOp(FunctionOp("FnOpFails", {DType::kFloat64}, {DType::kFloat64},
                                            [](absl::Span<const Tensor>) -> absl::StatusOr<std::vector<Tensor>> {
                                              return absl::OutOfRangeError("no answer for you");
                                            }))
                  .ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"FnOpWrongShape", "returned output 0 of shape [3]; its shape rule says [2]"},
      {"FnOpWrongType", "returned int64 for output 0, declared float64"},
      {"FnOpFails", "no answer for you"},
  };
  for (const auto& [op, message] : cases) {
    GraphBuilder b;
    b.Op(op, {b.Placeholder("m", DType::kFloat64)}, {}, "n");
    absl::StatusOr<Graph> g = b.Build();
    ASSERT_TRUE(g.ok()) << g.status();
    auto session = MakeSession(*g);
    ASSERT_NE(session, nullptr);
    auto out = session->Run({{"m", *Tensor::FromVector<double>({1, 2, 3, 4}, Shape({2, 2}))}}, {"n"});
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), AllOf(HasSubstr("node 'n' (" + op + ")"), HasSubstr(message))) << op;
  }
}

}  // namespace
}  // namespace tdf
