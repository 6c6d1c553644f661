// Per-run settings (issue #26, item 6): RunOptions replaces the session's
// deadline, node statistics, trace and observer for one run, and leaves the
// session's own for the runs that do not set them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
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
using exec_test::Outs;
using exec_test::RecordingObserver;
using exec_test::RunResult;
using ::testing::HasSubstr;

constexpr DType kI64 = DType::kInt64;
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

// result = d + (iterations of a While counting from 0 to n), computed as
// deep(d, n) = d == 0 ? count(n) : 1 + deep(d - 1, n): d live frames, then a
// loop that with n = kForever never ends in practice.
Graph DeepThenCount() {
  GraphBuilder b;
  (void)b.DefineFunction({"count", {{"n", kI64}}, {{"r", kI64}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return {f.While([&](const Outs& v) { return f.Less(v[0], n); },
                    [&](const Outs& v) { return Outs{f.Add(v[0], f.Const<int64_t>(1))}; },
                    {f.Const<int64_t>(0)})[0]};
  });
  (void)b.DefineFunction({"deep", {{"d", kI64}, {"n", kI64}}, {{"r", kI64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output d = a[0], n = a[1];
                           return f.Cond(
                               f.Equal(d, f.Const<int64_t>(0)), [&] { return f.Call("count", {n}); },
                               [&] {
                                 return Outs{f.Add(f.Const<int64_t>(1),
                                                   f.Call("deep", {f.Sub(d, f.Const<int64_t>(1)), n})[0])};
                               });
                         });
  Output d = b.Placeholder("d", kI64);
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("deep", {d, n})[0], "result");
  return Built(b);
}

class RunOptionsTest : public ::testing::TestWithParam<int> {
 protected:
  SessionOptions Options() const {
    SessionOptions o;
    o.num_workers = GetParam();
    return o;
  }
};

// Cancels `token` if still alive after `limit`: a run that ignored its
// deadline then fails with CANCELLED instead of hanging the test.
class Watchdog {
 public:
  Watchdog(CancellationToken* token, absl::Duration limit)
      : thread_([this, token, limit] {
          if (!done_.WaitForNotificationWithTimeout(limit)) token->Cancel();
        }) {}
  ~Watchdog() {
    done_.Notify();
    thread_.join();
  }

 private:
  absl::Notification done_;
  std::thread thread_;
};

constexpr absl::Duration kHang = absl::Seconds(60);

absl::StatusOr<std::vector<Tensor>> RunDeep(Session* s, const RunOptions& ro, int64_t d, int64_t n,
                                            RunStats* stats = nullptr) {
  return s->Run(ro, {{"d", I(d)}, {"n", I(n)}}, {"result"}, {}, stats);
}

TEST_P(RunOptionsTest, ADeadlineForOneRunCutsThatRunOnly) {
  auto s = MakeSession(DeepThenCount(), Options());  // no session deadline
  ASSERT_NE(s, nullptr);
  CancellationToken hung;
  Watchdog watchdog(&hung, kHang);
  RunOptions quick;
  quick.deadline = absl::Milliseconds(50);
  quick.cancel = &hung;
  for (int64_t depth : {0, 1000}) {
    SCOPED_TRACE(absl::StrCat("depth ", depth));
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> out = RunDeep(s.get(), quick, depth, kForever, &stats);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
    // Cut in its loop, the run reclaimed the recursion's frames.
    if (stats.max_tag_depth > depth) EXPECT_GE(stats.live_frames_after_run, depth);
    // The next run, without a deadline of its own, has none: it finishes.
    RunStats next;
    out = RunDeep(s.get(), RunOptions(), depth, 1000, &next);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at(0).scalar<int64_t>(), depth + 1000);
    EXPECT_EQ(next.live_frames_after_run, 0);
    // So does a run of the old signature.
    EXPECT_EQ(RunResult(s.get(), {{"d", I(depth)}, {"n", I(10)}}).scalar<int64_t>(), depth + 10);
  }
}

TEST_P(RunOptionsTest, ARunsDeadlineReplacesTheSessions) {
  SessionOptions o = Options();
  o.deadline = absl::ZeroDuration();  // every run of the session fails before it starts...
  auto s = MakeSession(DeepThenCount(), o);
  ASSERT_NE(s, nullptr);
  absl::StatusOr<std::vector<Tensor>> out = RunDeep(s.get(), RunOptions(), 3, 5);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("SessionOptions::deadline"));
  // ...except one that lifts it,
  RunOptions unlimited;
  unlimited.deadline = absl::InfiniteDuration();
  out = RunDeep(s.get(), unlimited, 3, 5);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at(0).scalar<int64_t>(), 8);
  // ...or gives a deadline of its own.
  RunOptions generous;
  generous.deadline = absl::Hours(1);
  out = RunDeep(s.get(), generous, 3, 5);
  ASSERT_TRUE(out.ok()) << out.status();
  // A run's own deadline that has already passed names itself.
  auto unlimited_session = MakeSession(DeepThenCount(), Options());
  ASSERT_NE(unlimited_session, nullptr);
  RunOptions passed;
  passed.deadline = absl::Milliseconds(-1);
  out = RunDeep(unlimited_session.get(), passed, 3, 5);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("RunOptions::deadline"));
}

// Two runs in flight at once on one session: the one with a deadline is cut
// by it, the other (no deadline) keeps going until it is cancelled.
TEST_P(RunOptionsTest, ConcurrentRunsKeepTheirOwnDeadlines) {
  auto s = MakeSession(DeepThenCount(), Options());
  ASSERT_NE(s, nullptr);
  CancellationToken token;
  RunOptions cancelled_later;
  cancelled_later.cancel = &token;
  absl::Status long_status;
  std::thread long_run([&] { long_status = RunDeep(s.get(), cancelled_later, 100, kForever).status(); });
  CancellationToken hung;
  absl::Status quick_status;
  {
    Watchdog watchdog(&hung, kHang);
    RunOptions quick;
    quick.deadline = absl::Milliseconds(50);
    quick.cancel = &hung;
    quick_status = RunDeep(s.get(), quick, 100, kForever).status();
  }
  EXPECT_EQ(quick_status.code(), absl::StatusCode::kDeadlineExceeded) << quick_status;
  token.Cancel();
  long_run.join();
  EXPECT_EQ(long_status.code(), absl::StatusCode::kCancelled) << long_status;
}

TEST_P(RunOptionsTest, ACancelTokenInRunOptionsCancels) {
  auto s = MakeSession(DeepThenCount(), Options());
  ASSERT_NE(s, nullptr);
  CancellationToken token;
  token.Cancel();
  RunOptions ro;
  ro.cancel = &token;
  EXPECT_EQ(RunDeep(s.get(), ro, 3, 5).status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(RunDeep(s.get(), RunOptions(), 3, 5).ok());
}

TEST_P(RunOptionsTest, NodeStatsPerRun) {
  for (bool session_collects : {false, true}) {
    SCOPED_TRACE(absl::StrCat("session collect_node_stats ", session_collects));
    SessionOptions o = Options();
    o.collect_node_stats = session_collects;
    auto s = MakeSession(reference::Fib(), o);
    ASSERT_NE(s, nullptr);
    RunOptions ro;
    ro.collect_node_stats = !session_collects;
    RunStats per_run, by_session;
    ASSERT_TRUE(s->Run(ro, {{"n", I(10)}}, {"result"}, {}, &per_run).ok());
    ASSERT_TRUE(s->Run({{"n", I(10)}}, {"result"}, {}, &by_session).ok());
    RunStats& with = session_collects ? by_session : per_run;
    RunStats& without = session_collects ? per_run : by_session;
    EXPECT_TRUE(without.firings_by_node.empty());
    ASSERT_FALSE(with.firings_by_node.empty());
    int64_t live = 0, dead = 0;
    for (const auto& [node, counts] : with.firings_by_node) {
      live += counts.first;
      dead += counts.second;
    }
    EXPECT_EQ(live, with.live_firings);
    EXPECT_EQ(dead, with.dead_firings);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

TEST_P(RunOptionsTest, TracePerRun) {
  const std::string dir = ::testing::TempDir();
  const std::string session_trace = absl::StrCat(dir, "run_options_session_", GetParam(), ".json");
  const std::string run_trace = absl::StrCat(dir, "run_options_run_", GetParam(), ".json");
  std::remove(session_trace.c_str());
  std::remove(run_trace.c_str());
  SessionOptions o = Options();
  o.trace_path = session_trace;
  auto s = MakeSession(reference::Fib(), o);
  ASSERT_NE(s, nullptr);
  // A run's own trace path: the trace goes there, not to the session's.
  RunOptions traced;
  traced.trace_path = run_trace;
  ASSERT_TRUE(s->Run(traced, {{"n", I(5)}}, {"result"}, {}).ok());
  EXPECT_THAT(ReadFile(run_trace), HasSubstr("\"traceEvents\""));
  EXPECT_FALSE(Exists(session_trace));
  // "": no trace for this run.
  std::remove(run_trace.c_str());
  RunOptions untraced;
  untraced.trace_path = "";
  ASSERT_TRUE(s->Run(untraced, {{"n", I(5)}}, {"result"}, {}).ok());
  EXPECT_FALSE(Exists(session_trace));
  EXPECT_FALSE(Exists(run_trace));
  // Unset: the session's.
  ASSERT_TRUE(s->Run(RunOptions(), {{"n", I(5)}}, {"result"}, {}).ok());
  EXPECT_THAT(ReadFile(session_trace), HasSubstr("\"traceEvents\""));
  std::remove(session_trace.c_str());
  // A session without a trace, traced for one run.
  auto plain = MakeSession(reference::Fib(), Options());
  ASSERT_NE(plain, nullptr);
  ASSERT_TRUE(plain->Run(traced, {{"n", I(5)}}, {"result"}, {}).ok());
  EXPECT_THAT(ReadFile(run_trace), HasSubstr("fib/"));
  std::remove(run_trace.c_str());
}

TEST_P(RunOptionsTest, ObserverPerRun) {
  RecordingObserver session_observer, run_observer;
  SessionOptions o = Options();
  o.observer = &session_observer;
  auto s = MakeSession(reference::Fib(), o);
  ASSERT_NE(s, nullptr);
  RunOptions observed;
  observed.observer = &run_observer;
  RunStats stats;
  ASSERT_TRUE(s->Run(observed, {{"n", I(6)}}, {"result"}, {}, &stats).ok());
  EXPECT_EQ(static_cast<int64_t>(run_observer.Firings().size()), stats.firings);
  EXPECT_TRUE(session_observer.Firings().empty());
  run_observer.Clear();
  RunOptions unobserved;
  unobserved.observer = nullptr;
  ASSERT_TRUE(s->Run(unobserved, {{"n", I(6)}}, {"result"}, {}).ok());
  EXPECT_TRUE(session_observer.Firings().empty());
  EXPECT_TRUE(run_observer.Firings().empty());
  ASSERT_TRUE(s->Run({{"n", I(6)}}, {"result"}, {}, &stats).ok());
  EXPECT_EQ(static_cast<int64_t>(session_observer.Firings().size()), stats.firings);
  EXPECT_TRUE(run_observer.Firings().empty());
}

INSTANTIATE_TEST_SUITE_P(Workers, RunOptionsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
