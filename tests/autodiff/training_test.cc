// Training: SGD and Adam steps as graph ops, many runs of one session.
#include <cmath>

#include "autodiff_test_util.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"

namespace tdf {
namespace {

using testing_autodiff::Values;

constexpr DType kF = DType::kFloat64;
constexpr DType kI = DType::kInt64;

// y = X w + b with X 6x2; the data are exactly linear, so the loss can reach 0.
struct LinearModel {
  Graph graph;
  std::vector<std::string> grads;
};

LinearModel BuildLinear() {
  GraphBuilder b;
  Output w = b.Variable("w", *Tensor::Zeros(kF, Shape({2, 1})));
  Output bias = b.Variable("b", Tensor::Scalar<double>(0.0));
  Output rw = b.Read(w), rb = b.Read(bias);
  Output X = b.Const(*Tensor::FromVector<double>({1, 2, -1, 0.5, 0, 1, 2, -1, 0.3, 0.3, -0.7, 1.5}, Shape({6, 2})));
  // Targets of w = (2, -3), b = 0.5.
  std::vector<double> t;
  const double* x = X.valid() ? nullptr : nullptr;
  (void)x;
  const double xs[12] = {1, 2, -1, 0.5, 0, 1, 2, -1, 0.3, 0.3, -0.7, 1.5};
  for (int i = 0; i < 6; ++i) t.push_back(2 * xs[2 * i] - 3 * xs[2 * i + 1] + 0.5);
  Output Y = b.Const(*Tensor::FromVector<double>(t, Shape({6, 1})));
  Output err = b.Sub(b.Add(b.MatMul(X, rw), rb), Y);
  b.Identity(b.Mean(b.Op("Square", {err})), "loss");
  LinearModel m;
  m.graph = *b.Build();
  auto g = AddGradients(m.graph, {"loss"}, {b.Name(rw), b.Name(rb)});
  EXPECT_TRUE(g.ok()) << g.status();
  m.grads = *g;
  return m;
}

TEST(Training, SgdFitsLinearRegression) {
  LinearModel m = BuildLinear();
  auto step = AddSgdStep(m.graph, {"w", "b"}, m.grads, 0.1);
  ASSERT_TRUE(step.ok()) << step.status();
  auto s = Session::Create(m.graph);
  ASSERT_TRUE(s.ok()) << s.status();
  double first = 0, last = 0;
  for (int i = 0; i < 500; ++i) {
    auto out = (*s)->Run({}, {"loss"}, {*step});
    ASSERT_TRUE(out.ok()) << out.status();
    (i == 0 ? first : last) = (*out)[0].scalar<double>();
  }
  EXPECT_GT(first, 1.0);
  EXPECT_LT(last, 1e-8);
  Tensor w = *(*s)->ReadVariable("w");
  EXPECT_NEAR(w.data<double>()[0], 2.0, 1e-4);
  EXPECT_NEAR(w.data<double>()[1], -3.0, 1e-4);
  EXPECT_NEAR((*(*s)->ReadVariable("b")).scalar<double>(), 0.5, 1e-4);
}

TEST(Training, AdamFitsLinearRegression) {
  LinearModel m = BuildLinear();
  AdamOptions o;
  o.learning_rate = 0.05;
  auto step = AddAdamStep(m.graph, {"w", "b"}, m.grads, o);
  ASSERT_TRUE(step.ok()) << step.status();
  auto s = Session::Create(m.graph);
  ASSERT_TRUE(s.ok()) << s.status();
  double last = 0;
  for (int i = 0; i < 1500; ++i) {
    auto out = (*s)->Run({}, {"loss"}, {*step});
    ASSERT_TRUE(out.ok()) << out.status();
    last = (*out)[0].scalar<double>();
  }
  EXPECT_LT(last, 1e-6);
  Tensor w = *(*s)->ReadVariable("w");
  EXPECT_NEAR(w.data<double>()[0], 2.0, 1e-2);
  EXPECT_NEAR(w.data<double>()[1], -3.0, 1e-2);
}

// The Adam state is found by the names tdf/autodiff.h documents (for
// checkpoints): "<var>/adam_m", "<var>/adam_v", "adam_t/<first var>"; a
// second step on the same variable gets its own, suffixed "_1".
TEST(Training, AdamStateHasTheDocumentedNames) {
  GraphBuilder b;
  Output w = b.Variable("w", *Tensor::FromVector<double>({1.0, -2.0}, Shape({2})));
  // No initial_value: zeros of attr shape; its slots take that shape.
  Output u = b.Op("Variable", {}, {{"dtype", kF}, {"shape", Shape({3})}}, "u");
  Output rw = b.Read(w), ru = b.Read(u);
  // loss = sum(w * c) + sum(u): constant gradients c and ones.
  const std::vector<double> c = {0.5, -1.5};
  b.Identity(b.Add(b.Sum(b.Mul(rw, b.Const(Tensor::Vector<double>(c)))), b.Sum(ru)), "loss");
  Graph g = *b.Build();
  auto grads = AddGradients(g, {"loss"}, {b.Name(rw), b.Name(ru)});
  ASSERT_TRUE(grads.ok()) << grads.status();
  AdamOptions o;
  auto step = AddAdamStep(g, {"w", "u"}, *grads, o);
  ASSERT_TRUE(step.ok()) << step.status();
  auto step2 = AddAdamStep(g, {"w"}, {(*grads)[0]}, o);
  ASSERT_TRUE(step2.ok()) << step2.status();
  EXPECT_EQ(AddAdamStep(g, {"w", "w"}, {(*grads)[0], (*grads)[0]}, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status();
  // Each run targets, so takes, both steps.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*s)->Run({}, {}, {*step, *step2}).ok());
  auto read = [&](const std::string& name) {
    absl::StatusOr<Tensor> t = (*s)->ReadVariable(name);
    EXPECT_TRUE(t.ok()) << name << ": " << t.status();
    return t.ok() ? Values(*t) : std::vector<double>{};
  };
  // After t steps with a constant gradient g: m = (1 - b1^t) g, v = (1 - b2^t) g^2.
  auto expect = [&](const std::string& name, std::vector<double> want) {
    std::vector<double> got = read(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << name << "[" << i << "]";
  };
  const double m3 = 1 - std::pow(o.beta1, 3), v3 = 1 - std::pow(o.beta2, 3);
  expect("adam_t/w", {3});
  expect("w/adam_m", {m3 * c[0], m3 * c[1]});
  expect("w/adam_v", {v3 * c[0] * c[0], v3 * c[1] * c[1]});
  expect("u/adam_m", {m3, m3, m3});
  expect("u/adam_v", {v3, v3, v3});
  expect("adam_t/w_1", {3});
  expect("w/adam_m_1", {m3 * c[0], m3 * c[1]});
  expect("w/adam_v_1", {v3 * c[0] * c[0], v3 * c[1] * c[1]});
  EXPECT_FALSE((*s)->ReadVariable("adam_t/u").ok());  // one counter per step, named after its first variable
}

// Gradient descent through recursion: find w with exp(w, 5) = 2.
TEST(Training, SgdThroughRecursiveFunction) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"exp", {{"x", kF}, {"n", kI}}, {{"y", kF}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 return f.Cond(
                                     f.Equal(a[1], f.Const<int64_t>(0)),
                                     [&] { return std::vector<Output>{f.Const<double>(1.0)}; },
                                     [&] {
                                       return std::vector<Output>{
                                           f.Mul(a[0], f.Call("exp", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])};
                                     });
                               })
                  .ok());
  Output w = b.Variable("w", Tensor::Scalar<double>(1.0));
  Output rw = b.Read(w);
  Output e = b.Sub(b.Call("exp", {rw, b.Const<int64_t>(5)})[0], b.Const<double>(2.0));
  b.Identity(b.Mul(e, e), "loss");
  Graph g = *b.Build();
  auto grads = AddGradients(g, {"loss"}, {b.Name(rw)});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto step = AddSgdStep(g, {"w"}, *grads, 0.005);
  ASSERT_TRUE(step.ok()) << step.status();
  auto s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < 300; ++i) {
    RunStats stats;
    ASSERT_TRUE((*s)->Run({}, {}, {*step}, &stats).ok());
    ASSERT_EQ(stats.live_frames_after_run, 0);
  }
  EXPECT_NEAR((*(*s)->ReadVariable("w")).scalar<double>(), std::pow(2.0, 0.2), 1e-6);
}

// An embedding table read through one Gather: AddSgdStep updates only the
// gathered rows (ScatterAdd; repeated words accumulate) and must agree with
// the dense step v -= lr * g.
struct EmbeddingModel {
  Graph graph;
  std::vector<std::string> grads;  // d loss / d E, d loss / d W
};

Graph Built(const GraphBuilder& b) {
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

EmbeddingModel BuildEmbedding(bool fetch_gradient_too) {
  GraphBuilder b;
  std::vector<double> e0(6 * 2);
  for (int i = 0; i < 12; ++i) e0[i] = 0.1 * i - 0.4;
  Output E = b.Variable("E", *Tensor::FromVector<double>(e0, Shape({6, 2})));
  Output W = b.Variable("W", *Tensor::FromVector<double>({0.5, -1.5}, Shape({2, 1})));
  Output rE = b.Read(E), rW = b.Read(W);
  Output words = b.Const(Tensor::Vector<int64_t>({2, 0, 2, 5, 3}));
  // Word 2 appears twice with the same target: the data can be fit exactly.
  Output y = b.Const(*Tensor::FromVector<double>({1, -1, 1, 2, 0}, Shape({5, 1})));
  Output err = b.Sub(b.MatMul(b.Gather(rE, words), rW), y);
  b.Identity(b.Sum(b.Op("Square", {err})), "loss");
  EmbeddingModel m;
  m.graph = Built(b);
  auto g = AddGradients(m.graph, {"loss"}, {b.Name(rE), b.Name(rW)});
  EXPECT_TRUE(g.ok()) << g.status();
  m.grads = *g;
  if (fetch_gradient_too) {
    // Something else reads the gradient: the step must stay dense.
    NodeDef id;
    id.name = "dE_copy";
    id.op = "Identity";
    id.input = {m.grads[0]};
    m.graph.node.push_back(id);
  }
  return m;
}

int CountOp(const Graph& g, const std::string& op) {
  int n = 0;
  for (const NodeDef& node : g.node) n += node.op == op;
  return n;
}

TEST(Training, SgdOnAGatheredTableUpdatesOnlyItsRows) {
  constexpr double kLr = 0.05;
  // The dense gradients and the loss, from the graph before the step.
  EmbeddingModel dense = BuildEmbedding(false);
  auto ds = Session::Create(dense.graph);
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto g = (*ds)->Run({}, {dense.grads[0], dense.grads[1]}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<double> dE = Values((*g)[0]), dW = Values((*g)[1]);
  const std::vector<double> E0 = Values(*(*ds)->ReadVariable("E")), W0 = Values(*(*ds)->ReadVariable("W"));
  // Rows 1 and 4 are never gathered; rows 2 (twice), 0, 5, 3 are.
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(dE[1 * 2 + k], 0.0);
    EXPECT_EQ(dE[4 * 2 + k], 0.0);
    EXPECT_NE(dE[2 * 2 + k], 0.0);
  }

  for (bool fetch_too : {false, true}) {
    EmbeddingModel m = BuildEmbedding(fetch_too);
    auto step = AddSgdStep(m.graph, {"E", "W"}, m.grads, kLr);
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(CountOp(m.graph, "ScatterAdd"), fetch_too ? 0 : 1);
    EXPECT_EQ(CountOp(m.graph, "GatherGrad"), fetch_too ? 1 : 0);
    EXPECT_EQ(CountOp(m.graph, "AssignAdd"), fetch_too ? 2 : 1);
    auto s = Session::Create(m.graph);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Run({}, {"loss"}, {*step}).ok());
    const std::vector<double> E1 = Values(*(*s)->ReadVariable("E")), W1 = Values(*(*s)->ReadVariable("W"));
    for (size_t i = 0; i < E0.size(); ++i)
      EXPECT_NEAR(E1[i], E0[i] - kLr * dE[i], 1e-15) << "E element " << i << (fetch_too ? " (dense)" : "");
    EXPECT_EQ(E1[1 * 2], E0[1 * 2]);  // untouched rows stay bit-identical
    EXPECT_EQ(E1[4 * 2 + 1], E0[4 * 2 + 1]);
    for (size_t i = 0; i < W0.size(); ++i) EXPECT_NEAR(W1[i], W0[i] - kLr * dW[i], 1e-15);
  }
}

// The table read by Gather inside a recursive function, the natural way to
// write a tree model's leaves: its gradient comes back as indexed rows
// (IndexedRowsSum), and AddSgdStep scatters them into the gathered rows
// only, agreeing with the dense step.
TEST(Training, SgdOnATableGatheredInsideRecursionUpdatesOnlyItsRows) {
  constexpr double kLr = 0.05;
  auto build = [](bool fetch_too, std::vector<std::string>* grads) {
    GraphBuilder b;
    // f(i, E) = i < 0 ? 0 : sum(E[words[i]] * c) ^ 2 + f(i - 1, E), words = {2, 0, 2, 5, 3}.
    absl::Status s = b.DefineFunction(
        {"f", {{"i", DType::kInt64}, {"E", DType::kFloat64}}, {{"y", DType::kFloat64}}},
        [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
          return f.Cond(
              f.Less(a[0], f.Const<int64_t>(0)), [&] { return std::vector<Output>{f.Const<double>(0.0)}; },
              [&] {
                Output word = f.Gather(f.Const(Tensor::Vector<int64_t>({2, 0, 2, 5, 3})), a[0]);
                Output v = f.Sum(f.Mul(f.Gather(a[1], word), f.Const(Tensor::Vector<double>({0.5, -1.5}))));
                return std::vector<Output>{
                    f.Add(f.Mul(v, v), f.Call("f", {f.Sub(a[0], f.Const<int64_t>(1)), a[1]})[0])};
              });
        });
    EXPECT_TRUE(s.ok()) << s;
    std::vector<double> e0(6 * 2);
    for (int i = 0; i < 12; ++i) e0[i] = 0.1 * i - 0.4;
    Output rE = b.Read(b.Variable("E", *Tensor::FromVector<double>(e0, Shape({6, 2}))));
    b.Identity(b.Call("f", {b.Const<int64_t>(4), rE})[0], "loss");
    Graph g = Built(b);
    auto d = AddGradients(g, {"loss"}, {b.Name(rE)});
    EXPECT_TRUE(d.ok()) << d.status();
    *grads = *d;
    if (fetch_too) {
      NodeDef id;
      id.name = "dE_copy";
      id.op = "Identity";
      id.input = {(*grads)[0]};
      g.node.push_back(id);
    }
    return g;
  };
  std::vector<std::string> grads;
  Graph dense = build(false, &grads);
  EXPECT_EQ(CountOp(dense, "IndexedRowsSum"), 1);
  auto ds = Session::Create(dense);
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto g = (*ds)->Run({}, {grads[0]}, {});
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<double> dE = Values((*g)[0]), E0 = Values(*(*ds)->ReadVariable("E"));
  EXPECT_EQ(dE[1 * 2], 0.0);
  EXPECT_NE(dE[2 * 2], 0.0);
  for (bool fetch_too : {false, true}) {
    Graph m = build(fetch_too, &grads);
    auto step = AddSgdStep(m, {"E"}, grads, kLr);
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(CountOp(m, "ScatterAdd"), fetch_too ? 0 : 1);
    EXPECT_EQ(CountOp(m, "IndexedRowsSum"), fetch_too ? 1 : 0);
    auto s = Session::Create(m);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Run({}, {"loss"}, {*step}).ok());
    const std::vector<double> E1 = Values(*(*s)->ReadVariable("E"));
    for (size_t i = 0; i < E0.size(); ++i)
      EXPECT_NEAR(E1[i], E0[i] - kLr * dE[i], 1e-15) << "E element " << i << (fetch_too ? " (dense)" : "");
    EXPECT_EQ(E1[1 * 2], E0[1 * 2]);  // untouched rows stay bit-identical
    EXPECT_EQ(E1[4 * 2 + 1], E0[4 * 2 + 1]);
  }
}

TEST(Training, SparseSgdTrainsAnEmbedding) {
  // Many steps: the loss of the gathered model goes to ~0 (5 equations, 12
  // embedding entries and 2 weights).
  EmbeddingModel m = BuildEmbedding(false);
  auto step = AddSgdStep(m.graph, {"E", "W"}, m.grads, 0.05);
  ASSERT_TRUE(step.ok()) << step.status();
  auto s = Session::Create(m.graph);
  ASSERT_TRUE(s.ok()) << s.status();
  double first = 0, last = 0;
  for (int i = 0; i < 2000; ++i) {
    auto out = (*s)->Run({}, {"loss"}, {*step});
    ASSERT_TRUE(out.ok()) << out.status();
    (i == 0 ? first : last) = (*out)[0].scalar<double>();
  }
  EXPECT_GT(first, 1.0);
  EXPECT_LT(last, 1e-8);
}

}  // namespace
}  // namespace tdf
