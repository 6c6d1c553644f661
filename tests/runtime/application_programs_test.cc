// Every application program (N-queens, merge sort, the expression tree and
// its gradient, binary search, tree DFS) under every static executor
// variant, and the minimal repros of the runtime bugs the programs ran
// into. The programs and checks are in application_programs.h (which says
// what every application test checks) and application_tree_programs.h; the
// programs' own tests are application_divide_conquer_test.cc and
// application_tree_programs_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/application_programs.h"
#include "runtime/application_tree_programs.h"
#include "runtime/exec_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace application_programs {
namespace {

// ===========================================================================
// Every program under every static executor variant (value forwarding,
// releasing tail callers, skipping dead branches, per-node counting): the
// options change which nodes fire, never the answers or the frames.

class ApplicationVariantsTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationVariantsTest, EveryProgramUnderEveryExecutorVariant) {
  const Graph queens = NQueensGraph(), sort = MergeSortGraph(), expr = ExprGraph(), bsearch = BinarySearchGraph(),
              dfs = TreeDfsGraph(/*carry_invariants=*/true);
  Graph grad_graph = ExprGraph();
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(grad_graph, {"result"}, {"leaves"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  std::mt19937 rng(31337);
  const std::vector<float> x = RandomFloats(45, rng);
  const std::vector<int64_t> a = SortedDistinct(100, rng);
  const std::vector<ExprCase> cases = ExprCases();
  const std::vector<int64_t> tree = RandomDfsTree();
  exec_test::ForEachVariant(GetParam(), [&](const SessionOptions& options) {
    auto s = MakeSession(queens, options);
    ASSERT_NE(s, nullptr);
    CheckQueens(s.get(), 6);
    s = MakeSession(sort, options);
    ASSERT_NE(s, nullptr);
    CheckSort(s.get(), x);
    s = MakeSession(expr, options);
    ASSERT_NE(s, nullptr);
    CheckExprEval(s.get(), cases.back());
    auto g = MakeSession(grad_graph, options);
    ASSERT_NE(g, nullptr);
    CheckExprGradient(g.get(), s.get(), (*grads)[0], cases.back());
    s = MakeSession(bsearch, options);
    ASSERT_NE(s, nullptr);
    for (int64_t key : {a[0], a[63], a[99] + 1, a[40] + 1}) CheckBsearch(s.get(), a, key);
    s = MakeSession(dfs, options);
    ASSERT_NE(s, nullptr);
    for (int64_t target : {int64_t{-1}, tree[0], tree[3 * 77], tree[3 * 199]}) CheckDfs(s.get(), tree, target, true);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationVariantsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

// ===========================================================================
// Runtime bugs found while writing the application programs, as minimal
// repros.

// Fixed bug (static mode): a call in a While body whose arguments mix a
// loop variable and a loop invariant was also entered by the iteration that
// exits the loop. GraphBuilder gated a body node that reads only invariants
// on the iteration's pivot, but not an Invoke with a loop-variable
// argument, and StaticizeRecursion splits it into one Call per argument:
// the Calls of invariant arguments read only the invariant's Enter, live in
// the exiting iteration too, and started a partial invocation whose
// loop-variable argument entered dead. Whatever in the callee depended only
// on the invariant arguments ran live: a side effect happened once more (v
// was 40, not 30), and a recursion driven by an invariant argument ran
// whole for nothing (g below: 1001 extra frames). The builder now gates
// such an Invoke on the pivot too.
TEST(ApplicationRegressionTest, CallInLoopBodyWithInvariantArgumentsSkipsTheExitingIteration) {
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SCOPED_TRACE(ModeName(mode));
    SessionOptions o;
    o.mode = mode;
    {
      // f(i, h, k) = i + AssignAdd(h, k); for (c = 0; c < 3; ++c) acc += f(c, v, k).
      GraphBuilder b;
      ASSERT_TRUE(b.DefineFunction({"f", {{"i", kI64}, {"h", kI64}, {"k", kI64}}, {{"r", kI64}}},
                                   [](GraphBuilder& f, const Outs& a) -> Outs {
                                     return {f.Add(a[0], f.AssignAdd(a[1], a[2]))};
                                   })
                      .ok());
      const Output v = b.Variable("v", I(0));
      const Output k = b.Placeholder("k", kI64);
      Outs r = b.While([&](const Outs& x) { return b.Less(x[0], b.Const<int64_t>(3)); },
                       [&](const Outs& x) -> Outs {
                         return {b.Add(x[0], b.Const<int64_t>(1)), b.Add(x[1], b.Call("f", {x[0], v, k})[0])};
                       },
                       {b.Const<int64_t>(0), b.Const<int64_t>(0)});
      b.Identity(r[1], "result");
      auto s = MakeSession(Built(b), o);
      ASSERT_NE(s, nullptr);
      RunStats st;
      ASSERT_TRUE(s->Run({{"k", I(10)}}, {"result"}, {}, &st).ok());
      EXPECT_EQ(s->ReadVariable("v")->scalar<int64_t>(), 30);  // was 40 in static mode
      EXPECT_EQ(OpCount(st, "AssignAdd").first, 3);            // was 4
      EXPECT_EQ(st.frames_created, 1 + 4 + 3);                 // was 9
    }
    {
      // g(i, n) = n == 0 ? 0 : i + g(i, n - 1); for (c = 0; c < 3; ++c) acc += g(c, n).
      GraphBuilder b;
      ASSERT_TRUE(b.DefineFunction({"g", {{"i", kI64}, {"n", kI64}}, {{"r", kI64}}},
                                   [](GraphBuilder& f, const Outs& a) -> Outs {
                                     return f.Cond(
                                         f.Equal(a[1], f.Const<int64_t>(0)), [&] { return Outs{f.Const<int64_t>(0)}; },
                                         [&] {
                                           return Outs{f.Add(
                                               a[0], f.Call("g", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])};
                                         });
                                   })
                      .ok());
      const Output n = b.Placeholder("n", kI64);
      Outs r = b.While([&](const Outs& x) { return b.Less(x[0], b.Const<int64_t>(3)); },
                       [&](const Outs& x) -> Outs {
                         return {b.Add(x[0], b.Const<int64_t>(1)), b.Add(x[1], b.Call("g", {x[0], n})[0])};
                       },
                       {b.Const<int64_t>(0), b.Const<int64_t>(0)});
      b.Identity(r[1], "result");
      auto s = MakeSession(Built(b), o);
      ASSERT_NE(s, nullptr);
      RunStats st;
      auto out = s->Run({{"n", I(1000)}}, {"result"}, {}, &st);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->at(0).scalar<int64_t>(), 3000);
      EXPECT_EQ(st.frames_created, 1 + 4 + 3 * 1001);  // was 4009 in static mode
    }
  }
}

}  // namespace
}  // namespace application_programs
}  // namespace tdf
