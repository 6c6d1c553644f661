// Reference programs give the native answers in static and dynamic mode with
// 1, 2 and 8 workers, and leave no frame behind (issue #4, "Correctness").
#include <gtest/gtest.h>

#include <tuple>

#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;
Tensor I(int64_t v) { return Tensor::Scalar<int64_t>(v); }

class ReferenceProgramsTest : public ::testing::TestWithParam<std::tuple<ExecutionMode, int>> {
 protected:
  Tensor RunOk(const Graph& g, const Feeds& feeds, RunStats* stats_out = nullptr) {
    SessionOptions opts;
    opts.mode = std::get<0>(GetParam());
    opts.num_workers = std::get<1>(GetParam());
    auto s = Session::Create(g, opts);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return Tensor();
    RunStats stats;
    auto out = (*s)->Run(feeds, {"result"}, {}, &stats);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return Tensor();
    EXPECT_EQ(stats.live_frames_after_run, 0);
    EXPECT_GT(stats.firings, 0);
    if (stats_out) *stats_out = stats;
    return out->at(0);
  }
};

TEST_P(ReferenceProgramsTest, Fib) {
  for (int64_t n : {0, 1, 2, 5, 15}) EXPECT_EQ(RunOk(reference::Fib(), {{"n", I(n)}}).scalar<int64_t>(), reference::NativeFib(n)) << n;
}
TEST_P(ReferenceProgramsTest, Ack) {
  EXPECT_EQ(RunOk(reference::Ack(), {{"m", I(2)}, {"n", I(3)}}).scalar<int64_t>(), reference::NativeAck(2, 3));
  EXPECT_EQ(RunOk(reference::Ack(), {{"m", I(3)}, {"n", I(3)}}).scalar<int64_t>(), reference::NativeAck(3, 3));
}
TEST_P(ReferenceProgramsTest, Tak) {
  EXPECT_EQ(RunOk(reference::Tak(), {{"x", I(12)}, {"y", I(8)}, {"z", I(4)}}).scalar<int64_t>(),
            reference::NativeTak(12, 8, 4));
}
TEST_P(ReferenceProgramsTest, Fact) {
  EXPECT_EQ(RunOk(reference::Fact(), {{"n", I(20)}}).scalar<int64_t>(), reference::NativeFact(20));
}
TEST_P(ReferenceProgramsTest, EvenOdd) {
  for (int64_t n : {0, 1, 7, 100}) EXPECT_EQ(RunOk(reference::EvenOdd(), {{"n", I(n)}}).scalar<bool>(), n % 2 == 0) << n;
}
TEST_P(ReferenceProgramsTest, Exp) {
  EXPECT_DOUBLE_EQ(RunOk(reference::Exp(), {{"x", Tensor::Scalar<double>(1.5)}, {"n", I(7)}}).scalar<double>(),
                   reference::NativeExp(1.5, 7));
}
TEST_P(ReferenceProgramsTest, Primes) {
  EXPECT_EQ(RunOk(reference::Primes(), {{"n", I(100)}}).scalar<int64_t>(), reference::NativePrimes(100));
}
TEST_P(ReferenceProgramsTest, McCarthy91) {
  for (int64_t n : {5, 87, 100, 101, 150})
    EXPECT_EQ(RunOk(reference::McCarthy91(), {{"n", I(n)}}).scalar<int64_t>(), reference::NativeMcCarthy91(n)) << n;
}
TEST_P(ReferenceProgramsTest, Sum) {
  EXPECT_EQ(RunOk(reference::Sum(), {{"n", I(1000)}}).scalar<int64_t>(), reference::NativeSum(1000));
}
TEST_P(ReferenceProgramsTest, Yaghi) { EXPECT_EQ(RunOk(reference::Yaghi(), {}).scalar<int64_t>(), 11); }
TEST_P(ReferenceProgramsTest, WhileLoop) {
  EXPECT_EQ(RunOk(reference::WhileLoop(), {{"n", I(100)}}).scalar<int64_t>(), 100);
  EXPECT_EQ(RunOk(reference::WhileLoop(), {{"n", I(0)}}).scalar<int64_t>(), 0);
}
TEST_P(ReferenceProgramsTest, OpChain) {
  EXPECT_EQ(RunOk(reference::OpChain(50), {{"x", I(7)}}).scalar<int64_t>(), 57);
}
TEST_P(ReferenceProgramsTest, CallInWhile) {
  EXPECT_EQ(RunOk(reference::CallInWhile(), {{"n", I(25)}}).scalar<int64_t>(), reference::NativeCallInWhile(25));
}
TEST_P(ReferenceProgramsTest, WhileInFunction) {
  EXPECT_EQ(RunOk(reference::WhileInFunction(), {{"n", I(12)}}).scalar<int64_t>(),
            reference::NativeWhileInFunction(12));
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndWorkers, ReferenceProgramsTest,
    ::testing::Combine(::testing::Values(ExecutionMode::kStatic, ExecutionMode::kDynamic), ::testing::Values(1, 2, 8)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == ExecutionMode::kStatic ? "Static" : "Dynamic") +
             std::to_string(std::get<1>(info.param)) + "Workers";
    });

}  // namespace
}  // namespace tdf
