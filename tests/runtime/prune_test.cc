// A run fires only the main-graph nodes its fetches and targets need
// (runtime/prune.h): unneeded placeholders need no feed, side effects
// nothing asks for do not happen, a training graph's loss is evaluated
// without a step, and loops and call sites nothing needs never start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "runtime/exec_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::FibCalls;
using exec_test::ForEachMode;
using exec_test::I;
using exec_test::MakeSession;
using ::testing::HasSubstr;

constexpr DType kI = DType::kInt64;
constexpr DType kF = DType::kFloat64;

int64_t Int(const Tensor& t) { return t.scalar<int64_t>(); }

// "a" = x * 2 and "b" = y + 1: two computations that share nothing.
Graph TwoIndependent() {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI), y = b.Placeholder("y", kI);
  b.Identity(b.Mul(x, b.Const<int64_t>(2)), "a");
  b.Identity(b.Add(y, b.Const<int64_t>(1)), "b");
  return Built(b);
}

TEST(Prune, AFetchNeedsOnlyTheFeedsItReads) {
  ForEachMode(TwoIndependent(), 1, [](Session* s) {
    RunStats stats;
    auto a = s->Run({{"x", I(5)}}, {"a"}, {}, &stats);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(Int((*a)[0]), 10);
    EXPECT_GT(stats.nodes_pruned, 0);
    EXPECT_EQ(stats.live_frames_after_run, 0);
    const int64_t firings_a = stats.firings;

    auto b = s->Run({{"y", I(5)}}, {"b"}, {}, &stats);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(Int((*b)[0]), 6);

    // Both: nothing left out, and each fetch's nodes fire as they did alone.
    auto both = s->Run({{"x", I(5)}, {"y", I(5)}}, {"a", "b"}, {}, &stats);
    ASSERT_TRUE(both.ok()) << both.status();
    EXPECT_EQ(Int((*both)[0]), 10);
    EXPECT_EQ(Int((*both)[1]), 6);
    EXPECT_EQ(stats.nodes_pruned, 0);
    EXPECT_GT(stats.firings, firings_a);

    // A feed the fetch does not need may still be given; one it needs may not be left out.
    EXPECT_TRUE(s->Run({{"x", I(1)}, {"y", I(1)}}, {"a"}).ok());
    auto missing = s->Run({{"y", I(1)}}, {"a"});
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(missing.status().message(), HasSubstr("'x' (Placeholder): missing feed"));
    // A feed of the wrong type is an error even where nothing reads it.
    EXPECT_EQ(s->Run({{"x", I(1)}, {"y", Tensor::Scalar<double>(1)}}, {"a"}).status().code(),
              absl::StatusCode::kInvalidArgument);
  });
}

TEST(Prune, ARunWithoutFetchesOrTargetsFiresNothing) {
  ForEachMode(TwoIndependent(), 1, [](Session* s) {
    RunStats stats;
    auto out = s->Run({}, {}, {}, &stats);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(out->empty());
    EXPECT_EQ(stats.firings, 0);
    EXPECT_EQ(stats.frames_created, 1);  // the root
    EXPECT_EQ(stats.nodes_pruned, static_cast<int64_t>(s->executable_graph().node.size()));
  });
}

// A counter bumped by AssignAdd, and "out" = x * 2 beside it; "guarded" =
// x + 1 runs after the bump (a control input).
struct Counter {
  Graph graph;
  std::string bump;
};

Counter CounterGraph() {
  GraphBuilder b;
  Output c = b.Variable("count", I(0));
  Output bump = b.AssignAdd(c, b.Const<int64_t>(1));
  Output x = b.Placeholder("x", kI);
  b.Identity(b.Mul(x, b.Const<int64_t>(2)), "out");
  Output guarded = b.Identity(b.Add(x, b.Const<int64_t>(1)), "guarded");
  b.AddControlInput(guarded, bump);
  return {Built(b), b.Name(bump)};
}

TEST(Prune, SideEffectsRunOnlyWhenSomethingNeedsThem) {
  Counter g = CounterGraph();
  ForEachMode(g.graph, 1, [&](Session* s) {
    auto count = [&] { return Int(*s->ReadVariable("count")); };
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Run({{"x", I(1)}}, {"out"}).ok());
    EXPECT_EQ(count(), 0);
    // As a target, with no feed: the bump needs none.
    ASSERT_TRUE(s->Run({}, {}, {g.bump}).ok());
    EXPECT_EQ(count(), 1);
    // Through a control input of what is fetched.
    auto out = s->Run({{"x", I(4)}}, {"guarded"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Int((*out)[0]), 5);
    EXPECT_EQ(count(), 2);
  });
}

// loss = (w * 3 - 6)^2 with an SGD step on w: fetching the loss (or the
// gradient) evaluates it; only a run that targets the step takes it.
TEST(Prune, FetchingTheLossOfATrainingGraphDoesNotStep) {
  GraphBuilder b;
  Output w = b.Variable("w", Tensor::Scalar<double>(1.0));
  Output rw = b.Read(w);
  Output e = b.Sub(b.Mul(rw, b.Const<double>(3.0)), b.Const<double>(6.0));
  b.Identity(b.Mul(e, e), "loss");
  Graph g = Built(b);
  auto grads = AddGradients(g, {"loss"}, {b.Name(rw)});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto step = AddSgdStep(g, {"w"}, *grads, 0.01);
  ASSERT_TRUE(step.ok()) << step.status();
  ForEachMode(g, 1, [&](Session* s) {
    auto w_now = [&] { return s->ReadVariable("w")->scalar<double>(); };
    for (int i = 0; i < 3; ++i) {
      auto out = s->Run({}, {"loss", (*grads)[0]});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_DOUBLE_EQ((*out)[0].scalar<double>(), 9.0);
      EXPECT_DOUBLE_EQ((*out)[1].scalar<double>(), 2 * (-3.0) * 3);  // 2 e * 3
    }
    EXPECT_DOUBLE_EQ(w_now(), 1.0);
    ASSERT_TRUE(s->Run({}, {}, {*step}).ok());
    EXPECT_DOUBLE_EQ(w_now(), 1.0 - 0.01 * -18.0);
  });
}

// Gradient descent through a recursive function (split call sites: the
// forward and the gradient call share one invocation). Fetching the loss
// takes no step and computes no gradient: the gradient part's arguments
// enter each invocation dead, so its gradient path drains (dead firings)
// and the live firings are the forward graph's. Every frame is reclaimed.
TEST(Prune, EvaluatingThroughARecursiveGradientCallDoesNotStep) {
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
  Output w = b.Variable("w", Tensor::Scalar<double>(1.1));
  Output rw = b.Read(w);
  Output e = b.Sub(b.Call("exp", {rw, b.Const<int64_t>(5)})[0], b.Const<double>(2.0));
  b.Identity(b.Mul(e, e), "loss");
  Graph g = Built(b);
  const Graph forward_only = g;
  auto grads = AddGradients(g, {"loss"}, {b.Name(rw)});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto step = AddSgdStep(g, {"w"}, *grads, 0.005);
  ASSERT_TRUE(step.ok()) << step.status();
  for (int workers : {1, 2}) {
    SCOPED_TRACE(workers);
    SessionOptions options;
    options.num_workers = workers;
    RunStats forward;
    {
      auto s = MakeSession(forward_only, options);
      ASSERT_NE(s, nullptr);
      ASSERT_TRUE(s->Run({}, {"loss"}, {}, &forward).ok());
    }
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    const double e0 = std::pow(1.1, 5) - 2.0;
    for (int i = 0; i < 3; ++i) {
      RunStats stats;
      auto out = s->Run({}, {"loss"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_NEAR((*out)[0].scalar<double>(), e0 * e0, 1e-12);
      EXPECT_GT(stats.nodes_pruned, 0);
      EXPECT_EQ(stats.live_frames_after_run, 0);
      EXPECT_EQ(stats.frames_created, forward.frames_created);
      // Each op of the forward graph fires live as often; the gradient's
      // own ops do not fire live. (One extra live firing: a ZerosLike of
      // the extended body that reads only forward values.)
      for (const auto& [op, counts] : forward.firings_by_op)
        EXPECT_EQ(exec_test::OpCount(stats, op).first, counts.first) << op;
      for (const char* op : {"AddN", "SumToShapeOf", "OnesLike", "AssignAdd"})
        EXPECT_EQ(exec_test::OpCount(stats, op).first, 0) << op;
      EXPECT_LE(stats.live_firings, forward.live_firings + 1);
      // What only the dead dy feeds is skipped (the dy's Switch jumps to its
      // frontier): those ops do not fire at all, not even dead. The Calls,
      // results and Switches on the way fire dead.
      EXPECT_EQ(exec_test::OpCount(stats, "SumToShapeOf"), std::make_pair(int64_t{0}, int64_t{0}));
      EXPECT_GT(stats.dead_firings, 0);
    }
    EXPECT_DOUBLE_EQ(s->ReadVariable("w")->scalar<double>(), 1.1);
    {
      // SessionOptions::evaluate_without_gradients off: the call runs whole,
      // its gradient live, and still no step.
      SessionOptions whole = options;
      whole.evaluate_without_gradients = false;
      auto w = MakeSession(g, whole);
      ASSERT_NE(w, nullptr);
      RunStats stats;
      auto out = w->Run({}, {"loss"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_NEAR((*out)[0].scalar<double>(), e0 * e0, 1e-12);
      EXPECT_EQ(stats.dead_firings, 0);
      EXPECT_GT(exec_test::OpCount(stats, "SumToShapeOf").first, 0);
      EXPECT_EQ(exec_test::OpCount(stats, "AssignAdd").first, 0);
      EXPECT_EQ(stats.live_frames_after_run, 0);
      EXPECT_DOUBLE_EQ(w->ReadVariable("w")->scalar<double>(), 1.1);
    }
    RunStats stats;
    ASSERT_TRUE(s->Run({}, {}, {*step}, &stats).ok());
    EXPECT_EQ(stats.live_frames_after_run, 0);
    const double dw = 2 * e0 * 5 * std::pow(1.1, 4);
    EXPECT_NEAR(s->ReadVariable("w")->scalar<double>(), 1.1 - 0.005 * dw, 1e-12);
  }
}

// Two loops of the main graph: "sum" = 0 + 1 + ... + (n - 1) and "count"
// counting to m. A run that needs one never starts the other.
TEST(Prune, ALoopNothingNeedsNeverStarts) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI), m = b.Placeholder("m", kI);
  std::vector<Output> sum = b.While([&](const std::vector<Output>& v) { return b.Less(v[0], n); },
                                    [&](const std::vector<Output>& v) {
                                      return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], v[0])};
                                    },
                                    {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  b.Identity(sum[1], "sum");
  std::vector<Output> count = b.While([&](const std::vector<Output>& v) { return b.Less(v[0], m); },
                                      [&](const std::vector<Output>& v) {
                                        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1))};
                                      },
                                      {b.Const<int64_t>(0)});
  b.Identity(count[0], "count");
  ForEachMode(Built(b), 1, [](Session* s) {
    RunStats sum_stats, count_stats, both_stats;
    auto sum = s->Run({{"n", I(10)}}, {"sum"}, {}, &sum_stats);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(Int((*sum)[0]), 45);
    auto count = s->Run({{"m", I(7)}}, {"count"}, {}, &count_stats);
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(Int((*count)[0]), 7);
    auto both = s->Run({{"n", I(10)}, {"m", I(7)}}, {"count", "sum"}, {}, &both_stats);
    ASSERT_TRUE(both.ok()) << both.status();
    EXPECT_EQ(Int((*both)[0]), 7);
    EXPECT_EQ(Int((*both)[1]), 45);
    // Each run created the root and its own loop's iterations only.
    EXPECT_EQ(sum_stats.frames_created + count_stats.frames_created, both_stats.frames_created + 1);
    EXPECT_EQ(sum_stats.firings + count_stats.firings, both_stats.firings);
    EXPECT_EQ(both_stats.nodes_pruned, 0);
    for (const RunStats* st : {&sum_stats, &count_stats, &both_stats}) EXPECT_EQ(st->live_frames_after_run, 0);
  });
}

// Two call sites of fib in main: a run that needs one result makes only
// that site's invocations.
TEST(Prune, ACallSiteNothingNeedsMakesNoInvocation) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"fib", {{"n", kI}}, {{"r", kI}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 Output n = a[0];
                                 return f.Cond(
                                     f.LessEqual(n, f.Const<int64_t>(1)),
                                     [&] { return std::vector<Output>{f.Const<int64_t>(1)}; },
                                     [&] {
                                       return std::vector<Output>{
                                           f.Add(f.Call("fib", {f.Sub(n, f.Const<int64_t>(1))})[0],
                                                 f.Call("fib", {f.Sub(n, f.Const<int64_t>(2))})[0])};
                                     });
                               })
                  .ok());
  std::vector<Output> first = b.Call("fib", {b.Placeholder("n", kI)});
  b.Identity(first[0], "first");
  b.Identity(b.Call("fib", {b.Placeholder("m", kI)})[0], "second");
  const std::string first_invoke = b.Name(first[0]);
  for (int workers : {1, 2}) {
    SCOPED_TRACE(workers);
    ForEachMode(Built(b), workers, [&](Session* s) {
      RunStats stats;
      auto out = s->Run({{"n", I(10)}}, {"first"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Int((*out)[0]), 89);
      EXPECT_EQ(stats.frames_created, 1 + FibCalls(89));
      EXPECT_EQ(stats.live_frames_after_run, 0);
      // The call fetched by its Invoke's name.
      out = s->Run({{"n", I(10)}}, {first_invoke}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Int((*out)[0]), 89);
      EXPECT_EQ(stats.frames_created, 1 + FibCalls(89));
      out = s->Run({{"m", I(5)}}, {"second"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Int((*out)[0]), 8);
      EXPECT_EQ(stats.frames_created, 1 + FibCalls(8));
      out = s->Run({{"n", I(10)}, {"m", I(5)}}, {"second", "first"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Int((*out)[0]), 8);
      EXPECT_EQ(Int((*out)[1]), 89);
      EXPECT_EQ(stats.frames_created, 1 + FibCalls(89) + FibCalls(8));
      EXPECT_EQ(stats.live_frames_after_run, 0);
    });
  }
}

// A Cond of the main graph: only the branch values the fetch reads are
// needed; "other" beside it is left out.
TEST(Prune, ACondOfTheMainGraph) {
  GraphBuilder b;
  Output p = b.Placeholder("p", DType::kBool), x = b.Placeholder("x", kI), y = b.Placeholder("y", kI);
  std::vector<Output> r = b.Cond(
      p, [&] { return std::vector<Output>{b.Add(x, b.Const<int64_t>(1))}; },
      [&] { return std::vector<Output>{b.Sub(x, b.Const<int64_t>(1))}; });
  b.Identity(r[0], "r");
  b.Identity(b.Mul(y, y), "other");
  ForEachMode(Built(b), 1, [](Session* s) {
    for (bool pred : {true, false}) {
      RunStats stats;
      auto out = s->Run({{"p", Tensor::Scalar<bool>(pred)}, {"x", I(10)}}, {"r"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Int((*out)[0]), pred ? 11 : 9);
      EXPECT_GT(stats.nodes_pruned, 0);
    }
  });
}

// Runs with different fetch sets at once on one session: each plan is
// made once and shared.
TEST(Prune, ConcurrentRunsWithDifferentFetches) {
  Counter g = CounterGraph();
  SessionOptions options;
  options.num_workers = 2;
  auto s = MakeSession(g.graph, options);
  ASSERT_NE(s, nullptr);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  constexpr int kRuns = 200;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        const bool guarded = (t + i) % 2 == 0;
        auto out = s->Run({{"x", I(i)}}, {guarded ? "guarded" : "out"});
        if (!out.ok() || Int((*out)[0]) != (guarded ? i + 1 : 2 * i)) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // Only the runs that fetched "guarded" bumped the counter.
  EXPECT_EQ(Int(*s->ReadVariable("count")), 4 * kRuns / 2);
}

}  // namespace
}  // namespace tdf
