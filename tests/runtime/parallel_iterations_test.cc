// The parallel_iterations window (issue #3, item 4): at most P iterations of
// a loop are live at once, and a wider window lets independent iterations
// overlap. Asserted from RunStats.peak_live_frames and from the order of
// firings an observer records, never from timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::Outs;
using exec_test::ParseTag;
using exec_test::RecordingObserver;
using exec_test::RunResult;

constexpr int64_t kIterations = 60;
constexpr int kChain = 40;

// i = 0; while (i < n) { work = i + 1 + 1 ... (kChain Adds); i = i + 1 }.
// The counter's next value does not wait for `work`, so iteration k + 1 can
// start while iteration k is still working.
Graph IndependentIterations(int parallel_iterations) {
  GraphBuilder b;
  Output n = b.Placeholder("n", DType::kInt64);
  WhileOptions o;
  o.name = "window";
  o.parallel_iterations = parallel_iterations;
  Outs out = b.While(
      [&](const Outs& v) { return b.Less(v[0], n); },
      [&](const Outs& v) {
        Output next = b.Add(v[0], b.Const<int64_t>(1));
        Output work = v[0];
        for (int k = 0; k < kChain; ++k) work = b.Add(work, b.Const<int64_t>(1));
        return Outs{next};
      },
      {b.Const<int64_t>(0)}, o);
  b.Identity(out[0], "result");
  return Built(b);
}

// The most iterations of frame "window" whose firings interleave: an
// iteration is open from its first recorded firing to its last. Firings are
// recorded before the iteration can complete, and iteration k + P is created
// only after iteration k completed, so this never exceeds P.
int MaxOverlappingIterations(const std::vector<exec_test::Firing>& firings) {
  std::map<int64_t, std::pair<size_t, size_t>> span;  // iteration -> [first, last]
  for (size_t i = 0; i < firings.size(); ++i) {
    std::vector<std::string> labels = ParseTag(firings[i].tag);
    if (labels.size() != 2 || labels[1] != "window") continue;
    int64_t k = 0;
    EXPECT_TRUE(absl::SimpleAtoi(labels[0], &k)) << firings[i].tag;
    auto [it, fresh] = span.try_emplace(k, i, i);
    if (!fresh) it->second.second = i;
  }
  int best = 0;
  for (size_t i = 0; i < firings.size(); ++i) {
    int open = 0;
    for (const auto& [k, s] : span) open += (s.first <= i && i <= s.second) ? 1 : 0;
    best = std::max(best, open);
  }
  return best;
}

class ParallelIterationsTest : public ::testing::TestWithParam<int> {
 protected:
  struct Outcome {
    RunStats stats;
    int overlap = 0;
  };
  Outcome Run(int parallel_iterations) {
    RecordingObserver obs;
    SessionOptions o;
    o.num_workers = GetParam();
    o.exact_live_frames = true;  // the peak is asserted
    o.observer = &obs;
    auto s = MakeSession(IndependentIterations(parallel_iterations), o);
    Outcome out;
    if (s == nullptr) return out;
    EXPECT_EQ(RunResult(s.get(), {{"n", I(kIterations)}}, &out.stats).scalar<int64_t>(), kIterations);
    // Iterations 0..n and the root, whatever the window.
    EXPECT_EQ(out.stats.frames_created, kIterations + 2);
    out.overlap = MaxOverlappingIterations(obs.Firings());
    const std::string p = std::to_string(parallel_iterations);
    RecordProperty("overlap_p" + p, out.overlap);
    RecordProperty("peak_live_frames_p" + p, static_cast<int>(out.stats.peak_live_frames));
    return out;
  }
};

TEST_P(ParallelIterationsTest, OneIterationAtATime) {
  Outcome one = Run(1);
  // Firings of iteration k + 1 all come after those of iteration k.
  EXPECT_EQ(one.overlap, 1);
  // The root, the live iteration and, for a moment, the finished iteration
  // that is creating its deferred successor.
  EXPECT_LE(one.stats.peak_live_frames, 1 + 1 + 1);
}

TEST_P(ParallelIterationsTest, WindowBoundsLiveIterations) {
  for (int p : {2, 4, 10}) {
    Outcome o = Run(p);
    EXPECT_LE(o.overlap, p) << "P = " << p;
    EXPECT_LE(o.stats.peak_live_frames, p + 2) << "P = " << p;  // + root + one finishing iteration
  }
}

TEST_P(ParallelIterationsTest, WiderWindowOverlapsMoreIterations) {
  Outcome narrow = Run(1);
  Outcome wide = Run(10);
  EXPECT_GT(wide.overlap, narrow.overlap);
  EXPECT_GT(wide.stats.peak_live_frames, narrow.stats.peak_live_frames);
}

INSTANTIATE_TEST_SUITE_P(Workers, ParallelIterationsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
