// Variables across runs, atomic AssignAdd under concurrent runs, and several
// runs in flight on one session (issue #3, items 10-11).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::Outs;
using exec_test::RunResult;

constexpr DType kI64 = DType::kInt64;

// result = AssignAdd(counter, delta): the counter's value after the add.
Graph Counter() {
  GraphBuilder b;
  Output v = b.Variable("counter", I(0));
  Output delta = b.Placeholder("delta", kI64);
  b.Identity(b.AssignAdd(v, delta), "result");
  return Built(b);
}

// Adds 1 to `counter` in each of n loop iterations (concurrent iterations
// of one run update the variable too); result = n.
Graph CounterInLoop() {
  GraphBuilder b;
  Output v = b.Variable("counter", I(0));
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While([&](const Outs& x) { return b.Less(x[0], n); },
                     [&](const Outs& x) {
                       Output bumped = b.AssignAdd(v, b.Const<int64_t>(1));
                       // Keep the update on the loop's dataflow path: i + 0 * bumped.
                       return Outs{b.Add(b.Add(x[0], b.Const<int64_t>(1)), b.Mul(bumped, b.Const<int64_t>(0)))};
                     },
                     {b.Const<int64_t>(0)});
  b.Identity(out[0], "result");
  return Built(b);
}

class StateTest : public ::testing::TestWithParam<int> {
 protected:
  SessionOptions Options() const {
    SessionOptions o;
    o.num_workers = GetParam();
    return o;
  }
};

TEST_P(StateTest, VariablesPersistAcrossRuns) {
  auto s = MakeSession(Counter(), Options());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(RunResult(s.get(), {{"delta", I(5)}}).scalar<int64_t>(), 5);
  EXPECT_EQ(RunResult(s.get(), {{"delta", I(5)}}).scalar<int64_t>(), 10);
  EXPECT_EQ(RunResult(s.get(), {{"delta", I(-2)}}).scalar<int64_t>(), 8);
  absl::StatusOr<Tensor> v = s->ReadVariable("counter");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->scalar<int64_t>(), 8);
  ASSERT_TRUE(s->AssignVariable("counter", I(100)).ok());
  EXPECT_EQ(RunResult(s.get(), {{"delta", I(1)}}).scalar<int64_t>(), 101);
  EXPECT_FALSE(s->AssignVariable("counter", Tensor::Scalar<double>(1.0)).ok());
  EXPECT_EQ(s->ReadVariable("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StateTest, ConcurrentAssignAddIsAtomic) {
  auto s = MakeSession(Counter(), Options());
  ASSERT_NE(s, nullptr);
  constexpr int kThreads = 4, kRuns = 200;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        absl::StatusOr<std::vector<Tensor>> out = s->Run({{"delta", I(1)}}, {"result"});
        seen[t].push_back(out.ok() ? out->at(0).scalar<int64_t>() : -1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Each add observed a distinct value: no update was lost or duplicated.
  std::vector<int64_t> all;
  for (const auto& v : seen) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want(kThreads * kRuns);
  for (int i = 0; i < kThreads * kRuns; ++i) want[i] = i + 1;
  EXPECT_EQ(all, want);
  absl::StatusOr<Tensor> v = s->ReadVariable("counter");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->scalar<int64_t>(), kThreads * kRuns);
}

TEST_P(StateTest, ConcurrentAssignAddInsideLoops) {
  auto s = MakeSession(CounterInLoop(), Options());
  ASSERT_NE(s, nullptr);
  constexpr int kThreads = 4, kRuns = 20, kN = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRuns; ++r) {
        absl::StatusOr<std::vector<Tensor>> out = s->Run({{"n", I(kN)}}, {"result"});
        if (!out.ok() || out->at(0).scalar<int64_t>() != kN) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  absl::StatusOr<Tensor> v = s->ReadVariable("counter");
  ASSERT_TRUE(v.ok()) << v.status();
  // The exiting iteration's AssignAdd is dead and adds nothing.
  EXPECT_EQ(v->scalar<int64_t>(), kThreads * kRuns * kN);
}

TEST_P(StateTest, RunsInFlightFromSeveralThreads) {
  auto fib = MakeSession(reference::Fib(), Options());
  auto loops = MakeSession(reference::CallInWhile(), Options());
  ASSERT_TRUE(fib != nullptr && loops != nullptr);
  constexpr int kThreads = 4, kRuns = 5;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0}, leaked{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        const int64_t n = 12 + t + r;  // different shapes of recursion at once
        RunStats stats;
        absl::StatusOr<std::vector<Tensor>> out = fib->Run({{"n", I(n)}}, {"result"}, {}, &stats);
        if (!out.ok() || out->at(0).scalar<int64_t>() != reference::NativeFib(n)) wrong.fetch_add(1);
        if (stats.live_frames_after_run != 0) leaked.fetch_add(1);
        out = loops->Run({{"n", I(n)}}, {"result"}, {}, &stats);
        if (!out.ok() || out->at(0).scalar<int64_t>() != reference::NativeCallInWhile(n)) wrong.fetch_add(1);
        if (stats.live_frames_after_run != 0) leaked.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(leaked.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Workers, StateTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
