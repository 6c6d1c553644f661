// Dead-branch skipping (SessionOptions::skip_dead_branches, DeadRegionGroup
// in executable.h): an untaken branch of a Cond inside a function is passed
// over whole instead of firing dead node by node. Asserted as a differential
// fact against the run that fires every dead node: same answers, same live
// firings, same invocations, never more dead firings, nothing left live.
// The same programs also compare the executor's scalar fast path with its
// general path (which per-node counting selects).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/exec_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::Feeds;
using exec_test::ForEachVariant;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::Outs;
using exec_test::RunResult;

struct Program {
  std::string name;
  std::function<Graph()> build;
  Feeds feeds;
  int64_t want;
};

// g(n) = a + b with
//   p = n > 2
//   a = p ? g(n-1) + 1 : n
//   b = p ? 2 * g(n-2) : (n > 0 ? 3n : 7)
// Two Conds on one predicate (their Switches form one group whose regions
// span both), a Cond nested in an untaken branch, and call sites in both.
int64_t NativeShared(int64_t n) {
  const bool p = n > 2;
  const int64_t a = p ? NativeShared(n - 1) + 1 : n;
  const int64_t b = p ? 2 * NativeShared(n - 2) : (n > 0 ? 3 * n : 7);
  return a + b;
}

Graph SharedPredicate() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"g", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output n = args[0];
        Output p = f.Greater(n, f.Const<int64_t>(2));
        Output a = f.Cond(
            p, [&] { return Outs{f.Add(f.Call("g", {f.Sub(n, f.Const<int64_t>(1))})[0], f.Const<int64_t>(1))}; },
            [&] { return Outs{n}; })[0];
        Output c = f.Cond(
            p, [&] { return Outs{f.Mul(f.Const<int64_t>(2), f.Call("g", {f.Sub(n, f.Const<int64_t>(2))})[0])}; },
            [&] {
              return f.Cond(
                  f.Greater(n, f.Const<int64_t>(0)), [&] { return Outs{f.Mul(n, f.Const<int64_t>(3))}; },
                  [&] { return Outs{f.Const<int64_t>(7)}; });
            })[0];
        return Outs{f.Add(a, c)};
      });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("g", {n})[0], "result");
  return Built(b);
}

std::vector<Program> Programs() {
  std::vector<Program> p;
  p.push_back({"fib", reference::Fib, {{"n", I(14)}}, reference::NativeFib(14)});
  p.push_back({"ack", reference::Ack, {{"m", I(2)}, {"n", I(3)}}, reference::NativeAck(2, 3)});
  p.push_back({"tak", reference::Tak, {{"x", I(12)}, {"y", I(8)}, {"z", I(4)}}, reference::NativeTak(12, 8, 4)});
  p.push_back({"fact", reference::Fact, {{"n", I(15)}}, reference::NativeFact(15)});
  p.push_back({"even", reference::EvenOdd, {{"n", I(31)}}, reference::NativeEven(31) ? 1 : 0});
  p.push_back({"primes", reference::Primes, {{"n", I(60)}}, reference::NativePrimes(60)});
  p.push_back({"mc91", reference::McCarthy91, {{"n", I(37)}}, reference::NativeMcCarthy91(37)});
  p.push_back({"call_in_while", reference::CallInWhile, {{"n", I(9)}}, reference::NativeCallInWhile(9)});
  p.push_back({"while_in_function", reference::WhileInFunction, {{"n", I(9)}},
               reference::NativeWhileInFunction(9)});
  for (int64_t n : {0, 1, 2, 3, 7, 12})
    p.push_back({"shared_" + std::to_string(n), SharedPredicate, {{"n", I(n)}}, NativeShared(n)});
  return p;
}

int64_t AsInt(const Tensor& t) {
  return t.dtype() == DType::kBool ? (t.scalar<bool>() ? 1 : 0) : t.scalar<int64_t>();
}

class DeadBranchesTest : public ::testing::TestWithParam<int> {};

// Runs `prog` in a session with options `x` and one with `y`; both must
// give its answer.
void RunUnderBoth(const Program& prog, const SessionOptions& x, const SessionOptions& y, RunStats* a, RunStats* b) {
  auto sx = MakeSession(prog.build(), x);
  auto sy = MakeSession(prog.build(), y);
  ASSERT_NE(sx, nullptr);
  ASSERT_NE(sy, nullptr);
  EXPECT_EQ(AsInt(RunResult(sx.get(), prog.feeds, a)), prog.want);
  EXPECT_EQ(AsInt(RunResult(sy.get(), prog.feeds, b)), prog.want);
}

TEST_P(DeadBranchesTest, SameAnswersAndLiveFiringsWithFewerDeadOnes) {
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    for (const Program& prog : Programs()) {
      SCOPED_TRACE(prog.name + (mode == ExecutionMode::kStatic ? " static" : " dynamic"));
      SessionOptions on;
      on.num_workers = GetParam();
      on.mode = mode;
      SessionOptions off = on;
      off.skip_dead_branches = false;
      RunStats a, b;
      RunUnderBoth(prog, on, off, &a, &b);
      EXPECT_EQ(a.live_firings, b.live_firings);
      EXPECT_EQ(a.frames_created, b.frames_created);
      EXPECT_LE(a.dead_firings, b.dead_firings);
      EXPECT_EQ(a.live_frames_after_run, 0);
      EXPECT_EQ(b.live_frames_after_run, 0);
      // Per-node counts turn the executor's scalar fast path off: the
      // general path must fire exactly the same nodes.
      SessionOptions general = on;
      general.collect_node_stats = true;
      auto slow = MakeSession(prog.build(), general);
      ASSERT_NE(slow, nullptr);
      RunStats c;
      EXPECT_EQ(AsInt(RunResult(slow.get(), prog.feeds, &c)), prog.want);
      EXPECT_EQ(c.firings_by_op, a.firings_by_op);
      EXPECT_EQ(c.frames_created, a.frames_created);
    }
  }
}

TEST_P(DeadBranchesTest, RecursiveProgramsFireNoDeadNodes) {
  // Their only dead tokens come from untaken Cond branches in function
  // bodies, and every such branch is skipped whole.
  for (const Program& prog : Programs()) {
    if (prog.name == "call_in_while" || prog.name == "while_in_function") continue;  // loops drain a dead iteration
    SCOPED_TRACE(prog.name);
    SessionOptions o;
    o.num_workers = GetParam();
    auto s = MakeSession(prog.build(), o);
    ASSERT_NE(s, nullptr);
    RunStats stats;
    EXPECT_EQ(AsInt(RunResult(s.get(), prog.feeds, &stats)), prog.want);
    EXPECT_EQ(stats.dead_firings, 0);
  }
}

TEST_P(DeadBranchesTest, ForwardedCallValuesOnlyRemovePassThroughNodes) {
  // SessionOptions::forward_call_values: Calls deliver to the consumers of
  // the callee's argument Merges, a result's producer delivers to the
  // caller's Returns past the result Identity, and on past the Returns of
  // function bodies to their consumers, and a Cond's pivot Identities are
  // passed over by their Switch, a result Merge of a Cond's two branches by
  // the taken branch's kernel, and a Cond's pivot Switch by a Switch of the
  // same predicate. Same answers and invocations; every other op fires
  // exactly as often; fib loses two Merge, two Identity, one Return and one
  // Switch firing per call (its argument, its Cond's result Merge, its
  // result, the taken branch's pivot Identity, the Return in its caller, the
  // pivot Switch; only main's Return still fires, and no Merge fires live).
  for (const Program& prog : Programs()) {
    SCOPED_TRACE(prog.name);
    SessionOptions on;
    on.num_workers = GetParam();
    SessionOptions off = on;
    off.forward_call_values = false;
    RunStats a, b;
    RunUnderBoth(prog, on, off, &a, &b);
    EXPECT_EQ(a.frames_created, b.frames_created);
    EXPECT_EQ(a.live_frames_after_run, 0);
    auto others = [](RunStats s) {
      s.firings_by_op.erase("Merge");
      s.firings_by_op.erase("Identity");
      s.firings_by_op.erase("Return");
      s.firings_by_op.erase("Switch");
      return s.firings_by_op;
    };
    EXPECT_EQ(others(a), others(b));
    auto fewer = [&](const std::string& op) {
      return exec_test::OpCount(b, op).first - exec_test::OpCount(a, op).first;
    };
    const int64_t merges = fewer("Merge");
    const int64_t identities = fewer("Identity");
    const int64_t returns = fewer("Return");
    const int64_t switches = fewer("Switch");
    EXPECT_GT(merges, 0);
    EXPECT_GE(identities, 0);
    EXPECT_GE(returns, 0);
    EXPECT_GE(switches, 0);
    EXPECT_EQ(b.live_firings - a.live_firings, merges + identities + returns + switches);
    EXPECT_EQ(b.dead_firings, a.dead_firings);
    if (prog.name == "fib") {
      EXPECT_EQ(merges, 2 * (a.frames_created - 1));
      EXPECT_EQ(switches, a.frames_created - 1);
      EXPECT_EQ(exec_test::OpCount(a, "Merge").first, 0);
      EXPECT_EQ(identities, 2 * (a.frames_created - 1));
      EXPECT_EQ(returns, a.frames_created - 2);
      EXPECT_EQ(exec_test::OpCount(a, "Return").first, 1);
    }
  }
}

// Gradient programs: each differentiated call is a split site (its
// forward and backward Calls share one invocation). In an invocation that
// takes the base case, the recursive branch's split sites are skipped whole
// like any other call site: no Call fires dead, and loss, gradients, live
// firings and invocations are those of the run that fires every dead node.
// tree(i, h, W) = i <= 0 ? h : tanh([tree(i-1, h, W) | tree(i-2, h, W)] W).
TEST_P(DeadBranchesTest, GradientSplitSitesAreSkippedWhole) {
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"tree", {{"i", DType::kInt64}, {"h", DType::kFloat64}, {"W", DType::kFloat64}}, {{"y", DType::kFloat64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        return f.Cond(
            f.LessEqual(a[0], f.Const<int64_t>(0)), [&] { return Outs{a[1]}; },
            [&] {
              Output l = f.Call("tree", {f.Sub(a[0], f.Const<int64_t>(1)), a[1], a[2]})[0];
              Output r = f.Call("tree", {f.Sub(a[0], f.Const<int64_t>(2)), a[1], a[2]})[0];
              return Outs{f.Tanh(f.MatMul(f.Concat({l, r}, 1), a[2]))};
            });
      });
  ASSERT_TRUE(s.ok()) << s;
  Output h = b.Placeholder("h", DType::kFloat64), W = b.Placeholder("W", DType::kFloat64);
  b.Identity(b.Sum(b.Call("tree", {b.Placeholder("n", DType::kInt64), h, W})[0]), "loss");
  Graph g = Built(b);
  auto grads = AddGradients(g, {"loss"}, {"h", "W"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  const Feeds feeds = {{"n", I(7)},
                       {"h", *Tensor::FromVector<double>({0.3, -0.2}, Shape({1, 2}))},
                       {"W", *Tensor::FromVector<double>({0.5, -0.4, 0.3, 0.2, -0.1, 0.6, 0.7, -0.8}, Shape({4, 2}))}};
  std::vector<std::vector<double>> results[2];
  RunStats stats[2];
  for (int skip : {0, 1}) {
    SessionOptions o;
    o.num_workers = GetParam();
    o.skip_dead_branches = skip == 1;
    auto session = MakeSession(g, o);
    ASSERT_NE(session, nullptr);
    auto out = session->Run(feeds, {"loss", (*grads)[0], (*grads)[1]}, {}, &stats[skip]);
    ASSERT_TRUE(out.ok()) << out.status();
    for (const Tensor& t : *out) results[skip].push_back(std::vector<double>(t.data<double>(), t.data<double>() + t.num_elements()));
    EXPECT_EQ(stats[skip].live_frames_after_run, 0);
  }
  EXPECT_EQ(results[1], results[0]);  // the same ops on the same values, bit for bit
  EXPECT_EQ(stats[1].live_firings, stats[0].live_firings);
  EXPECT_EQ(stats[1].frames_created, stats[0].frames_created);
  EXPECT_GT(stats[0].firings_by_op["Call"].second, 0);   // firing every dead node, the base cases' Calls fire dead
  EXPECT_EQ(stats[1].firings_by_op["Call"].second, 0);   // skipped whole
  EXPECT_LT(stats[1].dead_firings, stats[0].dead_firings);
}

// h(x, c) = c ? x + 1 : x * 2, called from main with c from a Switch of
// main's, so that q = false enters h with x live and c dead: h's predicate
// is dead, both branches are, and so is its result Merge, whose live input
// is otherwise forwarded by the taken branch's kernel
// (ForwardExclusiveResultMerges). Main's own Merge then picks x.
Graph DeadPredicateInvocation() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"h", {{"x", DType::kInt64}, {"c", DType::kBool}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output x = args[0];
        return f.Cond(
            args[1], [&] { return Outs{f.Add(x, f.Const<int64_t>(1))}; },
            [&] { return Outs{f.Mul(x, f.Const<int64_t>(2))}; });
      });
  Output x = b.Placeholder("x", DType::kInt64);
  Output q = b.Placeholder("q", DType::kBool);
  Output c = b.Outputs(b.Op("Switch", {b.Const<bool>(true), q}))[1];  // dead unless q
  Output y = b.Call("h", {x, c})[0];
  Output x_unless_q = b.Outputs(b.Op("Switch", {x, q}))[0];
  b.Identity(b.Op("Merge", {y, x_unless_q}, {{"T", DType::kInt64}}), "result");
  return Built(b);
}

TEST_P(DeadBranchesTest, ForwardedResultMergeStillFiresDeadForADeadInvocation) {
  for (bool forward : {true, false}) {
    for (bool skip : {true, false}) {
      SCOPED_TRACE(absl::StrCat("forward_call_values ", forward, " skip_dead_branches ", skip));
      SessionOptions options;
      options.num_workers = GetParam();
      options.forward_call_values = forward;
      options.skip_dead_branches = skip;
      auto s = MakeSession(DeadPredicateInvocation(), options);
      ASSERT_NE(s, nullptr);
      RunStats live, dead;
      EXPECT_EQ(RunResult(s.get(), {{"x", I(5)}, {"q", Tensor::Scalar<bool>(true)}}, &live).scalar<int64_t>(), 6);
      EXPECT_EQ(RunResult(s.get(), {{"x", I(5)}, {"q", Tensor::Scalar<bool>(false)}}, &dead).scalar<int64_t>(), 5);
      for (const RunStats* st : {&live, &dead}) {
        EXPECT_EQ(st->frames_created, 2);  // main's and h's
        EXPECT_EQ(st->live_frames_after_run, 0);
      }
      // Forwarded, only main's Merge fires live: h's argument Merges are
      // passed over and its result Merge by the taken branch's Add. Not
      // forwarded, those three fire too. h's result Merge fires dead when
      // h's predicate is.
      EXPECT_EQ(exec_test::OpCount(live, "Merge").first, forward ? 1 : 4);
      EXPECT_GE(exec_test::OpCount(dead, "Merge").second, 1);
    }
  }
}

// k(x, y) = y > 0 ? 10 : 2x.
void DefineK(GraphBuilder& b) {
  (void)b.DefineFunction(
      FunctionSignature{"k", {{"x", DType::kInt64}, {"y", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output x = args[0];
        return f.Cond(
            f.Greater(args[1], f.Const<int64_t>(0)), [&] { return Outs{f.Const<int64_t>(10)}; },
            [&] { return Outs{f.Mul(x, f.Const<int64_t>(2))}; });
      });
}

// k(x, y) = y > 0 ? 10 : 2x, entered with x dead (a Switch of main's)
// and y live: the Cond's Switch of x gets dead data and a live predicate.
// The constant branch is triggered by the Cond's pivot Switch; forwarded
// (ForwardPivotSwitches), by the Switch of x, whose pivot edges stay live
// whatever its data.
Graph DeadDataLivePredicate() {
  GraphBuilder b;
  DefineK(b);
  Output x = b.Placeholder("x", DType::kInt64);
  Output y = b.Placeholder("y", DType::kInt64);
  Output q = b.Placeholder("q", DType::kBool);
  Output x_if_q = b.Outputs(b.Op("Switch", {x, q}))[1];  // dead unless q
  b.Identity(b.Call("k", {x_if_q, y})[0], "result");
  return Built(b);
}

TEST_P(DeadBranchesTest, ForwardedPivotTriggersItsBranchWhenTheRoutedValueIsDead) {
  for (bool q : {true, false}) {
    for (bool skip : {true, false}) {
      SCOPED_TRACE(absl::StrCat("q ", q, " skip_dead_branches ", skip));
      SessionOptions on;
      on.num_workers = GetParam();
      on.skip_dead_branches = skip;
      SessionOptions off = on;
      off.forward_call_values = false;
      RunStats a, b;
      for (auto [options, stats] : {std::pair{on, &a}, std::pair{off, &b}}) {
        auto s = MakeSession(DeadDataLivePredicate(), options);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(RunResult(s.get(), {{"x", I(5)}, {"y", I(1)}, {"q", Tensor::Scalar<bool>(q)}}, stats)
                      .scalar<int64_t>(),
                  10);
      }
      // k's pivot Switch fires only when not forwarded.
      const auto switches = [](const RunStats& st) {
        const auto [live, dead] = exec_test::OpCount(st, "Switch");
        return live + dead;
      };
      EXPECT_EQ(switches(b) - switches(a), 1);
    }
  }
}

// main: Merge(k(x if q, y), x unless q), k as above. With y = 0, k's
// predicate is live and picks 2x, which is dead when q is: the Cond's result
// Merge gets a dead token from the taken branch's Mul and one from the
// untaken branch's frontier, and must fire dead (its forwarded producers
// send it only dead tokens) for k's frame to finish and main's Merge to
// take x.
Graph DeadTakenBranch() {
  GraphBuilder b;
  DefineK(b);
  Output x = b.Placeholder("x", DType::kInt64);
  Output y = b.Placeholder("y", DType::kInt64);
  Output q = b.Placeholder("q", DType::kBool);
  Output x_if_q = b.Outputs(b.Op("Switch", {x, q}))[1];
  Output x_unless_q = b.Outputs(b.Op("Switch", {x, q}))[0];
  Output k = b.Call("k", {x_if_q, y})[0];
  b.Identity(b.Op("Merge", {k, x_unless_q}, {{"T", DType::kInt64}}), "result");
  return Built(b);
}

TEST_P(DeadBranchesTest, ForwardedResultMergeFiresDeadWhenTheTakenBranchIsDead) {
  ForEachVariant(GetParam(), [](const SessionOptions& options) {
    auto s = MakeSession(DeadTakenBranch(), options);
    ASSERT_NE(s, nullptr);
    for (bool q : {true, false}) {
      RunStats st;
      EXPECT_EQ(RunResult(s.get(), {{"x", I(5)}, {"y", I(0)}, {"q", Tensor::Scalar<bool>(q)}}, &st).scalar<int64_t>(),
                q ? 10 : 5);
      EXPECT_EQ(st.frames_created, 2);
      EXPECT_EQ(st.live_frames_after_run, 0);
      // k's result Merge fires, dead, only when the taken branch is dead.
      if (!q) EXPECT_GE(exec_test::OpCount(st, "Merge").second, 1);
    }
  });
}

// t(n, a) = n == 0 ? a + 1 : t(n - 1, a + 2), so t(n, a) = a + 2n + 1, and
// main: Merge(t(n if q, a), a unless q). The result Merge of t has one
// kernel input (a + 1) and one tail call's result: the kernel delivers its
// live value itself, and the Merge fires live only for the calls that
// recurse. Entered dead (q false), the invocation must still end, dead.
Graph TailCallAgainstKernel() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"t", {{"n", DType::kInt64}, {"a", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output n = args[0], a = args[1];
        return f.Cond(
            f.Equal(n, f.Const<int64_t>(0)), [&] { return Outs{f.Add(a, f.Const<int64_t>(1))}; },
            [&] { return f.Call("t", {f.Sub(n, f.Const<int64_t>(1)), f.Add(a, f.Const<int64_t>(2))}); });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  Output a = b.Placeholder("a", DType::kInt64);
  Output q = b.Placeholder("q", DType::kBool);
  Output n_if_q = b.Outputs(b.Op("Switch", {n, q}))[1];
  Output a_unless_q = b.Outputs(b.Op("Switch", {a, q}))[0];
  Output t = b.Call("t", {n_if_q, a})[0];
  b.Identity(b.Op("Merge", {t, a_unless_q}, {{"T", DType::kInt64}}), "result");
  return Built(b);
}

TEST_P(DeadBranchesTest, ResultMergeOfAKernelAndATailCallNeverFiresLive) {
  ForEachVariant(GetParam(), [](const SessionOptions& options) {
    auto s = MakeSession(TailCallAgainstKernel(), options);
    ASSERT_NE(s, nullptr);
    for (int64_t n : {0, 1, 7}) {
      SCOPED_TRACE(absl::StrCat("n ", n));
      RunStats st;
      EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}, {"a", I(3)}, {"q", Tensor::Scalar<bool>(true)}}, &st)
                    .scalar<int64_t>(),
                3 + 2 * n + 1);
      EXPECT_EQ(st.frames_created, n + 2);  // main's and one per invocation
      EXPECT_EQ(st.live_frames_after_run, 0);
      // Forwarded, t's argument Merges are passed over, the base case's Add
      // returns its value itself and the tail call's result goes past t's
      // result Merge (tail_results_test.cc): the one live Merge is main's.
      if (options.forward_call_values) EXPECT_EQ(exec_test::OpCount(st, "Merge").first, 1);
    }
    RunStats dead;
    EXPECT_EQ(RunResult(s.get(), {{"n", I(7)}, {"a", I(3)}, {"q", Tensor::Scalar<bool>(false)}}, &dead)
                  .scalar<int64_t>(),
              3);
    EXPECT_EQ(dead.frames_created, 2);
    EXPECT_EQ(dead.live_frames_after_run, 0);
    EXPECT_GE(exec_test::OpCount(dead, "Merge").second, 1);  // t's result Merge, dead
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, DeadBranchesTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
