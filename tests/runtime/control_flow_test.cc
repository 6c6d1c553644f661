// Control flow in the executor (issue #3, items 1-3): Cond, While, nested
// loops, conds in loops and loops in untaken branches, with the deadness and
// frame counts RunStats reports, the tags an observer sees, and the same
// answers with 1, 2 and 8 workers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::NodeCount;
using exec_test::OpCount;
using exec_test::Outs;
using exec_test::ParseTag;
using exec_test::RecordingObserver;
using exec_test::RunResult;
using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAreArray;

constexpr DType kI64 = DType::kInt64;

WhileOptions Named(const std::string& name, int parallel_iterations = 10) {
  WhileOptions o;
  o.name = name;
  o.parallel_iterations = parallel_iterations;
  return o;
}

// result = x != 0 ? 100 / x : x - 1. With x == 0 the then branch would
// divide by zero: it must fire dead without running its kernel.
Graph GuardedDiv() {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Outs r = b.Cond(
      b.NotEqual(x, b.Const<int64_t>(0)),
      [&] { return Outs{b.Op("Div", {b.Const<int64_t>(100), x}, {}, "guarded_div")}; },
      [&] { return Outs{b.Op("Sub", {x, b.Const<int64_t>(1)}, {}, "minus_one")}; });
  b.Identity(r[0], "result");
  return Built(b);
}

// s = 0; for (i = 0; i < n; ++i) s += i % 2 == 0 ? i * i : 100 / (i % 2).
// Even iterations leave the Div branch untaken with a zero divisor.
Graph CondInLoop() {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While(
      [&](const Outs& v) { return b.Less(v[0], n); },
      [&](const Outs& v) {
        Output i = v[0];
        Output parity = b.Mod(i, b.Const<int64_t>(2));
        Outs c = b.Cond(
            b.Equal(parity, b.Const<int64_t>(0)), [&] { return Outs{b.Mul(i, i)}; },
            [&] { return Outs{b.Div(b.Const<int64_t>(100), parity)}; });
        return Outs{b.Add(i, b.Const<int64_t>(1)), b.Add(v[1], c[0])};
      },
      {b.Const<int64_t>(0), b.Const<int64_t>(0)}, Named("cond_loop"));
  b.Identity(out[1], "result");
  return Built(b);
}

int64_t NativeCondInLoop(int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += i % 2 == 0 ? i * i : 100 / (i % 2);
  return s;
}

// Three loops deep: result counts the innermost iterations, a * b * c.
Graph NestedLoops() {
  GraphBuilder b;
  Output a = b.Placeholder("a", kI64);
  Output bb = b.Placeholder("b", kI64);
  Output c = b.Placeholder("c", kI64);
  Outs outer = b.While(
      [&](const Outs& v) { return b.Less(v[0], a); },
      [&](const Outs& v) {
        Outs middle = b.While(
            [&](const Outs& w) { return b.Less(w[0], bb); },
            [&](const Outs& w) {
              Outs inner = b.While(
                  [&](const Outs& u) { return b.Less(u[0], c); },
                  [&](const Outs& u) {
                    return Outs{b.Add(u[0], b.Const<int64_t>(1)), b.Add(u[1], b.Const<int64_t>(1))};
                  },
                  {b.Const<int64_t>(0), w[1]}, Named("inner"));
              return Outs{b.Add(w[0], b.Const<int64_t>(1)), inner[1]};
            },
            {b.Const<int64_t>(0), v[1]}, Named("middle"));
        return Outs{b.Add(v[0], b.Const<int64_t>(1)), middle[1]};
      },
      {b.Const<int64_t>(0), b.Const<int64_t>(0)}, Named("outer"));
  b.Identity(outer[1], "result");
  return Built(b);
}

// result = x > 0 ? (j = 0; while (j < x) ++j; j) : -1. With x <= 0 the whole
// loop sits in the untaken branch and must drain dead.
Graph LoopInUntakenBranch() {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Outs r = b.Cond(
      b.Greater(x, b.Const<int64_t>(0)),
      [&] {
        return b.While([&](const Outs& v) { return b.Less(v[0], x); },
                       [&](const Outs& v) { return Outs{b.Add(v[0], b.Const<int64_t>(1))}; },
                       {b.Const<int64_t>(0)}, Named("drain"));
      },
      [&] { return Outs{b.Const<int64_t>(-1)}; });
  b.Identity(r[0], "result");
  return Built(b);
}

// sq(x) = x * x (body node "sq_body"); s = sum of sq(i) for i < n.
Graph CallInLoop() {
  GraphBuilder b;
  (void)b.DefineFunction({"sq", {{"x", kI64}}, {{"r", kI64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           return Outs{f.Op("Mul", {a[0], a[0]}, {}, "sq_body")};
                         });
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While(
      [&](const Outs& v) { return b.Less(v[0], n); },
      [&](const Outs& v) {
        return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], b.Call("sq", {v[0]})[0])};
      },
      {b.Const<int64_t>(0), b.Const<int64_t>(0)}, Named("calls"));
  b.Identity(out[1], "result");
  return Built(b);
}

// s = 0; for (i = 0; i < n; ++i) for (j = 0; j < n; ++j) ++s: the inner
// loop's condition reads n, a value from outside both loops (an invariant of
// the outer loop that enters the inner one as its own invariant).
Graph InvariantThroughTwoLoops() {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  Outs outer = b.While(
      [&](const Outs& v) { return b.Less(v[0], n); },
      [&](const Outs& v) {
        Outs inner = b.While([&](const Outs& w) { return b.Less(w[0], n); },
                             [&](const Outs& w) {
                               return Outs{b.Add(w[0], b.Const<int64_t>(1)), b.Add(w[1], b.Const<int64_t>(1))};
                             },
                             {b.Const<int64_t>(0), v[1]}, Named("in"));
        return Outs{b.Add(v[0], b.Const<int64_t>(1)), inner[1]};
      },
      {b.Const<int64_t>(0), b.Const<int64_t>(0)}, Named("out"));
  b.Identity(outer[1], "result");
  return Built(b);
}

class ControlFlowTest : public ::testing::TestWithParam<int> {
 protected:
  SessionOptions Options(ExecutionObserver* observer = nullptr) const {
    SessionOptions o;
    o.num_workers = GetParam();
    o.collect_node_stats = true;
    o.observer = observer;
    return o;
  }
};

TEST_P(ControlFlowTest, CondTakenBranchRunsUntakenBranchFiresDead) {
  auto s = MakeSession(GuardedDiv(), Options());
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"x", I(4)}}, &stats).scalar<int64_t>(), 25);
  EXPECT_THAT(OpCount(stats, "Div"), Pair(1, 0));
  EXPECT_THAT(OpCount(stats, "Sub"), Pair(0, 1));
  EXPECT_EQ(stats.frames_created, 1);

  // x == 0: the Div by zero is in the untaken branch. It fires dead and its
  // kernel never runs, so the run succeeds.
  EXPECT_EQ(RunResult(s.get(), {{"x", I(0)}}, &stats).scalar<int64_t>(), -1);
  EXPECT_THAT(OpCount(stats, "Div"), Pair(0, 1));
  EXPECT_THAT(OpCount(stats, "Sub"), Pair(1, 0));
  EXPECT_GT(stats.dead_firings, 0);
  EXPECT_THAT(OpCount(stats, "Merge"), Pair(1, 0));
}

TEST_P(ControlFlowTest, WhileLoopCountsIterationsAndDrainsLastOne) {
  auto s = MakeSession(reference::WhileLoop(), Options());
  ASSERT_NE(s, nullptr);
  for (int64_t n : {0, 1, 100}) {
    RunStats stats;
    EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}}, &stats).scalar<int64_t>(), n);
    // Iterations 0..n (the last one evaluates the condition false) + root.
    EXPECT_EQ(stats.frames_created, n + 2) << n;
    EXPECT_EQ(stats.max_tag_depth, 1);
    // The back edge carries n live tokens and the last iteration's dead one;
    // the Exit passes one live token and fires dead in every other iteration.
    EXPECT_THAT(OpCount(stats, "NextIteration"), Pair(n, 1)) << n;
    EXPECT_THAT(OpCount(stats, "Exit"), Pair(1, n)) << n;
    EXPECT_THAT(OpCount(stats, "Enter"), Pair(2, 0)) << n;  // the counter and the invariant n
  }
}

TEST_P(ControlFlowTest, InnerLoopReadsValueFromOutsideOuterLoop) {
  auto s = MakeSession(InvariantThroughTwoLoops(), Options());
  ASSERT_NE(s, nullptr);
  for (int64_t n : {0, 1, 3}) {
    RunStats stats;
    EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}}, &stats).scalar<int64_t>(), n * n) << n;
    // Outer iterations 0..n; inner: n + 1 per live outer iteration, and one
    // drained (dead) iteration in the outer loop's exiting iteration.
    EXPECT_EQ(stats.frames_created, 1 + (n + 1) + n * (n + 1) + 1) << n;
  }
}

// A loop body node whose inputs are all loop invariants must still fire
// only in iterations whose predicate held (TensorFlow's while_loop adds a
// control edge from the pivot to such ops, _MaybeAddControlDependency). Here
// the body bumps a counter by a captured amount: n iterations, n bumps.
TEST_P(ControlFlowTest, InvariantOnlyBodyOpDoesNotFireInExitingIteration) {
  GraphBuilder b;
  Output counter = b.Variable("bumps", I(0));
  Output one = b.Const<int64_t>(1);
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While(
      [&](const Outs& v) { return b.Less(v[0], n); },
      [&](const Outs& v) {
        b.Op("AssignAdd", {counter, one}, {{"dtype", kI64}}, "bump");  // inputs: invariants only
        return Outs{b.Add(v[0], b.Const<int64_t>(1))};
      },
      {b.Const<int64_t>(0)}, Named("bumper"));
  b.Identity(out[0], "result");
  SessionOptions o = Options();
  o.deadline = absl::Seconds(5);  // a safety net: the run takes microseconds
  auto s = MakeSession(Built(b), o);
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"n", I(5)}}, &stats).scalar<int64_t>(), 5);
  EXPECT_THAT(NodeCount(stats, "bump"), Pair(5, 1));
  absl::StatusOr<Tensor> bumps = s->ReadVariable("bumps");
  ASSERT_TRUE(bumps.ok()) << bumps.status();
  EXPECT_EQ(bumps->scalar<int64_t>(), 5);
}

// The same flaw on the back edge: a NextIteration fed straight from a
// captured value goes round even in the exiting iteration, so the loop never
// ends. The deadline turns the hang into a failure.
TEST_P(ControlFlowTest, InvariantFeedsNextIterationDirectly) {
  // x = 0; for (i = 0; i < 3; ++i) x = n: the body returns the captured n.
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While([&](const Outs& v) { return b.Less(v[0], b.Const<int64_t>(3)); },
                     [&](const Outs& v) { return Outs{b.Add(v[0], b.Const<int64_t>(1)), n}; },
                     {b.Const<int64_t>(0), b.Const<int64_t>(0)}, Named("copy"));
  b.Identity(out[1], "result");
  SessionOptions o = Options();
  o.deadline = absl::Seconds(5);  // a safety net: the run takes microseconds
  auto s = MakeSession(Built(b), o);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(RunResult(s.get(), {{"n", I(42)}}).scalar<int64_t>(), 42);
}

// Non-kernel nodes (Enter, Call, ...) must read a loop invariant through the
// loop, as kernels do, not from their (empty) input slot.
TEST_P(ControlFlowTest, InvariantIsACallArgument) {
  // s = 0; for (i = 0; i < 3; ++i) s += sq(n).
  GraphBuilder b;
  (void)b.DefineFunction({"sq", {{"x", kI64}}, {{"r", kI64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs { return Outs{f.Mul(a[0], a[0])}; });
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While([&](const Outs& v) { return b.Less(v[0], b.Const<int64_t>(3)); },
                     [&](const Outs& v) {
                       return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], b.Call("sq", {n})[0])};
                     },
                     {b.Const<int64_t>(0), b.Const<int64_t>(0)}, Named("sqloop"));
  b.Identity(out[1], "result");
  SessionOptions o = Options();
  o.deadline = absl::Seconds(5);
  auto s = MakeSession(Built(b), o);
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"n", I(5)}}, &stats).scalar<int64_t>(), 75);
  // Three invocations of sq, one per live iteration (4 iterations + root).
  EXPECT_EQ(stats.frames_created, 1 + 4 + 3);
}

TEST_P(ControlFlowTest, NestedWhileThreeDeep) {
  auto s = MakeSession(NestedLoops(), Options());
  ASSERT_NE(s, nullptr);
  struct Case {
    int64_t a, b, c;
  };
  for (Case k : {Case{3, 4, 5}, Case{2, 0, 5}, Case{1, 1, 1}, Case{0, 3, 3}}) {
    RunStats stats;
    EXPECT_EQ(RunResult(s.get(), {{"a", I(k.a)}, {"b", I(k.b)}, {"c", I(k.c)}}, &stats).scalar<int64_t>(),
              k.a * k.b * k.c);
    // Every loop activation runs its iterations plus one that exits. The
    // exiting iteration's body is dead, so the loop nested in it receives
    // dead Enter tokens and drains in exactly one (dead) iteration.
    const int64_t outer = k.a + 1;
    const int64_t middle = k.a * (k.b + 1) + 1;                // + the drained one
    const int64_t inner = k.a * k.b * (k.c + 1) + (k.a + 1);  // + one per non-live middle iteration
    EXPECT_EQ(stats.frames_created, 1 + outer + middle + inner) << k.a << " " << k.b << " " << k.c;
    EXPECT_EQ(stats.max_tag_depth, 3);
  }
}

TEST_P(ControlFlowTest, NestedWhileTagsListEveryIteration) {
  RecordingObserver obs;
  auto s = MakeSession(NestedLoops(), Options(&obs));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(RunResult(s.get(), {{"a", I(2)}, {"b", I(3)}, {"c", I(2)}}).scalar<int64_t>(), 12);
  // The innermost body sees one tag per (i, j, k), newest label first.
  std::vector<std::string> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) want.push_back(absl::StrCat("[", k, ", inner, ", j, ", middle, ", i, ", outer]"));
  std::multiset<std::string> live = obs.Tags("inner/body_0");
  EXPECT_THAT(std::vector<std::string>(live.begin(), live.end()), UnorderedElementsAreArray(want));
  // Dead: each inner activation's exiting iteration, and the drained inner
  // loops of the middle loop's exiting iterations (j == 3) and of the outer
  // loop's exiting iteration (i == 2, whose middle loop drains too).
  std::multiset<std::string> dead = obs.Tags("inner/body_0", /*dead=*/true);
  std::vector<std::string> want_dead;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) want_dead.push_back(absl::StrCat("[2, inner, ", j, ", middle, ", i, ", outer]"));
    want_dead.push_back(absl::StrCat("[0, inner, 3, middle, ", i, ", outer]"));
  }
  want_dead.push_back("[0, inner, 0, middle, 2, outer]");
  EXPECT_THAT(std::vector<std::string>(dead.begin(), dead.end()), UnorderedElementsAreArray(want_dead));
}

TEST_P(ControlFlowTest, LoopBodyContainingCond) {
  auto s = MakeSession(CondInLoop(), Options());
  ASSERT_NE(s, nullptr);
  for (int64_t n : {0, 1, 2, 7, 50}) {
    RunStats stats;
    EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}}, &stats).scalar<int64_t>(), NativeCondInLoop(n)) << n;
    const int64_t odd = n / 2, even = n - odd;
    // Even iterations would divide by zero; the Div fires dead there.
    EXPECT_THAT(OpCount(stats, "Div"), Pair(odd, even + 1)) << n;  // +1: the exiting iteration
    EXPECT_THAT(OpCount(stats, "Mul"), Pair(even, odd + 1)) << n;
  }
}

TEST_P(ControlFlowTest, LoopInUntakenBranchDrainsDead) {
  auto s = MakeSession(LoopInUntakenBranch(), Options());
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"x", I(-5)}}, &stats).scalar<int64_t>(), -1);
  // Exactly one iteration frame: iteration 0 receives the dead Enter tokens,
  // its Merge, Switch and Exit fire dead and nothing goes round the back edge.
  EXPECT_EQ(stats.frames_created, 2);
  EXPECT_EQ(stats.live_frames_after_run, 0);
  for (const char* node : {"drain/enter_0", "drain/merge_0", "drain/switch_0", "drain/exit_0", "drain/next_0"}) {
    EXPECT_THAT(NodeCount(stats, node), Pair(0, 1)) << node;
  }
  EXPECT_THAT(OpCount(stats, "Enter"), Pair(0, 2));  // the loop variable and the invariant x
  EXPECT_THAT(OpCount(stats, "Exit"), Pair(0, 1));
  EXPECT_THAT(OpCount(stats, "NextIteration"), Pair(0, 1));
  EXPECT_THAT(OpCount(stats, "Add"), Pair(0, 1));

  // Taken: the same loop runs x + 1 iterations.
  EXPECT_EQ(RunResult(s.get(), {{"x", I(3)}}, &stats).scalar<int64_t>(), 3);
  EXPECT_EQ(stats.frames_created, 1 + 4);
  EXPECT_THAT(NodeCount(stats, "drain/exit_0"), Pair(1, 3));
}

TEST_P(ControlFlowTest, UntakenRecursiveCallsDoNotEnterTheBody) {
  // fib's base case leaves both recursive sites untaken: their Calls fire
  // dead and go straight to the Returns (design.md §2, step 5), so the number
  // of invocations is exactly the number of live calls.
  const int64_t calls = exec_test::FibCalls(89);
  const int64_t base_cases = 89;  // invocations with n <= 1
  SessionOptions every_dead_node = Options();
  every_dead_node.skip_dead_branches = false;
  every_dead_node.forward_call_values = false;  // every Return fires, as in the paper
  auto s = MakeSession(reference::Fib(), every_dead_node);
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"n", I(10)}}, &stats).scalar<int64_t>(), 89);
  EXPECT_EQ(stats.frames_created, calls + 1);
  EXPECT_THAT(OpCount(stats, "Call"), Pair(calls, 2 * base_cases));
  EXPECT_THAT(OpCount(stats, "Return"), Pair(calls, 2 * base_cases));
  const int64_t dead_firings = stats.dead_firings;
  EXPECT_GT(dead_firings, 0);

  // Skipping dead branches (the default), the untaken else branch of a base
  // case — its Subs, both call sites and the Add — is passed over whole: the
  // cond's Merge gets its dead input from the branch's frontier, and none of
  // the branch's nodes fires dead. Same invocations, same live firings.
  SessionOptions skip = Options();
  skip.forward_call_values = false;
  auto skipping = MakeSession(reference::Fib(), skip);
  ASSERT_NE(skipping, nullptr);
  RunStats skipped;
  EXPECT_EQ(RunResult(skipping.get(), {{"n", I(10)}}, &skipped).scalar<int64_t>(), 89);
  EXPECT_EQ(skipped.frames_created, calls + 1);
  EXPECT_EQ(skipped.live_firings, stats.live_firings);
  EXPECT_THAT(OpCount(skipped, "Call"), Pair(calls, 0));
  EXPECT_THAT(OpCount(skipped, "Return"), Pair(calls, 0));
  EXPECT_EQ(skipped.dead_firings, 0);
  EXPECT_EQ(skipped.live_frames_after_run, 0);

  // With the defaults the Returns inside fib are passed over as well (the
  // callee's result goes to their consumers): only main's Return fires.
  auto defaults = MakeSession(reference::Fib(), Options());
  ASSERT_NE(defaults, nullptr);
  RunStats forwarded;
  EXPECT_EQ(RunResult(defaults.get(), {{"n", I(10)}}, &forwarded).scalar<int64_t>(), 89);
  EXPECT_EQ(forwarded.frames_created, calls + 1);
  EXPECT_THAT(OpCount(forwarded, "Call"), Pair(calls, 0));
  EXPECT_THAT(OpCount(forwarded, "Return"), Pair(1, 0));
  EXPECT_EQ(forwarded.dead_firings, 0);
  EXPECT_EQ(forwarded.live_frames_after_run, 0);
}

// ---- tags ----

TEST_P(ControlFlowTest, YaghiTagsAreCallSiteLists) {
  RecordingObserver obs;
  SessionOptions options = Options(&obs);
  options.release_tail_callers = false;  // every caller keeps its label
  auto s = MakeSession(reference::Yaghi(), options);
  ASSERT_NE(s, nullptr);
  ASSERT_NE(s->executable_graph().FindNode("g/g_body"), nullptr);
  EXPECT_EQ(RunResult(s.get(), {}).scalar<int64_t>(), 11);
  // g's body runs once per invocation of f: call site 0 of g inside f's
  // invocations 0 and 1 (the two main-graph calls of f).
  EXPECT_THAT(obs.Tags("g/g_body"), ::testing::UnorderedElementsAre("[0, 0]", "[0, 1]"));
  EXPECT_TRUE(obs.Tags("g/g_body", /*dead=*/true).empty());
  EXPECT_THAT(obs.Tags("result"), ElementsAre("[]"));

  // f's result is its call of g's (a tail call with no condition): with the
  // default release_tail_callers, g's invocation takes f's place once f has
  // made the call, and its tag shows f's label passed over.
  RecordingObserver released;
  auto d = MakeSession(reference::Yaghi(), Options(&released));
  ASSERT_NE(d, nullptr);
  RunStats st;
  EXPECT_EQ(RunResult(d.get(), {}, &st).scalar<int64_t>(), 11);
  if (GetParam() == 1) {
    EXPECT_EQ(st.tail_callers_released, 2);
    EXPECT_THAT(released.Tags("g/g_body"), ::testing::UnorderedElementsAre("[+1 tail calls, 0]", "[+1 tail calls, 1]"));
  }
}

TEST_P(ControlFlowTest, WhileBodyTagsCountIterations) {
  RecordingObserver obs;
  auto s = MakeSession(reference::WhileLoop(), Options(&obs));
  ASSERT_NE(s, nullptr);
  // The builder names the frame; read it back from an Enter's attr.
  std::vector<std::string> enters = exec_test::NodesWithOp(*s, "Enter");
  ASSERT_FALSE(enters.empty());
  absl::StatusOr<std::string> frame = s->executable_graph().FindNode(enters[0])->GetString("frame_name");
  ASSERT_TRUE(frame.ok()) << frame.status();
  const std::string body = *frame + "/body_0";
  EXPECT_EQ(RunResult(s.get(), {{"n", I(4)}}).scalar<int64_t>(), 4);
  std::multiset<std::string> live = obs.Tags(body);
  std::vector<std::string> want;
  for (int k = 0; k < 4; ++k) want.push_back(absl::StrCat("[", k, ", ", *frame, "]"));
  EXPECT_THAT(std::vector<std::string>(live.begin(), live.end()), UnorderedElementsAreArray(want));
  EXPECT_THAT(obs.Tags(body, /*dead=*/true), ElementsAre(absl::StrCat("[4, ", *frame, "]")));
}

TEST_P(ControlFlowTest, CallInsideLoopIsKeyedByIteration) {
  RecordingObserver obs;
  auto s = MakeSession(CallInLoop(), Options(&obs));
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"n", I(4)}}, &stats).scalar<int64_t>(), 0 + 1 + 4 + 9);
  // Iterations 0..4 plus one invocation of sq in each of the 4 live ones.
  EXPECT_EQ(stats.frames_created, 1 + 5 + 4);
  EXPECT_EQ(stats.max_tag_depth, 2);
  // The invocation's tag is (site, iteration, frame): the call-site slot
  // lives in the iteration, so concurrent iterations never share a child.
  std::multiset<std::string> live = obs.Tags("sq/sq_body");
  EXPECT_THAT(std::vector<std::string>(live.begin(), live.end()),
              UnorderedElementsAreArray({"[0, 0, calls]", "[0, 1, calls]", "[0, 2, calls]", "[0, 3, calls]"}));
}

TEST_P(ControlFlowTest, RecursionInsideLoopTags) {
  RecordingObserver obs;
  auto s = MakeSession(reference::CallInWhile(), Options(&obs));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(RunResult(s.get(), {{"n", I(12)}}).scalar<int64_t>(), reference::NativeCallInWhile(12));
  // Every firing inside fib has a tag ending in (iteration, frame) of the
  // loop, and every iteration of the loop called fib.
  std::set<std::string> iterations;
  for (const exec_test::Firing& f : obs.Firings()) {
    if (f.node.rfind("fib/", 0) != 0) continue;
    std::vector<std::string> labels = ParseTag(f.tag);
    ASSERT_GE(labels.size(), 3u) << f.node << " " << f.tag;
    if (!f.dead) iterations.insert(labels[labels.size() - 2]);
  }
  EXPECT_EQ(iterations.size(), 12u);
}

// ---- the same answers and counts with any number of workers ----

TEST_P(ControlFlowTest, SameResultsAndCountsAsOneWorker) {
  struct Program {
    Graph graph;
    exec_test::Feeds feeds;
  };
  std::vector<Program> programs = {
      {GuardedDiv(), {{"x", I(0)}}},
      {CondInLoop(), {{"n", I(40)}}},
      {NestedLoops(), {{"a", I(3)}, {"b", I(4)}, {"c", I(5)}}},
      {LoopInUntakenBranch(), {{"x", I(-1)}}},
      {LoopInUntakenBranch(), {{"x", I(9)}}},
      {CallInLoop(), {{"n", I(30)}}},
      {reference::CallInWhile(), {{"n", I(30)}}},
      {reference::Fib(), {{"n", I(15)}}},
      {reference::Tak(), {{"x", I(9)}, {"y", I(6)}, {"z", I(3)}}},
      {reference::Ack(), {{"m", I(2)}, {"n", I(3)}}},
      {reference::Ack(), {{"m", I(3)}, {"n", I(3)}}},
      {InvariantThroughTwoLoops(), {{"n", I(4)}}},
      {reference::WhileInFunction(), {{"n", I(10)}}},
  };
  for (size_t p = 0; p < programs.size(); ++p) {
    SessionOptions one;
    one.collect_node_stats = true;
    // None of these nests deeper than a few dozen frames; a low limit turns
    // a runaway into a quick, short error.
    one.max_tag_depth = 10000;
    SessionOptions many = Options();
    many.max_tag_depth = 10000;
    auto s1 = MakeSession(programs[p].graph, one);
    auto sn = MakeSession(programs[p].graph, many);
    ASSERT_TRUE(s1 != nullptr && sn != nullptr);
    RunStats st1, stn;
    Tensor r1 = RunResult(s1.get(), programs[p].feeds, &st1);
    Tensor rn = RunResult(sn.get(), programs[p].feeds, &stn);
    EXPECT_EQ(rn.scalar<int64_t>(), r1.scalar<int64_t>()) << "program " << p;
    // Which nodes fire, live or dead, is a property of the program, not of
    // the schedule.
    EXPECT_EQ(stn.firings_by_node, st1.firings_by_node) << "program " << p;
    EXPECT_EQ(stn.firings_by_op, st1.firings_by_op) << "program " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, ControlFlowTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
