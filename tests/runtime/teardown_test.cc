// The end of a deep run that fails (issue #26, item 7): the frames it leaves
// live are freed after it returns (runtime/frame_reclaimer.h), and still
// RunStats::live_frames_after_run counts them, the values they held are
// released by the time the Session is gone, and the runs that follow are
// unaffected. How fast such a run returns is measured in
// bench/deep_runs_bench.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/synchronization/notification.h"
#include "runtime/exec_test_util.h"
#include "runtime/frame_reclaimer.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::Outs;

constexpr DType kI64 = DType::kInt64;
constexpr DType kF32 = DType::kFloat32;
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
// Deep enough that the frames are freed after the run returns (more than
// the executor frees on the spot).
constexpr int64_t kDepth = 20'000;

// deep(d, v, n) = d == 0 ? v * (100 / count(n)) : v + deep(d - 1, v, n),
// where v is a float vector and count(n) a While counting to n: n =
// kForever spins at the bottom of the recursion, n = 0 divides by zero
// there, n > 0 gives v * (d + 100 / n). Every invocation above the bottom
// holds v in its Add's slot while it waits for the call's result.
Graph DeepHoldingATensor() {
  GraphBuilder b;
  (void)b.DefineFunction({"count", {{"n", kI64}}, {{"r", kI64}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return {f.While([&](const Outs& v) { return f.Less(v[0], n); },
                    [&](const Outs& v) { return Outs{f.Add(v[0], f.Const<int64_t>(1))}; },
                    {f.Const<int64_t>(0)})[0]};
  });
  (void)b.DefineFunction(
      {"deep", {{"d", kI64}, {"v", kF32}, {"n", kI64}}, {{"r", kF32}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
        Output d = a[0], v = a[1], n = a[2];
        return f.Cond(
            f.Equal(d, f.Const<int64_t>(0)),
            [&] { return Outs{f.Mul(v, f.Cast(f.Div(f.Const<int64_t>(100), f.Call("count", {n})[0]), kF32))}; },
            [&] { return Outs{f.Add(v, f.Call("deep", {f.Sub(d, f.Const<int64_t>(1)), v, n})[0])}; });
      });
  Output d = b.Placeholder("d", kI64);
  Output v = b.Placeholder("v", kF32);
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("deep", {d, v, n})[0], "result");
  return Built(b);
}

Tensor Ones() { return Tensor::Vector<float>(std::vector<float>(256, 1.0f)); }

class TeardownTest : public ::testing::TestWithParam<int> {
 protected:
  SessionOptions Options() const {
    SessionOptions o;
    o.num_workers = GetParam();
    return o;
  }
};

absl::StatusOr<std::vector<Tensor>> RunDeep(Session* s, const RunOptions& ro, const Tensor& v, int64_t d, int64_t n,
                                            RunStats* stats) {
  return s->Run(ro, {{"d", I(d)}, {"v", v}, {"n", I(n)}}, {"result"}, {}, stats);
}

// A run cut by its deadline, or failed by an error, deep in a recursion
// reports the frames it reclaimed, and a run right after it (same session,
// frames of the same sizes) gets the right answer and leaves nothing live.
TEST_P(TeardownTest, RunsAfterADeepFailedRunAreUnaffected) {
  auto s = MakeSession(DeepHoldingATensor(), Options());
  ASSERT_NE(s, nullptr);
  const Tensor v = Ones();
  RunOptions cut;
  cut.deadline = absl::Milliseconds(100);
  for (int round = 0; round < 4; ++round) {
    const bool by_deadline = round % 2 == 0;
    SCOPED_TRACE(absl::StrCat("round ", round, by_deadline ? ", deadline" : ", division by zero"));
    RunStats failed;
    absl::StatusOr<std::vector<Tensor>> out =
        RunDeep(s.get(), by_deadline ? cut : RunOptions(), v, kDepth, by_deadline ? kForever : 0, &failed);
    ASSERT_FALSE(out.ok());
    if (by_deadline) {
      EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
      // Cut in its loop, the recursion's frames were live.
      if (failed.max_tag_depth > kDepth) EXPECT_GE(failed.live_frames_after_run, kDepth);
    } else {
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
      EXPECT_GE(failed.live_frames_after_run, kDepth);
    }
    RunStats next;
    out = RunDeep(s.get(), RunOptions(), v, kDepth, 4, &next);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at(0).data<float>()[255], static_cast<float>(kDepth + 25));
    EXPECT_EQ(next.live_frames_after_run, 0);
  }
}

// Frames freed after their run returned still point into the session's
// compiled graph and hold the run's values: the Session's destructor waits
// until they are freed. The reclaimer is held up here, so the destructor
// must still be waiting when the test looks.
TEST_P(TeardownTest, DestroyingTheSessionWaitsForItsFramesToBeFreed) {
  const Tensor v = Ones();
  auto s = MakeSession(DeepHoldingATensor(), Options());
  ASSERT_NE(s, nullptr);
  // Declared in this order so that, on any way out of the test, the gate
  // opens before `blocker` waits for the job it holds up.
  absl::Notification gate, gate_entered;
  runtime::FrameReclaimer::Owner blocker;
  auto open_gate = absl::MakeCleanup([&] {
    if (!gate.HasBeenNotified()) gate.Notify();
  });
  ASSERT_TRUE(runtime::FrameReclaimer::Submit(&blocker, 0, [&] {
    gate_entered.Notify();
    gate.WaitForNotification();
  }));
  gate_entered.WaitForNotification();
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> out = RunDeep(s.get(), RunOptions(), v, kDepth, 0, &stats);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  ASSERT_GE(stats.live_frames_after_run, kDepth);
  EXPECT_FALSE(v.RefCountIsOne());  // the failed run's frames still hold it
  absl::Notification destroyed;
  std::thread destroyer([&] {
    s.reset();
    destroyed.Notify();
  });
  EXPECT_FALSE(destroyed.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  gate.Notify();
  destroyer.join();
  EXPECT_TRUE(v.RefCountIsOne());
}

// Past the reclaimer's backlog a failed run frees its own frames before it
// returns, as it did before there was a reclaimer: failed runs that come
// faster than the reclaimer frees do not pile up memory.
TEST_P(TeardownTest, AFullBacklogFreesOnTheSpot) {
  const Tensor v = Ones();
  auto s = MakeSession(DeepHoldingATensor(), Options());
  ASSERT_NE(s, nullptr);
  absl::Notification gate, gate_entered;
  runtime::FrameReclaimer::Owner blocker;
  auto open_gate = absl::MakeCleanup([&] {
    if (!gate.HasBeenNotified()) gate.Notify();
  });
  // A job that stands for a full backlog and holds the reclaimer up.
  ASSERT_TRUE(runtime::FrameReclaimer::Submit(&blocker, runtime::FrameReclaimer::kMaxBacklogFrames, [&] {
    gate_entered.Notify();
    gate.WaitForNotification();
  }));
  gate_entered.WaitForNotification();
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> out = RunDeep(s.get(), RunOptions(), v, kDepth, 0, &stats);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_GE(stats.live_frames_after_run, kDepth);
  EXPECT_TRUE(v.RefCountIsOne());  // freed before the run returned
  s.reset();                       // nothing to wait for
}

INSTANTIATE_TEST_SUITE_P(Workers, TeardownTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
