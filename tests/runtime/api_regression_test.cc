// Regressions from a usability audit of the session API: fetching a call's
// results by the Invoke's name (both modes alike), tensor arguments of
// dynamic-mode calls, dynamic mode with AddGradients' split call sites,
// duplicate feeds, non-positive deadlines, runs cancelled before they start
// and the range of num_workers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "oneapi/tbb/global_control.h"
#include "runtime/exec_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::Feeds;
using exec_test::ForEachMode;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::Outs;
using exec_test::RunResult;
using ::testing::HasSubstr;


// two(a, b) = (a + b, a - b); main: r = two(x, 1), "sum" = Identity(r[0]).
struct TwoResults {
  Graph graph;
  std::string invoke;  // the Invoke's name, as GraphBuilder::Name gives it
  std::string port1;
};

TwoResults BuildTwoResults() {
  GraphBuilder b;
  EXPECT_TRUE(b.DefineFunction({"two", {{"a", DType::kInt64}, {"b", DType::kInt64}},
                                {{"s", DType::kInt64}, {"d", DType::kInt64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs {
                                 return {f.Add(a[0], a[1]), f.Sub(a[0], a[1])};
                               })
                  .ok());
  Outs r = b.Call("two", {b.Placeholder("x", DType::kInt64), b.Const<int64_t>(1)});
  b.Identity(r[0], "sum");
  return {Built(b), b.Name(r[0]), b.Name(r[1])};
}

class InvokeFetchTest : public ::testing::TestWithParam<int> {};

TEST_P(InvokeFetchTest, AnInvokesOutputsAreItsCallsResultsInBothModes) {
  const TwoResults two = BuildTwoResults();
  ASSERT_EQ(two.port1, two.invoke + ":1");
  ForEachMode(two.graph, GetParam(), [&](Session* s) {
    for (int rep = 0; rep < 3; ++rep) {
      RunStats stats;
      auto out = s->Run({{"x", I(10)}}, {two.invoke, two.port1, "sum", two.invoke + ":0", two.port1}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), 5u);
      EXPECT_EQ(out->at(0).scalar<int64_t>(), 11);
      EXPECT_EQ(out->at(1).scalar<int64_t>(), 9);
      EXPECT_EQ(out->at(2).scalar<int64_t>(), 11);
      EXPECT_EQ(out->at(3).scalar<int64_t>(), 11);
      EXPECT_EQ(out->at(4).scalar<int64_t>(), 9);
      EXPECT_EQ(stats.live_frames_after_run, 0);
      // Port 1 alone, and the Invoke as a target.
      auto alone = s->Run({{"x", I(-4)}}, {two.port1}, {two.invoke});
      ASSERT_TRUE(alone.ok()) << alone.status();
      EXPECT_EQ(alone->at(0).scalar<int64_t>(), -5);
    }
    auto bad = s->Run({{"x", I(1)}}, {two.invoke + ":2"});
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("has 2 outputs"));
  });
}

TEST_P(InvokeFetchTest, StaticModeResolvesInvokesUnderEveryExecutorVariant) {
  const TwoResults two = BuildTwoResults();
  exec_test::ForEachVariant(GetParam(), [&](const SessionOptions& options) {
    auto s = MakeSession(two.graph, options);
    ASSERT_NE(s, nullptr);
    auto out = s->Run({{"x", I(7)}}, {two.port1, two.invoke});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at(0).scalar<int64_t>(), 6);
    EXPECT_EQ(out->at(1).scalar<int64_t>(), 8);
  });
}

TEST_P(InvokeFetchTest, AnInvokesOutputsWhenDevicePlacementRuns) {
  // Static mode finds an Invoke's Returns by their positions in the
  // transformed graph, or by name after placement (which may add nodes):
  // both ways give the call's results.
  const TwoResults two = BuildTwoResults();
  for (bool place : {false, true}) {
    SCOPED_TRACE(place ? "placement" : "no placement");
    SessionOptions options;
    options.num_workers = GetParam();
    options.place_tensor_ops_on_gpu = place;
    options.fallback_to_cpu = true;
    auto s = MakeSession(two.graph, options);
    ASSERT_NE(s, nullptr);
    auto out = s->Run({{"x", I(7)}}, {two.invoke, two.port1, "sum"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at(0).scalar<int64_t>(), 8);
    EXPECT_EQ(out->at(1).scalar<int64_t>(), 6);
    EXPECT_EQ(out->at(2).scalar<int64_t>(), 8);
  }
}

TEST_P(InvokeFetchTest, ARecursiveCallsResultByItsInvoke) {
  // fact(n) = n <= 1 ? 1 : n * fact(n - 1); the main graph fetches the Invoke.
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"fact", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs {
                                 return f.Cond(
                                     f.LessEqual(a[0], f.Const<int64_t>(1)), [&] { return Outs{f.Const<int64_t>(1)}; },
                                     [&] {
                                       return Outs{f.Mul(
                                           a[0], f.Call("fact", {f.Sub(a[0], f.Const<int64_t>(1))})[0])};
                                     });
                               })
                  .ok());
  const std::string invoke = b.Name(b.Call("fact", {b.Placeholder("n", DType::kInt64)})[0]);
  const Graph g = Built(b);
  ForEachMode(g, GetParam(), [&](Session* s) {
    auto out = s->Run({{"n", I(10)}}, {invoke});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at(0).scalar<int64_t>(), 3628800);
  });
}

TEST_P(InvokeFetchTest, ATailRecursiveCallsResultsByItsInvoke) {
  // down(n, acc) = n <= 0 ? (acc, n) : down(n - 1, acc + n): its result is a
  // tail call's, which returns past released callers (release_tail_callers).
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"down", {{"n", DType::kInt64}, {"acc", DType::kInt64}},
                                {{"s", DType::kInt64}, {"m", DType::kInt64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs {
                                 return f.Cond(
                                     f.LessEqual(a[0], f.Const<int64_t>(0)),
                                     [&] { return Outs{f.Identity(a[1]), f.Identity(a[0])}; },
                                     [&] {
                                       return f.Call("down", {f.Sub(a[0], f.Const<int64_t>(1)), f.Add(a[1], a[0])});
                                     });
                               })
                  .ok());
  Outs r = b.Call("down", {b.Placeholder("n", DType::kInt64), b.Const<int64_t>(0)});
  const std::string s0 = b.Name(r[0]), s1 = b.Name(r[1]);
  const Graph g = Built(b);
  auto check = [&](const SessionOptions& options) {
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    auto out = s->Run({{"n", I(100)}}, {s1, s0});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at(0).scalar<int64_t>(), 0);
    EXPECT_EQ(out->at(1).scalar<int64_t>(), 5050);
  };
  exec_test::ForEachVariant(GetParam(), check);
  SessionOptions dynamic;
  dynamic.mode = ExecutionMode::kDynamic;
  dynamic.num_workers = GetParam();
  check(dynamic);
}

TEST_P(InvokeFetchTest, AnInvokeInsideALoopIsNotFoundInBothModes) {
  // As no node of a loop body can be fetched; the loop's result can.
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"inc", {{"a", DType::kInt64}}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs { return {f.Add(a[0], f.Const<int64_t>(1))}; })
                  .ok());
  Output n = b.Placeholder("n", DType::kInt64);
  std::string invoke;
  Outs fin = b.While([&](const Outs& v) { return b.Less(v[0], n); },
                     [&](const Outs& v) {
                       Output c = b.Call("inc", {v[0]})[0];
                       invoke = b.Name(c);
                       return Outs{c};
                     },
                     {b.Const<int64_t>(0)});
  b.Identity(fin[0], "result");
  const Graph g = Built(b);
  ForEachMode(g, GetParam(), [&](Session* s) {
    EXPECT_EQ(RunResult(s, {{"n", I(5)}}).scalar<int64_t>(), 5);
    auto out = s->Run({{"n", I(5)}}, {invoke});
    EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound) << out.status();
  });
}

TEST_P(InvokeFetchTest, AnInvokeOfAnUntakenBranchFailsAlikeInBothModes) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"inc", {{"a", DType::kInt64}}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs { return {f.Add(a[0], f.Const<int64_t>(1))}; })
                  .ok());
  Output x = b.Placeholder("x", DType::kInt64);
  std::string invoke;
  Outs r = b.Cond(
      b.Less(x, b.Const<int64_t>(0)),
      [&] {
        Output c = b.Call("inc", {x})[0];
        invoke = b.Name(c);
        return Outs{c};
      },
      [&] { return Outs{b.Identity(x)}; });
  b.Identity(r[0], "result");
  const Graph g = Built(b);
  ForEachMode(g, GetParam(), [&](Session* s) {
    auto taken = s->Run({{"x", I(-3)}}, {invoke, "result"});
    ASSERT_TRUE(taken.ok()) << taken.status();
    EXPECT_EQ(taken->at(0).scalar<int64_t>(), -2);
    auto untaken = s->Run({{"x", I(3)}}, {invoke});
    EXPECT_EQ(untaken.status().code(), absl::StatusCode::kFailedPrecondition) << untaken.status();
    EXPECT_THAT(std::string(untaken.status().message()), HasSubstr("fired with a dead output"));
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, InvokeFetchTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

// Dynamic mode passes tensors of any shape into calls and back out.
class TensorArgumentsTest : public ::testing::TestWithParam<int> {};

TEST_P(TensorArgumentsTest, VectorsGoIntoAndOutOfCallsInBothModes) {
  GraphBuilder b;
  // scale(v, k) = (v * k, sum(v)); pick(i, v) = v[i].
  ASSERT_TRUE(b.DefineFunction({"scale", {{"v", DType::kFloat64}, {"k", DType::kFloat64}},
                                {{"w", DType::kFloat64}, {"s", DType::kFloat64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs { return {f.Mul(a[0], a[1]), f.Sum(a[0])}; })
                  .ok());
  ASSERT_TRUE(b.DefineFunction({"pick", {{"i", DType::kInt64}, {"v", DType::kFloat64}}, {{"x", DType::kFloat64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs { return {f.Gather(a[1], a[0])}; })
                  .ok());
  Output v = b.Placeholder("v", DType::kFloat64);
  Outs scaled = b.Call("scale", {v, b.Const<double>(2.0)});
  b.Identity(scaled[0], "scaled");
  b.Identity(scaled[1], "sum");
  b.Identity(b.Call("pick", {b.Placeholder("i", DType::kInt64), scaled[0]})[0], "picked");
  const Graph g = Built(b);
  ForEachMode(g, GetParam(), [&](Session* s) {
    for (int rep = 0; rep < 3; ++rep) {
      RunStats stats;
      auto out = s->Run({{"v", Tensor::Vector<double>({1, 2, 3})}, {"i", I(2)}}, {"scaled", "sum", "picked"}, {},
                        &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->at(0).num_elements(), 3);
      EXPECT_EQ(std::vector<double>(out->at(0).data<double>(), out->at(0).data<double>() + 3),
                std::vector<double>({2, 4, 6}));
      EXPECT_EQ(out->at(1).scalar<double>(), 6.0);
      EXPECT_EQ(out->at(2).scalar<double>(), 6.0);
      EXPECT_EQ(stats.live_frames_after_run, 0);
    }
  });
}

TEST_P(TensorArgumentsTest, ARecursionOverAVectorArgument) {
  // rsum(i, v) = i < 0 ? 0 : v[i] + rsum(i - 1, v).
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"rsum", {{"i", DType::kInt64}, {"v", DType::kFloat64}}, {{"s", DType::kFloat64}}},
                               [](GraphBuilder& f, const Outs& a) -> Outs {
                                 return f.Cond(
                                     f.Less(a[0], f.Const<int64_t>(0)), [&] { return Outs{f.Const<double>(0.0)}; },
                                     [&] {
                                       Output rest = f.Call("rsum", {f.Sub(a[0], f.Const<int64_t>(1)), a[1]})[0];
                                       return Outs{f.Add(f.Gather(a[1], a[0]), rest)};
                                     });
                               })
                  .ok());
  b.Identity(b.Call("rsum", {b.Placeholder("i", DType::kInt64), b.Placeholder("v", DType::kFloat64)})[0], "result");
  const Graph g = Built(b);
  std::vector<double> values;
  for (int k = 0; k < 50; ++k) values.push_back(0.5 * k);
  ForEachMode(g, GetParam(), [&](Session* s) {
    Tensor r = RunResult(s, {{"i", I(49)}, {"v", Tensor::Vector<double>(values)}});
    ASSERT_TRUE(r.valid());
    EXPECT_EQ(r.scalar<double>(), 0.5 * 49 * 50 / 2);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, TensorArgumentsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

TEST(DynamicModeGradients, SplitCallSitesAreRejectedAtCreate) {
  Graph g = reference::Exp();
  auto grads = AddGradients(g, {"result"}, {"x"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  SessionOptions dynamic;
  dynamic.mode = ExecutionMode::kDynamic;
  auto s = Session::Create(g, dynamic);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented) << s.status();
  const std::string message(s.status().message());
  EXPECT_THAT(message, HasSubstr("(Invoke)"));
  EXPECT_THAT(message, HasSubstr("split call site"));
  EXPECT_THAT(message, HasSubstr("ExecutionMode::kDynamic does not support"));
  // The forward graph alone still runs in dynamic mode, and static mode runs
  // the gradient.
  auto forward = Session::Create(reference::Exp(), dynamic);
  ASSERT_TRUE(forward.ok()) << forward.status();
  auto s_static = Session::Create(g);
  ASSERT_TRUE(s_static.ok()) << s_static.status();
  auto out = (*s_static)->Run({{"x", Tensor::Scalar<double>(1.1)}, {"n", I(3)}}, {"result", grads->at(0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->at(1).scalar<double>(), 3 * 1.1 * 1.1, 1e-12);  // d(x^3)/dx
}

TEST(StaticModeGradients, TheInvokesOfASplitCallSiteGiveTheirParts) {
  // AddGradients turns the main graph's call of exp into one site of
  // exp_ext in two Invoke parts: forward (x, n -> y), backward (dy -> dx).
  Graph g = reference::Exp();
  auto grads = AddGradients(g, {"result"}, {"x"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  std::vector<std::string> parts;
  for (const NodeDef& n : g.node)
    if (n.op == "Invoke") parts.push_back(n.name);
  ASSERT_EQ(parts.size(), 2u);
  auto s = MakeSession(g, {});
  ASSERT_NE(s, nullptr);
  auto out = s->Run({{"x", Tensor::Scalar<double>(1.1)}, {"n", I(3)}}, {parts[0], parts[1], "result", grads->at(0)},
                    {parts[0], parts[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  const double y = out->at(2).scalar<double>(), dx = out->at(3).scalar<double>();
  EXPECT_NEAR(y, 1.1 * 1.1 * 1.1, 1e-12);
  EXPECT_NEAR(dx, 3 * 1.1 * 1.1, 1e-12);
  // One part gives y, the other dx (their order is AddGradients').
  const double a = out->at(0).scalar<double>(), b = out->at(1).scalar<double>();
  EXPECT_TRUE((a == y && b == dx) || (a == dx && b == y)) << a << " " << b;
}

Graph Fib() { return reference::Fib(); }

TEST(RunRequests, AFeedGivenTwiceIsRejected) {
  auto s = MakeSession(Fib(), {});
  ASSERT_NE(s, nullptr);
  auto out = s->Run({{"n", I(5)}, {"n", I(6)}}, {"result"});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("feed 'n' is given twice"));
}

TEST(RunRequests, AZeroOrNegativeDeadlineFailsTheRun) {
  for (absl::Duration deadline : {absl::ZeroDuration(), absl::Milliseconds(-5), -absl::InfiniteDuration()}) {
    SCOPED_TRACE(absl::FormatDuration(deadline));
    for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
      SessionOptions options;
      options.mode = mode;
      options.deadline = deadline;
      auto s = MakeSession(Fib(), options);
      ASSERT_NE(s, nullptr);
      auto out = s->Run({{"n", I(1)}}, {"result"});
      EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
    }
  }
  SessionOptions positive;
  positive.deadline = absl::Seconds(60);
  auto s = MakeSession(Fib(), positive);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(RunResult(s.get(), {{"n", I(5)}}).scalar<int64_t>(), reference::NativeFib(5));
}

TEST(RunRequests, ARunCancelledBeforeItStartsDoesNotRun) {
  auto s = MakeSession(Fib(), {});
  ASSERT_NE(s, nullptr);
  CancellationToken token;
  token.Cancel();
  RunStats stats;
  stats.firings = -1;
  auto out = s->Run({{"n", I(1)}}, {"result"}, {}, &stats, &token);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(stats.firings, -1);  // nothing ran
  CancellationToken fresh;
  auto ok = s->Run({{"n", I(5)}}, {"result"}, {}, nullptr, &fresh);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at(0).scalar<int64_t>(), reference::NativeFib(5));
}

TEST(SessionOptionsWorkers, OutOfRangeIsRejected) {
  for (int workers : {0, -1, SessionOptions::kMaxWorkers + 1, 1000}) {
    SessionOptions options;
    options.num_workers = workers;
    auto s = Session::Create(Fib(), options);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << workers;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(absl::StrCat("got ", workers))) << s.status();
  }
  SessionOptions most;
  most.num_workers = SessionOptions::kMaxWorkers;
  EXPECT_TRUE(Session::Create(Fib(), most).ok());
}

TEST(SessionOptionsWorkers, StatsReportTheThreadsOneTbbAllows) {
  // tbb_environment_test.cc caps this binary at 16 threads.
  const size_t cap = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  for (int workers : {1, 2, 64}) {
    SessionOptions options;
    options.num_workers = workers;
    auto s = MakeSession(Fib(), options);
    ASSERT_NE(s, nullptr);
    RunStats stats;
    EXPECT_EQ(RunResult(s.get(), {{"n", I(10)}}, &stats).scalar<int64_t>(), reference::NativeFib(10));
    EXPECT_EQ(stats.num_workers, static_cast<int>(std::min<size_t>(workers, cap))) << workers;
    EXPECT_LE(stats.num_workers, static_cast<int>(cap));
  }
}

}  // namespace
}  // namespace tdf
