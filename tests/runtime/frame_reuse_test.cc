// A worker reuses the frames of finished invocations (Worker::frame_cache_)
// and restores only part of a frame's image: the counters, the child slots,
// the arguments and the folded constants. These programs fire nodes that
// move a folded constant out of its slot, in every invocation of a tree
// recursion whose frames are reused many times per run: each reused frame
// must start as a fresh one would.
#include <gtest/gtest.h>

#include <cstdint>

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

// g(n) = (n <= 1 ? 0 : g(n-1) + g(n-2)) + seven + pick, where seven is an
// Identity of a constant (it moves the constant out of its slot) and pick is
// a Cond whose Switch routes a constant (moved out of its slot too).
int64_t NativeG(int64_t n) {
  const int64_t pick = n > 5 ? 3 : 4;
  return (n <= 1 ? 0 : NativeG(n - 1) + NativeG(n - 2)) + 7 + pick;
}

int64_t NativeCalls(int64_t n) { return n <= 1 ? 1 : 1 + NativeCalls(n - 1) + NativeCalls(n - 2); }

Graph MovesConstants() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"g", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output n = args[0];
        Output seven = f.Identity(f.Const<int64_t>(7));
        Output three = f.Const<int64_t>(3);
        Output pick = f.Cond(
            f.Greater(n, f.Const<int64_t>(5)), [&] { return Outs{three}; },
            [&] { return Outs{f.Add(three, f.Const<int64_t>(1))}; })[0];
        Output rest = f.Cond(
            f.LessEqual(n, f.Const<int64_t>(1)), [&] { return Outs{f.Const<int64_t>(0)}; },
            [&] {
              return Outs{f.Add(f.Call("g", {f.Sub(n, f.Const<int64_t>(1))})[0],
                                f.Call("g", {f.Sub(n, f.Const<int64_t>(2))})[0])};
            })[0];
        return Outs{f.Add(f.Add(rest, seven), pick)};
      });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("g", {n})[0], "result");
  return Built(b);
}

class FrameReuseTest : public ::testing::TestWithParam<int> {};

TEST_P(FrameReuseTest, ReusedFramesStartAsFreshOnes) {
  constexpr int64_t kN = 16;
  // The fast path (the lean firings that move values out of slots) and the
  // general one (per-node counts).
  for (bool general : {false, true}) {
    SCOPED_TRACE(general ? "general path" : "fast path");
    SessionOptions opts;
    opts.num_workers = GetParam();
    opts.collect_node_stats = general;
    auto session = MakeSession(MovesConstants(), opts);
    ASSERT_NE(session, nullptr);
    // Several runs of one session: frames cached in one run are gone at its
    // end, and the next starts from the pool.
    for (int run = 0; run < 3; ++run) {
      RunStats stats;
      const Tensor out = RunResult(session.get(), {{"n", I(kN)}}, &stats);
      ASSERT_TRUE(out.valid());
      EXPECT_EQ(out.scalar<int64_t>(), NativeG(kN));
      EXPECT_EQ(stats.frames_created, NativeCalls(kN) + 1);  // + the root
      EXPECT_EQ(stats.live_frames_after_run, 0);
    }
  }
}

// sum(n) finishes n frames in one chain: more than a worker keeps for reuse
// (kMaxCachedFrames = 4096), so the cache spills to the pool mid-chain,
// several times, and what it still holds goes back when the run ends
// (ASan reports any frame lost on the way).
TEST_P(FrameReuseTest, LongChainsOfCompletionsSpillToThePool) {
  constexpr int64_t kN = 3 * 4096 + 5;
  SessionOptions opts;
  opts.num_workers = GetParam();
  auto session = MakeSession(reference::Sum(), opts);
  ASSERT_NE(session, nullptr);
  for (int run = 0; run < 3; ++run) {
    RunStats stats;
    const Tensor out = RunResult(session.get(), {{"n", I(kN)}}, &stats);
    ASSERT_TRUE(out.valid());
    EXPECT_EQ(out.scalar<int64_t>(), reference::NativeSum(kN));
    EXPECT_EQ(stats.live_frames_after_run, 0);
  }
}

// With several workers, an offered task takes the worker (and its cached
// frames) that an earlier task on its thread parked (RunState::
// parked_workers): thieves start on frames that earlier thefts kept, some
// of them with constants moved out. Every run fires exactly what one
// worker fires and frees every frame, parked workers' caches included.
TEST_P(FrameReuseTest, ParkedWorkersStartTheirNextTheftClean) {
  constexpr int64_t kN = 20;
  auto one = MakeSession(MovesConstants(), SessionOptions{});
  ASSERT_NE(one, nullptr);
  RunStats alone;
  ASSERT_TRUE(RunResult(one.get(), {{"n", I(kN)}}, &alone).valid());
  SessionOptions opts;
  opts.num_workers = GetParam();
  auto session = MakeSession(MovesConstants(), opts);
  ASSERT_NE(session, nullptr);
  int64_t offers = 0;
  for (int run = 0; run < 20; ++run) {
    RunStats stats;
    const Tensor out = RunResult(session.get(), {{"n", I(kN)}}, &stats);
    ASSERT_TRUE(out.valid());
    EXPECT_EQ(out.scalar<int64_t>(), NativeG(kN));
    EXPECT_EQ(stats.firings, alone.firings);
    EXPECT_EQ(stats.frames_created, alone.frames_created);
    EXPECT_EQ(stats.live_frames_after_run, 0);
    offers += stats.offers;
  }
  // A worker offers surplus work whenever another is not in its loop.
  if (GetParam() == 1) {
    EXPECT_EQ(offers, 0);
  } else {
    EXPECT_GT(offers, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, FrameReuseTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
