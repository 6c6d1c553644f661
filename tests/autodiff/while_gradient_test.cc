// Gradients through While loops: each loop on the gradient path is lowered to
// a tail-recursive function (src/autodiff/loop_lowering.h), whose fused
// extended function runs the body's gradient once per iteration, in reverse.
#include <cmath>

#include "absl/strings/match.h"
#include "autodiff_test_util.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

using testing_autodiff::CheckGradients;
using testing_autodiff::Feeds;

constexpr DType kF = DType::kFloat64;
constexpr DType kI = DType::kInt64;

Tensor F(double v) { return Tensor::Scalar<double>(v); }
Tensor I(int64_t v) { return Tensor::Scalar<int64_t>(v); }

// a_{k+1} = tanh(a_k * w + b) for k < n; y = a_n. w and b are invariants
// (captured from outside the loop), a is a loop variable, i an int counter.
Graph RecurrenceGraph() {
  GraphBuilder b;
  Output a0 = b.Placeholder("a0", kF);
  Output w = b.Placeholder("w", kF);
  Output bias = b.Placeholder("b", kF);
  Output n = b.Placeholder("n", kI);
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Tanh(b.Add(b.Mul(v[1], w), bias))};
      },
      {b.Const<int64_t>(0), a0});
  b.Identity(out[1], "y");
  return *b.Build();
}

TEST(WhileGradients, RecurrenceMatchesFiniteDifferences) {
  const Graph g = RecurrenceGraph();
  for (int64_t n : {0, 1, 2, 7, 25}) {
    auto res = CheckGradients(g, "y", {"a0", "w", "b"},
                              {{"a0", F(0.3)}, {"w", F(0.9)}, {"b", F(-0.2)}, {"n", I(n)}}, 1e-7);
    ASSERT_TRUE(res.ok()) << "n=" << n << ": " << res.status();
    if (n == 0) {
      // No iteration: y = a0, and the invariants get zero gradients.
      EXPECT_EQ(res->dx[0].scalar<double>(), 1.0);
      EXPECT_EQ(res->dx[1].scalar<double>(), 0.0);
      EXPECT_EQ(res->dx[2].scalar<double>(), 0.0);
    }
  }
}

TEST(WhileGradients, InvariantGradientsSumOverIterations) {
  // a += w, n times: dy/dw = n, dy/da0 = 1.
  GraphBuilder b;
  Output a0 = b.Placeholder("a0", kF);
  Output w = b.Placeholder("w", kF);
  Output n = b.Placeholder("n", kI);
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], w)};
      },
      {b.Const<int64_t>(0), a0});
  b.Identity(out[1], "y");
  Graph g = *b.Build();
  std::vector<std::string> dx = *AddGradients(g, {"y"}, {"a0", "w"});
  auto s = *Session::Create(g);
  for (int64_t n : {0, 1, 10, 1000}) {
    RunStats stats;
    auto r = s->Run({{"a0", F(2)}, {"w", F(0.5)}, {"n", I(n)}}, {"y", dx[0], dx[1]}, {}, &stats);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_DOUBLE_EQ((*r)[0].scalar<double>(), 2 + 0.5 * n);
    EXPECT_DOUBLE_EQ((*r)[1].scalar<double>(), 1.0);
    EXPECT_DOUBLE_EQ((*r)[2].scalar<double>(), static_cast<double>(n));
    EXPECT_EQ(stats.live_frames_after_run, 0);
  }
}

TEST(WhileGradients, PowerByLoopForTenThousandIterations) {
  // p = x^n by repeated multiplication: dp/dx = n x^(n-1).
  GraphBuilder b;
  Output x = b.Placeholder("x", kF);
  Output n_in = b.Placeholder("n", kI);
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n_in); },
      [&](const std::vector<Output>& v) {
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Mul(v[1], x)};
      },
      {b.Const<int64_t>(0), b.Const<double>(1.0)});
  b.Identity(out[1], "p");
  Graph g = *b.Build();
  std::vector<std::string> dx = *AddGradients(g, {"p"}, {"x"});
  auto s = *Session::Create(g);
  const int64_t n = 10000;
  const double xv = 1.0001;
  RunStats stats;
  auto r = s->Run({{"x", F(xv)}, {"n", I(n)}}, {"p", dx[0]}, {}, &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR((*r)[0].scalar<double>(), std::pow(xv, n), 1e-9 * std::pow(xv, n));
  EXPECT_NEAR((*r)[1].scalar<double>(), n * std::pow(xv, n - 1), 1e-9 * n * std::pow(xv, n - 1));
  EXPECT_EQ(stats.live_frames_after_run, 0);
  // One invocation per iteration (plus the one that finds the loop done),
  // not a copy of the forward pass per backward step.
  EXPECT_LE(stats.frames_created, n + 3);
}

TEST(WhileGradients, NestedLoopsAndCondInTheBody) {
  // for i < n: { for j < m: s = s * x + (s > 0 ? w : x * w) }; y = s
  GraphBuilder b;
  Output x = b.Placeholder("x", kF);
  Output w = b.Placeholder("w", kF);
  Output s0 = b.Placeholder("s0", kF);
  Output n = b.Placeholder("n", kI);
  Output m = b.Placeholder("m", kI);
  std::vector<Output> outer = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        std::vector<Output> inner = b.While(
            [&](const std::vector<Output>& u) { return b.Less(u[0], m); },
            [&](const std::vector<Output>& u) {
              Output s = u[1];
              Output t = b.Cond(
                  b.Greater(s, b.Const<double>(0.0)), [&] { return std::vector<Output>{w}; },
                  [&] { return std::vector<Output>{b.Mul(x, w)}; })[0];
              return std::vector<Output>{b.Add(u[0], b.Const<int64_t>(1)), b.Add(b.Mul(s, x), t)};
            },
            {b.Const<int64_t>(0), v[1]});
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Tanh(inner[1])};
      },
      {b.Const<int64_t>(0), s0});
  b.Identity(outer[1], "y");
  const Graph g = *b.Build();
  for (double s0v : {0.4, -0.9}) {
    for (auto [nv, mv] : {std::pair<int64_t, int64_t>{3, 2}, {1, 4}, {0, 3}, {4, 0}}) {
      auto res = CheckGradients(g, "y", {"x", "w", "s0"},
                                {{"x", F(0.8)}, {"w", F(0.3)}, {"s0", F(s0v)}, {"n", I(nv)}, {"m", I(mv)}}, 1e-7);
      EXPECT_TRUE(res.ok()) << "s0=" << s0v << " n=" << nv << " m=" << mv << ": " << res.status();
    }
  }
}

TEST(WhileGradients, LoopInsideARecursiveFunctionAndCallInsideALoop) {
  // f(x, k) = k == 0 ? x : f(g(x), k - 1), where g(x) loops 3 times
  // a = a * x + 1 starting from a = x; the main graph calls f inside a loop
  // that accumulates y += f(x * c, 2) for c in 1..n.
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"f", {{"x", kF}, {"k", kI}}, {{"y", kF}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 Output x = a[0], k = a[1];
                                 return f.Cond(
                                     f.Equal(k, f.Const<int64_t>(0)), [&] { return std::vector<Output>{x}; },
                                     [&] {
                                       std::vector<Output> l = f.While(
                                           [&](const std::vector<Output>& v) {
                                             return f.Less(v[0], f.Const<int64_t>(3));
                                           },
                                           [&](const std::vector<Output>& v) {
                                             return std::vector<Output>{
                                                 f.Add(v[0], f.Const<int64_t>(1)),
                                                 f.Add(f.Mul(v[1], x), f.Const<double>(0.1))};
                                           },
                                           {f.Const<int64_t>(0), x});
                                       return std::vector<Output>{
                                           f.Call("f", {f.Tanh(l[1]), f.Sub(k, f.Const<int64_t>(1))})[0]};
                                     });
                               })
                  .ok());
  Output x = b.Placeholder("x", kF);
  Output n = b.Placeholder("n", kI);
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        Output c = b.Cast(b.Add(v[0], b.Const<int64_t>(1)), kF);
        Output fx = b.Call("f", {b.Mul(x, c), b.Const<int64_t>(2)})[0];
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], fx)};
      },
      {b.Const<int64_t>(0), b.Const<double>(0.0)});
  b.Identity(out[1], "y");
  const Graph g = *b.Build();
  for (int64_t nv : {0, 1, 3}) {
    auto res = CheckGradients(g, "y", {"x"}, {{"x", F(0.35)}, {"n", I(nv)}}, 1e-7);
    EXPECT_TRUE(res.ok()) << "n=" << nv << ": " << res.status();
  }
}

TEST(WhileGradients, ForwardOpsFireOncePerIterationAsInTheForwardRun) {
  const Graph g = RecurrenceGraph();
  SessionOptions o;
  o.collect_node_stats = true;
  const Feeds feeds = {{"a0", F(0.3)}, {"w", F(0.9)}, {"b", F(-0.2)}, {"n", I(40)}};
  RunStats forward;
  {
    auto s = *Session::Create(g, o);
    ASSERT_TRUE(s->Run(feeds, {"y"}, {}, &forward).ok());
  }
  Graph with_grad = g;
  std::vector<std::string> dx = *AddGradients(with_grad, {"y"}, {"a0", "w", "b"});
  RunStats grad;
  auto s = *Session::Create(with_grad, o);
  ASSERT_TRUE(s->Run(feeds, {"y", dx[0], dx[1], dx[2]}, {}, &grad).ok());
  EXPECT_EQ(grad.live_frames_after_run, 0);
  // The body's forward op fires once per iteration in both runs: the
  // backward pass reuses the values each iteration left in its frame.
  ASSERT_TRUE(forward.firings_by_op.count("Tanh"));
  EXPECT_EQ(forward.firings_by_op.at("Tanh").first, 40);
  EXPECT_EQ(grad.firings_by_op.at("Tanh").first, forward.firings_by_op.at("Tanh").first);
}

TEST(WhileGradients, LoopsOffTheGradientPathStayLoops) {
  // An integer loop computes n' = 2n; the float path does not go through it.
  GraphBuilder b;
  Output x = b.Placeholder("x", kF);
  Output n = b.Placeholder("n", kI);
  std::vector<Output> l = b.While([&](const std::vector<Output>& v) { return b.Less(v[0], n); },
                                  [&](const std::vector<Output>& v) {
                                    return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)),
                                                               b.Add(v[1], b.Const<int64_t>(2))};
                                  },
                                  {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  b.Identity(l[1], "m");
  b.Identity(b.Mul(x, x), "y");
  Graph g = *b.Build();
  const std::string loop_exit = b.Name(l[1]);
  std::vector<std::string> dx = *AddGradients(g, {"y"}, {"x"});
  EXPECT_NE(g.FindNode(loop_exit), nullptr);
  int enters = 0;
  for (const NodeDef& node : g.node) enters += node.op == "Enter";
  EXPECT_EQ(enters, 3);  // two loop variables and the captured n
  auto s = *Session::Create(g);
  auto r = s->Run({{"x", F(3)}, {"n", I(5)}}, {"m", dx[0]});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<int64_t>(), 10);
  EXPECT_DOUBLE_EQ((*r)[1].scalar<double>(), 6.0);
}

}  // namespace
}  // namespace tdf
