// The tree-structured application programs: an expression tree evaluated
// by mutual recursion and differentiated (against an analytic reverse pass
// and finite differences), a tail-recursive binary search, and a tree DFS
// that stops at the first match, one session serving concurrent searches
// too; in both modes with 1, 2 and 8 workers against their native models.
// The programs and checks are in application_tree_programs.h; what every
// application test checks is in application_programs.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/application_programs.h"
#include "runtime/application_tree_programs.h"
#include "runtime/exec_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace application_programs {
namespace {

class ApplicationExprTreeTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationExprTreeTest, EvaluatesByMutualRecursion) {
  const Graph g = ExprGraph();
  const std::vector<ExprCase> cases = ExprCases();
  ForEachMode(g, GetParam(), [&](Session* s) {
    for (const ExprCase& ec : cases) CheckExprEval(s, ec);
  });
}

TEST_P(ApplicationExprTreeTest, GradientWithRespectToLeaves) {
  Graph g = ExprGraph();
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, {"leaves"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  {
    // Split call sites need the static mode: the dynamic baseline says so.
    SessionOptions o;
    o.mode = ExecutionMode::kDynamic;
    absl::StatusOr<std::unique_ptr<Session>> dyn = Session::Create(g, o);
    ASSERT_FALSE(dyn.ok());
    EXPECT_EQ(dyn.status().code(), absl::StatusCode::kUnimplemented) << dyn.status();
  }
  SessionOptions o;
  o.num_workers = GetParam();
  auto s = MakeSession(g, o);
  auto forward = MakeSession(ExprGraph(), o);
  ASSERT_NE(s, nullptr);
  ASSERT_NE(forward, nullptr);
  for (const ExprCase& ec : ExprCases()) CheckExprGradient(s.get(), forward.get(), (*grads)[0], ec);
}

TEST_P(ApplicationExprTreeTest, BadInputsNameTheNodeAndOp) {
  Graph g = ExprGraph();
  ExprTree t;
  t.num_leaves = 2;
  // plus(leaf 0, times(leaf 1, <row 7, which does not exist>))
  t.table = {kPlus, 1, 2, 0, kLeaf, -1, -1, 0, kTimes, 3, 7, 0, kLeaf, -1, -1, 1};
  const Feeds bad_child = {{"table", Matrix<int64_t>(t.table, t.rows(), 4)},
                           {"leaves", Tensor::Vector<double>({1.5, 2.5})}};
  ForEachMode(g, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"table", Matrix<int64_t>(t.table, t.rows(), 4)}, {"leaves", Tensor::Vector<float>({1, 2})}},
                   {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'leaves' is float32", "node 'leaves' (Placeholder) wants float64"});
    ExpectRunFails(s, {{"leaves", Tensor::Vector<double>({1, 2})}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"node 'table' (Placeholder)", "missing feed"});
    // Row 7 is read by the fifth invocation (eval_node -> eval_add ->
    // eval_node -> eval_mul -> eval_node): its first Gather fails there.
    ExpectRunFails(s, bad_child, {"result"}, absl::StatusCode::kInvalidArgument,
                   {NodeOf(s, "eval_node"), OpAtTag(s, "Gather", "eval_node"), "index 7", "out of range [0, 4)"});
    t.table[10] = 3;  // times(leaf 1, leaf 1)
    Ran r = RunTwice(s,
                     {{"table", Matrix<int64_t>(t.table, t.rows(), 4)}, {"leaves", Tensor::Vector<double>({1.5, 2.5})}},
                     {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(r.out[0].scalar<double>(), 1.5 + 2.5 * 2.5);
    t.table[10] = 7;
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationExprTreeTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

class ApplicationSearchTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationSearchTest, BinarySearchIsTailRecursive) {
  const Graph g = BinarySearchGraph();
  std::mt19937 rng(99);
  const std::vector<int64_t> a = SortedDistinct(300, rng);
  std::vector<int64_t> keys = {a.front(), a.back(), a[150], a[17], a.front() - 1, a.back() + 1};
  for (int k = 0; k < 20; ++k) keys.push_back(std::uniform_int_distribution<int64_t>(0, a.back() + 2)(rng));
  ForEachMode(g, GetParam(), [&](Session* s) {
    for (int64_t key : keys) CheckBsearch(s, a, key);
  });
}

TEST_P(ApplicationSearchTest, TreeDfsStopsAtTheFirstMatch) {
  CheckTreeDfs(TreeDfsGraph(/*carry_invariants=*/true), GetParam(), /*exact_frames=*/true);
}

// The natural form, with target and T as loop invariants of the children
// loop: the exit of a children loop used to enter dfs once more in static
// mode (see ApplicationRegressionTest in application_programs_test.cc).
TEST_P(ApplicationSearchTest, TreeDfsWithLoopInvariantArguments) {
  CheckTreeDfs(TreeDfsGraph(/*carry_invariants=*/false), GetParam(), /*exact_frames=*/true);
}

TEST_P(ApplicationSearchTest, BadFeedsNameTheNodeAndOp) {
  const Graph bs = BinarySearchGraph();
  ForEachMode(bs, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"a", Tensor::Vector<int32_t>({1, 2})}, {"key", I(2)}, {"n", I(2)}}, {"result"},
                   absl::StatusCode::kInvalidArgument, {"feed 'a' is int32", "node 'a' (Placeholder) wants int64"});
    ExpectRunFails(s, {{"a", Tensor::Vector<int64_t>({1, 2})}, {"n", I(2)}}, {"result"},
                   absl::StatusCode::kInvalidArgument, {"node 'key' (Placeholder)", "missing feed"});
    // n past the end of a: the search reads a[mid] out of range a few calls deep.
    ExpectRunFails(s, {{"a", Tensor::Vector<int64_t>({1, 2, 3})}, {"key", I(100)}, {"n", I(50)}}, {"result"},
                   absl::StatusCode::kInvalidArgument,
                   {NodeOf(s, "bsearch"), OpAtTag(s, "Gather", "bsearch"), "out of range [0, 3)"});
    Ran r = RunTwice(s, {{"a", Tensor::Vector<int64_t>({1, 2, 3})}, {"key", I(3)}, {"n", I(3)}}, {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(r.out[0].scalar<int64_t>(), 2);
  });
  const Graph dfs = TreeDfsGraph(/*carry_invariants=*/true);
  ForEachMode(dfs, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"target", Tensor::Scalar<double>(1)}, {"tree", Matrix<int64_t>({1, -1, -1}, 1, 3)}},
                   {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'target' is float64", "node 'target' (Placeholder) wants int64"});
    ExpectRunFails(s, {{"target", I(1)}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"node 'tree' (Placeholder)", "missing feed"});
  });
}

// A session serves several runs at once: threads search one tree for
// different targets concurrently, each run checked as above.
TEST_P(ApplicationSearchTest, ConcurrentSearchesOnOneSession) {
  const Graph g = TreeDfsGraph(/*carry_invariants=*/true);
  const std::vector<int64_t> t = RandomDfsTree();
  const Tensor tree = Matrix<int64_t>(t, kDfsNodes, 3);
  ForEachMode(g, GetParam(), [&](Session* s) {
    constexpr int kThreads = 4;
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, k] {
        for (int64_t target = k - 1; target <= 151; target += 2 * kThreads) {
          DfsNative c;
          const int64_t want = NativeDfs(t, 0, target, c, 1);
          RunStats st;
          absl::StatusOr<std::vector<Tensor>> out =
              s->Run({{"target", I(target)}, {"tree", tree}}, {"result"}, {}, &st);
          if (!out.ok()) {
            errors[k] = out.status().ToString();
          } else if (out->at(0).scalar<int64_t>() != want || st.live_frames_after_run != 0 ||
                     st.frames_created != 1 + c.calls + c.loop_frames + (want >= 0 ? 1 : 0)) {
            errors[k] = absl::StrCat("target ", target, ": got ", out->at(0).scalar<int64_t>(), " want ", want,
                                     ", frames ", st.frames_created, ", live after ", st.live_frames_after_run);
          }
          if (!errors[k].empty()) return;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int k = 0; k < kThreads; ++k) EXPECT_EQ(errors[k], "") << "thread " << k;
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationSearchTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace application_programs
}  // namespace tdf
