// What the frame caches keep (issue #26, item 8; the policy is written on
// ~Session in tdf/session.h): all threads' pools together stay within
// kThreadPoolsMaxBytes however many threads ran deep recursions, and the
// last Session to go empties the process-wide depot. How much RSS that gives
// back is measured in bench/deep_runs_bench.cc (BM_MemoryAfterConcurrentDeepRuns).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "runtime/exec_test_util.h"
#include "runtime/frame.h"
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

// wide(d) = d == 0 ? 0 : ((d + 1 + ... + 1) - d) + wide(d - 1), a chain of
// kChain Adds per call (wide(d) = kChain * d): frames of a few KiB, among
// the largest the pools keep by size class, so that a few thousand of them
// per thread are tens of MB.
constexpr int kChain = 120;
Graph Wide() {
  GraphBuilder b;
  (void)b.DefineFunction({"wide", {{"d", kI64}}, {{"r", kI64}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
    Output d = a[0];
    return f.Cond(
        f.Equal(d, f.Const<int64_t>(0)), [&] { return Outs{f.Const<int64_t>(0)}; },
        [&] {
          Output x = d;
          for (int i = 0; i < kChain; ++i) x = f.Add(x, f.Const<int64_t>(1));
          return Outs{f.Add(f.Sub(x, d), f.Call("wide", {f.Sub(d, f.Const<int64_t>(1))})[0])};
        });
  });
  Output d = b.Placeholder("d", kI64);
  b.Identity(b.Call("wide", {d})[0], "result");
  return Built(b);
}

// Each of kThreads threads runs a deep recursion on a session of its own
// (so the run's frames end in that thread's pool) and stays alive, pool and
// all, until the caches are read.
TEST(FrameMemory, ThreadPoolsTogetherStayWithinTheirBound) {
  constexpr int kThreads = 8;
  constexpr int64_t kDepth = 6000;  // more frames than a thread keeps of a size
  const Graph graph = Wide();
  absl::Barrier* ran = new absl::Barrier(kThreads + 1);
  absl::Barrier* read = new absl::Barrier(kThreads + 1);
  std::vector<std::thread> threads;
  std::vector<int64_t> results(kThreads, -1);
  // The sessions outlive the threads' reads: the last one to go would empty
  // the caches.
  std::vector<std::unique_ptr<Session>> sessions;
  for (int t = 0; t < kThreads; ++t) sessions.push_back(MakeSession(graph, SessionOptions()));
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (sessions[t] != nullptr) {
        absl::StatusOr<std::vector<Tensor>> out = sessions[t]->Run({{"d", I(kDepth)}}, {"result"});
        if (out.ok()) results[t] = out->at(0).scalar<int64_t>();
      }
      if (ran->Block()) delete ran;
      if (read->Block()) delete read;
    });
  }
  if (ran->Block()) delete ran;
  const runtime::CachedFrameBytes cached = runtime::CachedFrameMemory();
  if (read->Block()) delete read;
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results[t], kChain * kDepth) << "thread " << t;
  // Each thread publishes its pool's size to within 1 MiB.
  EXPECT_LE(cached.thread_pools, runtime::kThreadPoolsMaxBytes + kThreads * (int64_t{1} << 20));
  EXPECT_GT(cached.thread_pools + cached.depot, 0);
}

// The frames a deep run leaves in the depot are freed when the last Session
// of the process is destroyed; while a session lives they stay for its runs.
TEST(FrameMemory, TheLastSessionToGoEmptiesTheDepot) {
  auto s = MakeSession(reference::Sum(), SessionOptions());
  ASSERT_NE(s, nullptr);
  constexpr int64_t kDepth = 50'000;  // many more frames than a thread keeps
  EXPECT_EQ(RunResult(s.get(), {{"n", I(kDepth)}}).scalar<int64_t>(), reference::NativeSum(kDepth));
  EXPECT_GT(runtime::CachedFrameMemory().depot, 0);
  // Another session does not make the first one's frames go.
  auto other = MakeSession(reference::Sum(), SessionOptions());
  ASSERT_NE(other, nullptr);
  other.reset();
  EXPECT_GT(runtime::CachedFrameMemory().depot, 0);
  // A run on the session still there reuses them.
  EXPECT_EQ(RunResult(s.get(), {{"n", I(kDepth)}}).scalar<int64_t>(), reference::NativeSum(kDepth));
  s.reset();
  EXPECT_EQ(runtime::CachedFrameMemory().depot, 0);
}

}  // namespace
}  // namespace tdf
