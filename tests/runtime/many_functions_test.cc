// Programs with thousands of functions, call sites or Conds (issue #26 item
// 5): Session::Create indexes call sites once instead of scanning a block
// per Call and every node per function, and builds a body's dead regions
// from worklists, and each site must still get its own Calls, Returns and
// arguments, each Cond its own regions. Their answers are checked here;
// their Create time is measured in bench/create_bench.cc, never asserted.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

Tensor I(int64_t v) { return Tensor::Scalar<int64_t>(v); }

// (mode, workers)
class ManyFunctionsTest : public ::testing::TestWithParam<std::tuple<ExecutionMode, int>> {
 protected:
  // The result for each n, on one Session.
  void ExpectAnswers(const Graph& g, const std::vector<int64_t>& ns, const std::function<int64_t(int64_t)>& native) {
    SessionOptions opts;
    opts.mode = std::get<0>(GetParam());
    opts.num_workers = std::get<1>(GetParam());
    auto s = Session::Create(g, opts);
    ASSERT_TRUE(s.ok()) << s.status();
    for (int64_t n : ns) {
      RunStats stats;
      auto out = (*s)->Run({{"n", I(n)}}, {"result"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->at(0).scalar<int64_t>(), native(n)) << "n = " << n;
      EXPECT_EQ(stats.live_frames_after_run, 0) << "n = " << n;
    }
  }
  // Dynamic mode instantiates bodies per call, with frames sized by the
  // whole library (issue #26 item 4): smaller programs there.
  int64_t Size(int64_t static_size) const {
    return std::get<0>(GetParam()) == ExecutionMode::kStatic ? static_size : 100;
  }
};

// n > 0 takes each body's else branch, n <= 0 its then branch: both branches
// of every function run, and the other's region is skipped dead.
TEST_P(ManyFunctionsTest, MainCallsEachOfManyFunctionsOnce) {
  const int64_t f = Size(3000);
  ExpectAnswers(reference::ManyCalls(f, f), {4, -2},
                [&](int64_t n) { return reference::NativeManyCalls(f, f, n); });
}

TEST_P(ManyFunctionsTest, MainCallsOneFunctionFromManySites) {
  const int64_t c = Size(3000);
  ExpectAnswers(reference::ManyCalls(c, 1), {4, -2},
                [&](int64_t n) { return reference::NativeManyCalls(c, 1, n); });
}

TEST_P(ManyFunctionsTest, ManySitesShareFewFunctions) {
  const int64_t c = Size(3000);
  ExpectAnswers(reference::ManyCalls(c, 7), {4, 0},
                [&](int64_t n) { return reference::NativeManyCalls(c, 7, n); });
}

// Each function calls the next: a run of n > 0 is Size() calls deep; one of
// n <= 0 stops in f0, leaving f1's call site dead.
TEST_P(ManyFunctionsTest, ChainOfManyFunctions) {
  const int64_t f = Size(3000);
  ExpectAnswers(reference::CallChain(f), {4, 0}, [&](int64_t n) { return reference::NativeCallChain(f, n); });
}

// One body of a thousand Conds in sequence: each Cond's untaken branch is a
// dead region of its own, skipped as one jump, and the Switch of n (which
// only the then branch reads) has its dead-data frontier; n decides which
// branches run.
TEST_P(ManyFunctionsTest, OneBodyOfManyConds) {
  ExpectAnswers(reference::LongBody(1000), {4, 0, -5, 1001},
                [](int64_t n) { return reference::NativeLongBody(1000, n); });
}

// One body of a thousand call sites of one function.
TEST_P(ManyFunctionsTest, OneBodyOfManyCallSites) {
  ExpectAnswers(reference::WideBody(1000), {4, -2}, [](int64_t n) { return reference::NativeWideBody(1000, n); });
}

// f(n) = n == 0 ? 0 : n == 1 ? 10 : ... : n == depth - 1 ? 10 (depth - 1) : -1,
// Conds nested in each other's else branch: every value reaches the result
// through the Merges of all the Conds around it (the tail results that
// ForwardTailResults finds for each), and is dead with every enclosing
// branch.
Graph NestedConds(int64_t depth) {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"f", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
      [depth](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        std::function<Output(int64_t)> level = [&](int64_t k) -> Output {
          if (k == depth) return f.Const<int64_t>(-1);
          return f.Cond(
              f.Equal(a[0], f.Const<int64_t>(k)), [&] { return std::vector<Output>{f.Const<int64_t>(10 * k)}; },
              [&] { return std::vector<Output>{level(k + 1)}; })[0];
        };
        return {level(0)};
      });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("f", {n})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

TEST_P(ManyFunctionsTest, OneBodyOfDeeplyNestedConds) {
  constexpr int64_t kDepth = 60;
  ExpectAnswers(NestedConds(kDepth), {0, 1, 37, kDepth - 1, kDepth, -4},
                [](int64_t n) { return n >= 0 && n < kDepth ? 10 * n : -1; });
}

// The same shape, written out with short names (reference::MultiWayIf),
// deep: each level's else region holds every level below it.
TEST_P(ManyFunctionsTest, OneBodyOfADeepMultiWayIf) {
  constexpr int64_t kDepth = 300;
  ExpectAnswers(reference::MultiWayIf(kDepth), {0, 1, 150, kDepth - 1, kDepth, -4},
                [](int64_t n) { return reference::NativeMultiWayIf(kDepth, n); });
}

TEST_P(ManyFunctionsTest, ChainOfOne) {
  ExpectAnswers(reference::CallChain(1), {4, -3}, [](int64_t n) { return reference::NativeCallChain(1, n); });
}

INSTANTIATE_TEST_SUITE_P(ModesAndWorkers, ManyFunctionsTest,
                         ::testing::Combine(::testing::Values(ExecutionMode::kStatic, ExecutionMode::kDynamic),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == ExecutionMode::kStatic ? "Static"
                                                                                                : "Dynamic") +
                                  std::to_string(std::get<1>(info.param)) + "Workers";
                         });

}  // namespace
}  // namespace tdf
