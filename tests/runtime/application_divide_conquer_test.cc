// The divide-and-conquer application programs, N-queens (a recursive call
// in a loop in a Cond) and merge sort (two independent recursive calls, then
// a merge loop), in both modes with 1, 2 and 8 workers against their native
// models; bad feeds fail naming node and op. The programs and checks are in
// application_programs.h, which says what every application test checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "runtime/application_programs.h"
#include "runtime/exec_test_util.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace application_programs {
namespace {

class ApplicationNQueensTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationNQueensTest, CountsSolutionsForOneToEight) {
  const Graph g = NQueensGraph();
  ForEachMode(g, GetParam(), [&](Session* s) {
    for (int n = 1; n <= 8; ++n) CheckQueens(s, n);
  });
}

TEST_P(ApplicationNQueensTest, BadFeedsNameTheNodeAndOp) {
  const Graph g = NQueensGraph();
  ForEachMode(g, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"n", Tensor::Scalar<int32_t>(4)}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'n' is int32", "node 'n' (Placeholder) wants int64"});
    ExpectRunFails(s, {}, {"result"}, absl::StatusCode::kInvalidArgument, {"node 'n' (Placeholder)", "missing feed"});
    Ran r = RunTwice(s, {{"n", I(6)}}, {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(r.out[0].scalar<int64_t>(), 4);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationNQueensTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

class ApplicationMergeSortTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationMergeSortTest, SortsRandomVectors) {
  const Graph g = MergeSortGraph();
  std::mt19937 rng(20240611);
  std::vector<std::vector<float>> inputs;
  for (int n : {0, 1, 2, 7, 64, 1000}) inputs.push_back(RandomFloats(n, rng));
  // Many ties, and an already sorted and a reversed input.
  std::vector<float> ties(37);
  for (float& e : ties) e = static_cast<float>(std::uniform_int_distribution<int>(0, 4)(rng));
  inputs.push_back(ties);
  std::vector<float> sorted(20);
  for (size_t k = 0; k < sorted.size(); ++k) sorted[k] = static_cast<float>(k);
  inputs.push_back(sorted);
  inputs.push_back(std::vector<float>(sorted.rbegin(), sorted.rend()));

  ForEachMode(g, GetParam(), [&](Session* s) {
    for (const std::vector<float>& x : inputs) CheckSort(s, x);
  });
}

TEST_P(ApplicationMergeSortTest, BadFeedsNameTheNodeAndOp) {
  const Graph g = MergeSortGraph();
  ForEachMode(g, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"x", Tensor::Vector<double>({3, 1, 2})}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'x' is float64", "node 'x' (Placeholder) wants float32"});
    ExpectRunFails(s, {}, {"result"}, absl::StatusCode::kInvalidArgument, {"node 'x' (Placeholder)", "missing feed"});
    // A 3x3 matrix passes the Placeholder (it has no shape) but not the
    // first invocation's one-dimensional Slice: the error names that node,
    // its op and its tag.
    ExpectRunFails(s, {{"x", Matrix<float>({9, 8, 7, 6, 5, 4, 3, 2, 1}, 3, 3)}}, {"result"},
                   absl::StatusCode::kInvalidArgument, {NodeOf(s, "msort"), OpAtTag(s, "Slice", "msort") + "0]", "rank 2"});
    Ran r = RunTwice(s, {{"x", Tensor::Vector<float>({3, -1, 2})}}, {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(Values<float>(r.out[0]), (std::vector<float>{-1, 2, 3}));
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationMergeSortTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace application_programs
}  // namespace tdf
