// Gradients through Cond and through recursive and mutually recursive
// functions, fused: each call of f and its gradient call share one
// invocation of f_ext.
#include <cmath>

#include "autodiff_test_util.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

using testing_autodiff::CheckGradients;
using testing_autodiff::Feeds;

constexpr DType kF = DType::kFloat64;
constexpr DType kI = DType::kInt64;

// exp(x, n) = n == 0 ? 1 : x * exp(x, n - 1)
void DefineExp(GraphBuilder& b) {
  ASSERT_TRUE(b.DefineFunction({"exp", {{"x", kF}, {"n", kI}}, {{"y", kF}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 Output x = a[0], n = a[1];
                                 return f.Cond(
                                     f.Equal(n, f.Const<int64_t>(0)),
                                     [&] { return std::vector<Output>{f.Const<double>(1.0)}; },
                                     [&] {
                                       return std::vector<Output>{
                                           f.Mul(x, f.Call("exp", {x, f.Sub(n, f.Const<int64_t>(1))})[0])};
                                     });
                               })
                  .ok());
}

Graph ExpGraph() {
  GraphBuilder b;
  DefineExp(b);
  Output x = b.Placeholder("x", kF);
  Output n = b.Placeholder("n", kI);
  b.Identity(b.Call("exp", {x, n})[0], "y");
  return *b.Build();
}

TEST(CondGradients, BothBranchesAndCapturedValues) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kF);
  Output z = b.Placeholder("z", kF);
  Output p = b.Placeholder("p", DType::kBool);
  Output r = b.Cond(
      p, [&] { return std::vector<Output>{b.Mul(b.Exp(x), z)}; },
      [&] { return std::vector<Output>{b.Tanh(b.Mul(x, x))}; })[0];
  b.Identity(b.Add(b.Mul(r, x), z), "y");
  Graph g = *b.Build();
  for (bool pv : {true, false}) {
    auto res = CheckGradients(g, "y", {"x", "z"},
                              {{"x", Tensor::Scalar<double>(0.7)}, {"z", Tensor::Scalar<double>(-1.3)},
                               {"p", Tensor::Scalar<bool>(pv)}});
    EXPECT_TRUE(res.ok()) << "p=" << pv << ": " << res.status();
  }
}

TEST(CondGradients, NestedCondAndBranchReturningConstant) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kF);
  Output r = b.Cond(
      b.Greater(x, b.Const<double>(0.0)),
      [&] {
        return b.Cond(
            b.Greater(x, b.Const<double>(1.0)), [&] { return std::vector<Output>{b.Mul(x, x)}; },
            [&] { return std::vector<Output>{b.Const<double>(5.0)}; });
      },
      [&] { return std::vector<Output>{b.Sigmoid(x)}; })[0];
  b.Identity(b.Mul(r, b.Exp(x)), "y");
  Graph g = *b.Build();
  for (double xv : {-0.5, 0.5, 1.5}) {
    auto res = CheckGradients(g, "y", {"x"}, {{"x", Tensor::Scalar<double>(xv)}});
    EXPECT_TRUE(res.ok()) << "x=" << xv << ": " << res.status();
  }
}

TEST(FunctionGradients, ExpMatchesClosedFormUpTo10000) {
  Graph g = ExpGraph();
  Graph grad = g;
  auto dx = AddGradients(grad, {"y"}, {"x"});
  ASSERT_TRUE(dx.ok()) << dx.status();
  auto s = Session::Create(grad);
  ASSERT_TRUE(s.ok()) << s.status();
  for (int64_t n : {0, 1, 2, 5, 10, 100, 1000, 10000}) {
    const double x = 1.0 + 1.0 / (n + 1.0);  // (1 + 1/n)^n stays below e
    RunStats stats;
    auto out = (*s)->Run({{"x", Tensor::Scalar<double>(x)}, {"n", Tensor::Scalar<int64_t>(n)}}, {"y", (*dx)[0]}, {},
                         &stats);
    ASSERT_TRUE(out.ok()) << "n=" << n << ": " << out.status();
    const double y = std::pow(x, n), d = n == 0 ? 0.0 : n * std::pow(x, n - 1);
    EXPECT_NEAR((*out)[0].scalar<double>(), y, 1e-9 * y) << n;
    EXPECT_NEAR((*out)[1].scalar<double>(), d, 1e-9 * std::max(1.0, d)) << n;
    EXPECT_EQ(stats.live_frames_after_run, 0) << n;
  }
}

TEST(FunctionGradients, ExpFiniteDifferences) {
  Graph g = ExpGraph();
  for (int64_t n : {0, 1, 3, 7}) {
    auto res = CheckGradients(g, "y", {"x"}, {{"x", Tensor::Scalar<double>(0.9)}, {"n", Tensor::Scalar<int64_t>(n)}});
    EXPECT_TRUE(res.ok()) << n << ": " << res.status();
  }
}

// The fused pass as a fact: per forward node of the transformed graph, the
// gradient run fires it exactly as often as the forward-only run does.
TEST(FunctionGradients, FusedForwardFiresOncePerInvocation) {
  Graph g = ExpGraph();
  Graph grad = g;
  auto dx = AddGradients(grad, {"y"}, {"x"});
  ASSERT_TRUE(dx.ok()) << dx.status();
  SessionOptions opts;
  opts.collect_node_stats = true;
  auto fwd = Session::Create(g, opts);
  auto both = Session::Create(grad, opts);
  ASSERT_TRUE(fwd.ok() && both.ok());
  const int64_t n = 50;
  Feeds feeds = {{"x", Tensor::Scalar<double>(1.01)}, {"n", Tensor::Scalar<int64_t>(n)}};
  RunStats fs, bs;
  ASSERT_TRUE((*fwd)->Run(feeds, {"y"}, {}, &fs).ok());
  ASSERT_TRUE((*both)->Run(feeds, {"y", (*dx)[0]}, {}, &bs).ok());
  EXPECT_EQ(fs.live_frames_after_run, 0);
  EXPECT_EQ(bs.live_frames_after_run, 0);
  // Forward body nodes are "exp/<node>" in the forward graph and
  // "exp_ext/<node>" in the gradient graph (same node names).
  int compared = 0;
  for (const auto& [name, counts] : fs.firings_by_node) {
    std::string other = name;
    if (name.rfind("exp/", 0) == 0) {
      other = "exp_ext/" + name.substr(4);
      // The call sites' Call/Return nodes are named after the Invoke, which
      // kept its name; they exist in both.
    }
    auto it = bs.firings_by_node.find(other);
    ASSERT_NE(it, bs.firings_by_node.end()) << other;
    EXPECT_EQ(it->second.first, counts.first) << name << " live firings";
    ++compared;
  }
  EXPECT_GT(compared, 10);
  // One invocation per level: n + 1 frames of exp_ext plus the root.
  EXPECT_EQ(bs.frames_created, fs.frames_created);
  // The forward multiplications happen n times in both runs.
  EXPECT_EQ(fs.firings_by_op.at("Mul").first, n);
}

// even(x, n) = n == 0 ? x : odd(x * 1.1, n - 1); odd(x, n) = n == 0 ? -x : even(sin-ish(x), n - 1)
TEST(FunctionGradients, MutualRecursion) {
  GraphBuilder b;
  ASSERT_TRUE(b.Declare({"odd", {{"x", kF}, {"n", kI}}, {{"y", kF}}}).ok());
  ASSERT_TRUE(b.DefineFunction({"even", {{"x", kF}, {"n", kI}}, {{"y", kF}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 Output x = a[0], n = a[1];
                                 return f.Cond(
                                     f.Equal(n, f.Const<int64_t>(0)), [&] { return std::vector<Output>{x}; },
                                     [&] {
                                       return std::vector<Output>{f.Call(
                                           "odd", {f.Mul(x, f.Const<double>(1.1)), f.Sub(n, f.Const<int64_t>(1))})[0]};
                                     });
                               })
                  .ok());
  ASSERT_TRUE(b.DefineFunction({"odd", {{"x", kF}, {"n", kI}}, {{"y", kF}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 Output x = a[0], n = a[1];
                                 return f.Cond(
                                     f.Equal(n, f.Const<int64_t>(0)), [&] { return std::vector<Output>{f.Neg(x)}; },
                                     [&] {
                                       Output t = f.Tanh(x);
                                       return std::vector<Output>{f.Add(
                                           f.Mul(t, f.Call("even", {t, f.Sub(n, f.Const<int64_t>(1))})[0]), x)};
                                     });
                               })
                  .ok());
  Output x = b.Placeholder("x", kF);
  Output n = b.Placeholder("n", kI);
  b.Identity(b.Call("even", {x, n})[0], "y");
  Graph g = *b.Build();
  for (int64_t nv : {0, 1, 2, 5, 8}) {
    auto res = CheckGradients(g, "y", {"x"}, {{"x", Tensor::Scalar<double>(0.6)}, {"n", Tensor::Scalar<int64_t>(nv)}});
    EXPECT_TRUE(res.ok()) << nv << ": " << res.status();
  }
}

// Two calls of one recursive function, a call whose result is used twice, and
// a function of two float arguments and two results.
TEST(FunctionGradients, SeveralCallSitesAndMultipleResults) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"pair", {{"a", kF}, {"b", kF}, {"n", kI}}, {{"s", kF}, {"p", kF}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 Output x = a[0], y = a[1], n = a[2];
                                 return f.Cond(
                                     f.LessEqual(n, f.Const<int64_t>(0)),
                                     [&] { return std::vector<Output>{f.Add(x, y), f.Mul(x, y)}; },
                                     [&] {
                                       std::vector<Output> r =
                                           f.Call("pair", {f.Tanh(y), f.Mul(x, f.Const<double>(0.9)),
                                                           f.Sub(n, f.Const<int64_t>(1))});
                                       return std::vector<Output>{f.Add(r[0], f.Mul(r[1], x)), f.Sigmoid(r[0])};
                                     });
                               })
                  .ok());
  Output x = b.Placeholder("x", kF);
  Output z = b.Placeholder("z", kF);
  Output n = b.Placeholder("n", kI);
  std::vector<Output> r1 = b.Call("pair", {x, z, n});
  std::vector<Output> r2 = b.Call("pair", {r1[1], x, b.Const<int64_t>(2)});
  b.Identity(b.Add(b.Mul(r1[0], r2[0]), b.Mul(r2[1], r1[0])), "y");
  Graph g = *b.Build();
  for (int64_t nv : {0, 1, 4}) {
    auto res = CheckGradients(g, "y", {"x", "z"},
                              {{"x", Tensor::Scalar<double>(0.4)}, {"z", Tensor::Scalar<double>(-0.7)},
                               {"n", Tensor::Scalar<int64_t>(nv)}});
    EXPECT_TRUE(res.ok()) << nv << ": " << res.status();
  }
}

TEST(FunctionGradients, ExtendedFunctionShape) {
  Graph g = ExpGraph();
  ASSERT_TRUE(AddGradients(g, {"y"}, {"x"}).ok());
  const FunctionDef* ext = g.library.Find("exp_ext");
  ASSERT_NE(ext, nullptr);
  ASSERT_EQ(ext->signature.inputs.size(), 3u);   // x, n, d_y
  ASSERT_EQ(ext->signature.outputs.size(), 2u);  // y, d_x
  // The transformed graph has ONE body of exp_ext and no body of exp.
  auto t = StaticizeRecursion(g);
  ASSERT_TRUE(t.ok()) << t.status();
  int calls_in_body = 0;
  for (const NodeDef& node : t->node) {
    EXPECT_NE(node.name.rfind("exp/", 0), 0u) << node.name;
    if (node.op == "Call" && node.name.rfind("exp_ext/", 0) == 0) ++calls_in_body;
  }
  // The recursive site inside exp_ext: x, n (forward part) and d_y (gradient part).
  EXPECT_EQ(calls_in_body, 3);
}

}  // namespace
}  // namespace tdf

namespace tdf {
namespace {

// A call of exp_ext without a gradient partner: a partial invocation that
// supplies only (x, n). It must still return y.
TEST(FunctionGradients, PartialInvocationReturnsY) {
  Graph g = ExpGraph();
  ASSERT_TRUE(AddGradients(g, {"y"}, {"x"}).ok());
  NodeDef partial;
  partial.name = "partial";
  partial.op = "Invoke";
  partial.input = {"x", "n"};
  partial.attr = {{"function", "exp_ext"},
                  {"partial_args", std::vector<int64_t>{0, 1}},
                  {"partial_results", std::vector<int64_t>{0}},
                  {"site_group", "partial"}};
  g.node.push_back(partial);
  NodeDef id;
  id.name = "partial_y";
  id.op = "Identity";
  id.input = {"partial"};
  g.node.push_back(id);
  auto s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status();
  RunStats stats;
  auto out = (*s)->Run({{"x", Tensor::Scalar<double>(1.5)}, {"n", Tensor::Scalar<int64_t>(4)}}, {"partial_y"}, {},
                       &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_DOUBLE_EQ((*out)[0].scalar<double>(), 1.5 * 1.5 * 1.5 * 1.5);
  // The missing d_y enters the partial invocation as dead, and so does the
  // dead d_y of each recursive call below it: the unfed backward halves
  // drain as dead and every frame is reclaimed during the run.
  EXPECT_EQ(stats.live_frames_after_run, 0);
  EXPECT_GT(stats.firings_by_op["Call"].second, 0) << "dead gradient Calls";
}

}  // namespace
}  // namespace tdf

namespace tdf {
namespace {

TEST(FunctionGradients, CallInTheUntakenBranchDrainsWithoutAnInvocation) {
  // y = p ? (x > 0 ? tanh(exp(x, 3)) * x : x) : x * x. With p false the
  // split site of exp_ext gets only dead arguments and must drain without
  // an invocation; with p true one invocation per depth. (The seeds 9145
  // and 12028 of RandomPrograms.WithWhileLoops* are the cases where the
  // backward part waited for the dead forward part's results.)
  GraphBuilder b;
  DefineExp(b);
  Output x = b.Placeholder("x", kF);
  Output p = b.Placeholder("p", DType::kBool);
  Output r = b.Cond(
      p,
      [&] {
        Output q = b.Greater(x, b.Const<double>(0.0));
        return b.Cond(
            q,
            [&] {
              Output e = b.Call("exp", {x, b.Const<int64_t>(3)})[0];
              return std::vector<Output>{b.Mul(b.Tanh(e), x)};
            },
            [&] { return std::vector<Output>{x}; });
      },
      [&] { return std::vector<Output>{b.Mul(x, x)}; })[0];
  b.Identity(r, "y");
  const Graph g = *b.Build();
  for (bool pv : {false, true}) {
    for (int workers : {1, 2, 8}) {
      SessionOptions o;
      o.num_workers = workers;
      auto res = CheckGradients(g, "y", {"x"}, {{"x", Tensor::Scalar<double>(0.8)}, {"p", Tensor::Scalar<bool>(pv)}},
                                1e-6, 1e-6, o);
      ASSERT_TRUE(res.ok()) << "p=" << pv << " workers=" << workers << ": " << res.status();
      EXPECT_EQ(res->stats.frames_created, pv ? 1 + 4 : 1);  // root (+ exp_ext at depths 3..0)
    }
  }
}

}  // namespace
}  // namespace tdf
