// What outside acceptance testing found (issue #26), each pinned by the
// program that showed it: frames left live by loops in untaken branches,
// main-graph loop results that could not be fetched, and unconditional tail
// calls that were not released; then what the random programs of
// random_recursion_test.cc found in that class once they had loops: loop
// bodies that read only loop invariants.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::Outs;
using ::testing::HasSubstr;

// L(n): a While that counts i from 0 to 2 and carries n unchanged; its
// result is n.
Output CountingLoop(GraphBuilder& f, Output n) {
  return f.While([&](const Outs& v) { return f.Less(v[0], f.Const<int64_t>(2)); },
                 [&](const Outs& v) { return Outs{f.Add(v[0], f.Const<int64_t>(1)), v[1]}; },
                 {f.Const<int64_t>(0), n})[1];
}

// f(n) = n < 0 ? (L(n) >= 4 ? L(n) : 0) : 0: two loops in a branch that a
// non-negative n never takes.
void DefineLoopsInUntakenBranch(GraphBuilder& b) {
  (void)b.DefineFunction(
      FunctionSignature{"f", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}}, [](GraphBuilder& f, const Outs& a) {
        Output n = a[0];
        return f.Cond(
            f.Less(n, f.Const<int64_t>(0)),
            [&] {
              return f.Cond(
                  f.GreaterEqual(CountingLoop(f, n), f.Const<int64_t>(4)), [&] { return Outs{CountingLoop(f, n)}; },
                  [&] { return Outs{f.Const<int64_t>(0)}; });
            },
            [&] { return Outs{f.Const<int64_t>(0)}; });
      });
}

class AcceptanceRegressionsTest : public ::testing::TestWithParam<int> {};

// Item 1: the run left the loops' frames live (live_frames_after_run 2-3).
TEST_P(AcceptanceRegressionsTest, LoopsInAnUntakenBranchLeaveNoFrame) {
  GraphBuilder b;
  DefineLoopsInUntakenBranch(b);
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("f", {n})[0], "result");
  const Graph g = Built(b);
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    exec_test::ForEachVariant(GetParam(), [&](const SessionOptions& base) {
      SessionOptions options = base;
      options.mode = mode;
      SCOPED_TRACE(exec_test::ModeName(mode));
      auto s = MakeSession(g, options);
      ASSERT_NE(s, nullptr);
      for (int64_t v : {3, -1}) {
        RunStats st;
        EXPECT_EQ(exec_test::RunResult(s.get(), {{"n", I(v)}}, &st).scalar<int64_t>(), 0);
        EXPECT_EQ(st.live_frames_after_run, 0) << "n = " << v;
      }
    });
  }
}

// Item 1: called from a main-graph While more often than its
// parallel_iterations, the leaked frames held the loop's window and the run
// stalled ("the run stopped making progress").
TEST_P(AcceptanceRegressionsTest, ManyCallsFromALoopDoNotStall) {
  GraphBuilder b;
  DefineLoopsInUntakenBranch(b);
  Output times = b.Placeholder("times", DType::kInt64);
  std::vector<Output> out = b.While(
      [&](const Outs& v) { return b.Less(v[0], times); },
      [&](const Outs& v) {
        return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], b.Call("f", {b.Const<int64_t>(3)})[0])};
      },
      {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  b.Identity(out[0], "result");
  const Graph g = Built(b);
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SessionOptions options;
    options.mode = mode;
    options.num_workers = GetParam();
    SCOPED_TRACE(exec_test::ModeName(mode));
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    for (int64_t times_v : {9, 10, 50}) {
      RunStats st;
      EXPECT_EQ(exec_test::RunResult(s.get(), {{"times", I(times_v)}}, &st).scalar<int64_t>(), times_v);
    }
  }
}

// Item 1: a recursion that calls f (loops in an untaken branch) on its way
// down: g(n) = n <= 0 ? 0 : g(n - 1 + f(n)). Each f(n) left its loops'
// frames live. (While a worker goes depth first, f's dead loops drain only
// as the recursion unwinds: about four frames per level are live.)
TEST_P(AcceptanceRegressionsTest, RecursionThroughLoopsInAnUntakenBranchLeavesNoFrame) {
  GraphBuilder b;
  DefineLoopsInUntakenBranch(b);
  (void)b.DefineFunction(
      FunctionSignature{"g", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}}, [](GraphBuilder& f, const Outs& a) {
        Output n = a[0];
        return f.Cond(
            f.LessEqual(n, f.Const<int64_t>(0)), [&] { return Outs{f.Const<int64_t>(0)}; },
            [&] {
              Output next = f.Add(f.Sub(n, f.Const<int64_t>(1)), f.Call("f", {n})[0]);
              return Outs{f.Call("g", {next})[0]};
            });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("g", {n})[0], "result");
  SessionOptions options;
  options.num_workers = GetParam();
  auto s = MakeSession(Built(b), options);
  ASSERT_NE(s, nullptr);
  RunStats st;
  EXPECT_EQ(exec_test::RunResult(s.get(), {{"n", I(300)}}, &st).scalar<int64_t>(), 0);  // no frame left
  EXPECT_LT(st.peak_live_frames, 5 * 300);
}

// Item 2: a main-graph While's results are fetched by their Exits' names,
// and an Exit can be a target.
TEST_P(AcceptanceRegressionsTest, MainGraphLoopResultsCanBeFetched) {
  GraphBuilder b;
  Output limit = b.Placeholder("limit", DType::kInt64);
  std::vector<Output> out = b.While([&](const Outs& v) { return b.Less(v[0], limit); },
                                    [&](const Outs& v) {
                                      return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Mul(v[1], b.Const<int64_t>(2))};
                                    },
                                    {b.Const<int64_t>(0), b.Const<int64_t>(1)});
  const std::string i_name = b.Name(out[0]), p_name = b.Name(out[1]);
  const Graph g = Built(b);
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SessionOptions options;
    options.mode = mode;
    options.num_workers = GetParam();
    SCOPED_TRACE(exec_test::ModeName(mode));
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    RunStats st;
    absl::StatusOr<std::vector<Tensor>> r = s->Run({{"limit", I(5)}}, {p_name, i_name}, {}, &st);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->at(0).scalar<int64_t>(), 32);
    EXPECT_EQ(r->at(1).scalar<int64_t>(), 5);
    EXPECT_EQ(st.live_frames_after_run, 0);
    // Only the loop's result p: i runs too (the loop runs whole).
    r = s->Run({{"limit", I(3)}}, {p_name});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->at(0).scalar<int64_t>(), 8);
    // As a target.
    r = s->Run({{"limit", I(3)}}, {}, {i_name});
    EXPECT_TRUE(r.ok()) << r.status();
    // Its feed is needed.
    r = s->Run({}, {p_name});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
}

// Item 2: a loop in an untaken branch of the main graph: its Exit fires dead,
// so fetching it fails as any dead fetch does, and as a target it ran.
TEST_P(AcceptanceRegressionsTest, ExitOfALoopInAnUntakenMainBranch) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kInt64);
  std::string exit_name;
  b.Cond(
      b.Less(x, b.Const<int64_t>(0)),
      [&] {
        Output r = CountingLoop(b, x);
        exit_name = b.Name(r);
        return Outs{r};
      },
      [&] { return Outs{x}; });
  const Graph g = Built(b);
  SessionOptions options;
  options.num_workers = GetParam();
  auto s = MakeSession(g, options);
  ASSERT_NE(s, nullptr);
  absl::StatusOr<std::vector<Tensor>> r = s->Run({{"x", I(-4)}}, {exit_name});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at(0).scalar<int64_t>(), -4);
  r = s->Run({{"x", I(4)}}, {exit_name});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("dead"));
  r = s->Run({{"x", I(4)}}, {}, {exit_name});
  EXPECT_TRUE(r.ok()) << r.status();
}

// Item 2: the nodes of a loop nested in a main-graph loop stay unfetchable,
// with a message that says what to fetch.
TEST_P(AcceptanceRegressionsTest, NestedLoopExitIsNotFetchable) {
  GraphBuilder b;
  std::string inner_exit;
  std::vector<Output> out = b.While([&](const Outs& v) { return b.Less(v[0], b.Const<int64_t>(3)); },
                                    [&](const Outs& v) {
                                      Output inner = CountingLoop(b, v[0]);
                                      inner_exit = b.Name(inner);
                                      return Outs{b.Add(inner, b.Const<int64_t>(1))};
                                    },
                                    {b.Const<int64_t>(0)});
  const Graph g = Built(b);
  auto s = MakeSession(g, SessionOptions{});
  ASSERT_NE(s, nullptr);
  absl::StatusOr<std::vector<Tensor>> r = s->Run({}, {inner_exit});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  r = s->Run({}, {b.Name(out[0])});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at(0).scalar<int64_t>(), 3);
}

// Item 10: f(n) = f(n + 1), a tail call with no base case at all, holds a
// few frames, not one per call, until the depth limit stops it.
TEST_P(AcceptanceRegressionsTest, UnconditionalTailCallIsReleased) {
  GraphBuilder b;
  (void)b.DefineFunction(FunctionSignature{"f", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& a) {
                           return Outs{f.Call("f", {f.Add(a[0], f.Const<int64_t>(1))})[0]};
                         });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("f", {n})[0], "result");
  SessionOptions options;
  options.num_workers = GetParam();
  options.max_tag_depth = 5000;
  options.exact_live_frames = true;
  auto s = MakeSession(Built(b), options);
  ASSERT_NE(s, nullptr);
  RunStats st;
  absl::StatusOr<std::vector<Tensor>> r = s->Run({{"n", I(0)}}, {"result"}, {}, &st);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // Frames another worker can reach are never handed over; a chain has
  // little to steal, but a steal keeps its frames.
  if (GetParam() == 1) {
    EXPECT_LE(st.peak_live_frames, 3);
    EXPECT_GE(st.tail_callers_released, 4990);
  } else {
    EXPECT_LT(st.peak_live_frames, 500);
  }
}

// Item 4: a chain of 10^4 functions, each calling the next. Dynamic mode's
// compile reserved its node tables anew for every function (quadratic: 1k
// functions 369 MB, 10^4 ended in std::bad_alloc); now tens of MB.
TEST(AcceptanceRegressions, TenThousandNestedFunctionsInDynamicMode) {
  constexpr int kFunctions = 10'000;
  GraphBuilder b;
  for (int i = kFunctions - 1; i >= 0; --i) {
    (void)b.DefineFunction(FunctionSignature{absl::StrCat("f", i), {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                           [&](GraphBuilder& f, const Outs& a) {
                             if (i == kFunctions - 1) return Outs{f.Add(a[0], f.Const<int64_t>(1))};
                             return Outs{f.Call(absl::StrCat("f", i + 1), {a[0]})[0]};
                           });
  }
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("f0", {n})[0], "result");
  const Graph g = Built(b);
  SessionOptions options;
  options.mode = ExecutionMode::kDynamic;
  auto s = MakeSession(g, options);
  ASSERT_NE(s, nullptr);
  RunStats st;
  EXPECT_EQ(exec_test::RunResult(s.get(), {{"n", I(41)}}, &st).scalar<int64_t>(), 42);
  EXPECT_EQ(st.max_tag_depth, kFunctions);
}

// Found by the random programs once they had loops (seed 2000030): a Cond
// in a loop body on a predicate from outside the loop. Its Switches read
// only loop invariants, so they fired in every iteration the loop created,
// the exiting one too, where the live branch sent a value to NextIteration
// and started another iteration: the run never ended (DEADLINE_EXCEEDED).
// L(a) = loop i from 0 while i < 3: (i + 1, a > 0 ? a : 7); its result is
// the second variable.
Outs LoopOverInvariantCond(GraphBuilder& f, Output a) {
  Output positive = f.Greater(a, f.Const<int64_t>(0));
  return f.While([&](const Outs& v) { return f.Less(v[0], f.Const<int64_t>(3)); },
                 [&](const Outs& v) {
                   Outs picked = f.Cond(positive, [&] { return Outs{a}; }, [&] { return Outs{f.Const<int64_t>(7)}; });
                   return Outs{f.Add(v[0], f.Const<int64_t>(1)), picked[0]};
                 },
                 {f.Const<int64_t>(0), a});
}

TEST_P(AcceptanceRegressionsTest, ACondOnALoopInvariantEndsWithItsLoop) {
  for (bool in_function : {true, false}) {
    SCOPED_TRACE(in_function ? "in a function" : "in the main graph");
    GraphBuilder b;
    (void)b.DefineFunction(FunctionSignature{"L", {{"a", DType::kInt64}}, {{"r", DType::kInt64}}},
                           [](GraphBuilder& f, const Outs& a) { return Outs{LoopOverInvariantCond(f, a[0])[1]}; });
    Output a = b.Placeholder("a", DType::kInt64);
    b.Identity(in_function ? b.Call("L", {a})[0] : LoopOverInvariantCond(b, a)[1], "result");
    const Graph g = Built(b);
    for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
      SCOPED_TRACE(exec_test::ModeName(mode));
      SessionOptions options;
      options.mode = mode;
      options.num_workers = GetParam();
      options.deadline = absl::Seconds(10);  // a regression fails instead of hanging
      auto s = MakeSession(g, options);
      ASSERT_NE(s, nullptr);
      for (int64_t v : {5, -1}) {
        RunStats st;
        EXPECT_EQ(exec_test::RunResult(s.get(), {{"a", I(v)}}, &st).scalar<int64_t>(), v > 0 ? v : 7);
        EXPECT_EQ(st.frames_created, (in_function ? 2 : 1) + 4);  // 3 iterations and the exiting one
      }
    }
  }
}

// Found by the random programs (seed 2000091): a Merge in a loop body of
// two loop invariants. The builder gave it the iteration's pivot as a
// control input, as it does every node that reads only invariants, but a
// live input of any kind fires a Merge, and it fired on the control edge
// with no value: the run fetched an invalid tensor (or a kernel downstream
// failed on "an invalid (empty) tensor"). And the executor never offers an
// invariant to a Merge: merge(a, x) with x dead waited forever ("the run
// stopped making progress"). loop i from 0 while i < 3: (i + 1, merge(a,
// a)), and the same with merge(a, a value no iteration takes), must end
// with a.
TEST_P(AcceptanceRegressionsTest, AMergeOfLoopInvariantsYieldsTheirValue) {
  for (bool with_dead : {false, true}) {
    SCOPED_TRACE(with_dead ? "merge(a, dead)" : "merge(a, a)");
    auto loop = [&](GraphBuilder& f, Output a) {
      return f.While([&](const Outs& v) { return f.Less(v[0], f.Const<int64_t>(3)); },
                     [&](const Outs& v) {
                       Output other = a;
                       if (with_dead) {
                         Output never = f.Less(v[0], f.Const<int64_t>(-5));
                         other = f.Outputs(f.Op("Switch", {v[1], never}, {{"T", DType::kInt64}}))[1];
                       }
                       return Outs{f.Add(v[0], f.Const<int64_t>(1)),
                                   f.Op("Merge", {a, other}, {{"T", DType::kInt64}})};
                     },
                     {f.Const<int64_t>(0), f.Const<int64_t>(0)})[1];
    };
    for (bool in_function : {true, false}) {
      SCOPED_TRACE(in_function ? "in a function" : "in the main graph");
      GraphBuilder b;
      (void)b.DefineFunction(FunctionSignature{"L", {{"a", DType::kInt64}}, {{"r", DType::kInt64}}},
                             [&](GraphBuilder& f, const Outs& a) { return Outs{f.Add(loop(f, a[0]), a[0])}; });
      Output a = b.Placeholder("a", DType::kInt64);
      b.Identity(in_function ? b.Call("L", {a})[0] : b.Add(loop(b, a), a), "result");
      const Graph g = Built(b);
      exec_test::ForEachMode(g, GetParam(), [&](Session* s) {
        EXPECT_EQ(exec_test::RunResult(s, {{"a", I(5)}}).scalar<int64_t>(), 10);
      });
    }
  }
}

// The class of the two above, in a loop nested in a loop body: a nested
// loop's initial value from outside the outer loop is an invariant of the
// outer loop, and its Enter read only that: it fired in every outer
// iteration, the exiting one too, so the nested loop ran there in part
// (here its condition's call g(w): one invocation too many) or, were all
// its initial values invariants, whole. Outer: loop i from 0 while i < 3:
// (i + 1, inner's w); inner: loop j from 0 while j < 2 && g(w) > -1000:
// (j + 1, w) from w = a; g(x) = x + 1. Three inner loops of three
// conditions each: 9 invocations.
TEST_P(AcceptanceRegressionsTest, ALoopInALoopStartsOnlyInLiveIterations) {
  for (bool all_invariant : {false, true}) {
    SCOPED_TRACE(all_invariant ? "every initial value an invariant" : "one initial value an invariant");
    GraphBuilder b;
    (void)b.DefineFunction(FunctionSignature{"g", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                           [](GraphBuilder& f, const Outs& x) { return Outs{f.Add(x[0], f.Const<int64_t>(1))}; });
    Output a = b.Placeholder("a", DType::kInt64);
    Output zero = b.Const<int64_t>(0);
    std::vector<Output> out = b.While(
        [&](const Outs& v) { return b.Less(v[0], b.Const<int64_t>(3)); },
        [&](const Outs& v) {
          Outs inner = b.While(
              [&](const Outs& u) {
                return b.LogicalAnd(b.Less(u[0], b.Const<int64_t>(2)),
                                    b.Greater(b.Call("g", {u[1]})[0], b.Const<int64_t>(-1000)));
              },
              [&](const Outs& u) { return Outs{b.Add(u[0], b.Const<int64_t>(1)), u[1]}; },
              {all_invariant ? zero : b.Const<int64_t>(0), a});
          return Outs{b.Add(v[0], b.Const<int64_t>(1)), inner[1]};
        },
        {zero, zero});
    b.Identity(out[1], "result");
    const Graph g = Built(b);
    for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
      SCOPED_TRACE(exec_test::ModeName(mode));
      SessionOptions options;
      options.mode = mode;
      options.num_workers = GetParam();
      options.deadline = absl::Seconds(10);  // a regression fails instead of hanging
      auto s = MakeSession(g, options);
      ASSERT_NE(s, nullptr);
      RunStats st;
      EXPECT_EQ(exec_test::RunResult(s.get(), {{"a", I(5)}}, &st).scalar<int64_t>(), 5);
      EXPECT_EQ(exec_test::OpCount(st, mode == ExecutionMode::kStatic ? "Call" : "Invoke").first, 9);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, AcceptanceRegressionsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
