// RunStats and the Chrome trace (issue #3, items 12-13): the counts add up,
// fib's frame counts follow its call tree, and the trace has one event per
// firing carrying node, op, worker and tag.
#include <algorithm>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/exec_test_util.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::I;
using exec_test::MakeSession;
using exec_test::RunResult;

class StatsTest : public ::testing::TestWithParam<int> {};

int64_t Sum(const std::map<std::string, std::pair<int64_t, int64_t>>& m, bool dead) {
  int64_t s = 0;
  for (const auto& [name, c] : m) s += dead ? c.second : c.first;
  return s;
}

TEST_P(StatsTest, CountsAddUp) {
  SessionOptions o;
  o.num_workers = GetParam();
  o.collect_node_stats = true;
  auto s = MakeSession(reference::CallInWhile(), o);
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"n", I(20)}}, &stats).scalar<int64_t>(), reference::NativeCallInWhile(20));
  EXPECT_EQ(stats.firings, stats.live_firings + stats.dead_firings);
  EXPECT_GT(stats.dead_firings, 0);
  EXPECT_EQ(Sum(stats.firings_by_op, false), stats.live_firings);
  EXPECT_EQ(Sum(stats.firings_by_op, true), stats.dead_firings);
  EXPECT_EQ(Sum(stats.firings_by_node, false), stats.live_firings);
  EXPECT_EQ(Sum(stats.firings_by_node, true), stats.dead_firings);
  // Every node in the stats exists in the executable graph, and its op
  // totals agree with firings_by_op.
  std::map<std::string, std::pair<int64_t, int64_t>> by_op;
  for (const auto& [name, c] : stats.firings_by_node) {
    const NodeDef* def = s->executable_graph().FindNode(name);
    ASSERT_NE(def, nullptr) << name;
    by_op[def->op].first += c.first;
    by_op[def->op].second += c.second;
  }
  EXPECT_EQ(by_op, stats.firings_by_op);
  EXPECT_EQ(stats.num_workers, GetParam());
  EXPECT_EQ(stats.instantiations, 0);  // static mode copies no bodies

  // Without collect_node_stats the per-node map stays empty.
  SessionOptions plain;
  plain.num_workers = GetParam();
  auto p = MakeSession(reference::CallInWhile(), plain);
  ASSERT_NE(p, nullptr);
  RunStats ps;
  EXPECT_EQ(RunResult(p.get(), {{"n", I(20)}}, &ps).scalar<int64_t>(), reference::NativeCallInWhile(20));
  EXPECT_TRUE(ps.firings_by_node.empty());
  EXPECT_EQ(ps.firings_by_op, stats.firings_by_op);
}

TEST_P(StatsTest, OffersOnlyWithOtherWorkers) {
  // fib(16) leaves the first worker more ready nodes than it can run at
  // once: with an idle worker beside it, it offers some at once (the
  // offer interval starts at one firing); alone, never.
  SessionOptions o;
  o.num_workers = GetParam();
  auto s = MakeSession(reference::Fib(), o);
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"n", I(16)}}, &stats).scalar<int64_t>(), reference::NativeFib(16));
  if (GetParam() == 1) {
    EXPECT_EQ(stats.offers, 0);
  } else {
    EXPECT_GE(stats.offers, 1);
  }
}

TEST_P(StatsTest, OnlyFramesOtherWorkersCanReachAreShared) {
  // Frames stay private to the worker that created them (plain counters)
  // unless work in or below them is offered: alone, none is shared; with
  // helpers, tak's invocations of three-argument sites start when their
  // last argument arrives (FireCallWhenComplete), so sharing stays with the
  // ancestors of offered work instead of spreading through the recursion.
  SessionOptions o;
  o.num_workers = GetParam();
  auto s = MakeSession(reference::Tak(), o);
  ASSERT_NE(s, nullptr);
  for (int repeat = 0; repeat < 5; ++repeat) {
    RunStats stats;
    EXPECT_EQ(RunResult(s.get(), {{"x", I(14)}, {"y", I(8)}, {"z", I(2)}}, &stats).scalar<int64_t>(),
              reference::NativeTak(14, 8, 2));
    EXPECT_EQ(stats.live_frames_after_run, 0);
    if (stats.offers == 0) {
      EXPECT_EQ(stats.shared_frames, 0);
    } else {
      EXPECT_GE(stats.shared_frames, 1);
      EXPECT_LT(stats.shared_frames, stats.frames_created / 4)
          << stats.offers << " offers, " << stats.frames_created << " frames";
    }
  }
}

TEST_P(StatsTest, PrivateFramesLoseNoCountUnderStealing) {
  // Private frames count with plain loads and stores while other workers
  // run; a frame another worker could still reach while counted that way
  // would lose updates: a hang (caught by the deadline), a wrong answer, or
  // frames and firings that differ from the 1-worker run. Programs whose
  // call sites take several arguments (tak, ack) also take the path that
  // creates an invocation at its last argument in shared frames.
  struct Program {
    Graph graph;
    exec_test::Feeds feeds;
    int64_t answer;
    // Whether helpers must have shared frames: ack has no parallelism, and
    // its ready work (an invocation waiting for its second argument) is
    // not offered, so it may never share one.
    bool shares;
  };
  std::vector<Program> programs;
  programs.push_back({reference::Ack(), {{"m", I(2)}, {"n", I(40)}}, reference::NativeAck(2, 40), false});
  programs.push_back(
      {reference::Tak(), {{"x", I(14)}, {"y", I(8)}, {"z", I(2)}}, reference::NativeTak(14, 8, 2), true});
  programs.push_back({reference::Fib(), {{"n", I(17)}}, reference::NativeFib(17), true});
  for (Program& p : programs) {
    SessionOptions one;
    one.num_workers = 1;
    auto alone = MakeSession(p.graph, one);
    ASSERT_NE(alone, nullptr);
    RunStats expected;
    ASSERT_EQ(RunResult(alone.get(), p.feeds, &expected).scalar<int64_t>(), p.answer);
    SessionOptions o;
    o.num_workers = GetParam();
    o.deadline = absl::Seconds(60);
    auto s = MakeSession(p.graph, o);
    ASSERT_NE(s, nullptr);
    int64_t shared = 0;
    for (int repeat = 0; repeat < 10; ++repeat) {
      RunStats stats;
      EXPECT_EQ(RunResult(s.get(), p.feeds, &stats).scalar<int64_t>(), p.answer);
      EXPECT_EQ(stats.frames_created, expected.frames_created);
      EXPECT_EQ(stats.live_firings, expected.live_firings);
      EXPECT_EQ(stats.dead_firings, expected.dead_firings);
      EXPECT_EQ(stats.live_frames_after_run, 0);
      shared += stats.shared_frames;
    }
    // Each run starts offering at once (the interval starts at one firing),
    // so with helpers some frames were shared: the test reached that path.
    if (GetParam() > 1 && p.shares) EXPECT_GT(shared, 0) << p.answer;
  }
}

TEST_P(StatsTest, FibFramesFollowTheCallTree) {
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SessionOptions o;
    o.num_workers = GetParam();
    o.exact_live_frames = true;  // the peak is asserted
    o.mode = mode;
    auto s = MakeSession(reference::Fib(), o);
    ASSERT_NE(s, nullptr);
    for (int64_t n : {1, 2, 5, 12, 18}) {
      RunStats stats;
      const int64_t fib = reference::NativeFib(n);
      EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}}, &stats).scalar<int64_t>(), fib);
      const int64_t calls = exec_test::FibCalls(fib);
      // One frame per invocation plus the root.
      EXPECT_EQ(stats.frames_created, calls + 1) << n;
      // The deepest invocation is fib(n) -> fib(n-1) -> ... -> fib(1).
      EXPECT_EQ(stats.max_tag_depth, n) << n;
      // An invocation's callers are live while it runs, so the peak is at
      // least the deepest chain; frames are reclaimed as calls return, so it
      // stays near the width x depth of what is in flight, not the calls.
      // Work stealing keeps each worker depth first, so P workers hold at
      // most P such stacks (the Blumofe-Leiserson space bound S_P <= P*S_1).
      EXPECT_GE(stats.peak_live_frames, n + 1) << n;
      EXPECT_LE(stats.peak_live_frames, GetParam() * (3 * n + 1)) << n;
      EXPECT_EQ(stats.live_frames_after_run, 0);
      EXPECT_EQ(stats.instantiations, mode == ExecutionMode::kDynamic ? calls : 0) << n;
    }
  }
}

// ack(m, n) = ack(m-1, ack(m, n-1)) is a chain of calls whose native stack
// depth stays small (2^(n+3) - 1 for m = 3) while the calls number in the
// thousands. Frames must be reclaimed as their results return, so the peak
// follows that depth, not the calls: every frame finishes its own work (the
// dead drains of its untaken branches included) before the worker descends.
int64_t AckDepth(int64_t m, int64_t n, int64_t depth, int64_t* max_depth, int64_t* result) {
  *max_depth = std::max(*max_depth, depth);
  if (m == 0) return *result = n + 1;
  if (n == 0) return AckDepth(m - 1, 1, depth + 1, max_depth, result);
  AckDepth(m, n - 1, depth + 1, max_depth, result);
  return AckDepth(m - 1, *result, depth + 1, max_depth, result);
}

// The same stack when a tail call takes its caller's place (what tail-caller
// release leaves live): only the inner call ack(m, n-1) goes deeper.
int64_t AckTailFree(int64_t m, int64_t n, int64_t depth, int64_t* max_depth) {
  *max_depth = std::max(*max_depth, depth);
  if (m == 0) return n + 1;
  if (n == 0) return AckTailFree(m - 1, 1, depth, max_depth);
  return AckTailFree(m - 1, AckTailFree(m, n - 1, depth + 1, max_depth), depth, max_depth);
}
int64_t AckTailFreeDepth(int64_t m, int64_t n) {
  int64_t depth = 0;
  AckTailFree(m, n, 1, &depth);
  return depth;
}

TEST_P(StatsTest, AckFramesFollowTheNativeStackDepth) {
  for (bool compile_threads : {false, true}) {
    SCOPED_TRACE(compile_threads ? "compiled units" : "node by node");
    SessionOptions o;
    o.num_workers = GetParam();
    o.exact_live_frames = true;  // the peak is asserted
    o.compile_threads = compile_threads;
    auto s = MakeSession(reference::Ack(), o);
    ASSERT_NE(s, nullptr);
    for (int64_t n : {3, 4, 5}) {
      int64_t depth = 0, result = 0;
      AckDepth(3, n, 1, &depth, &result);
      RunStats stats;
      EXPECT_EQ(RunResult(s.get(), {{"m", I(3)}, {"n", I(n)}}, &stats).scalar<int64_t>(), result);
      if (compile_threads) {
        // A site with a compiled thread creates its invocation with all its
        // arguments: no partial invocation holds a tail caller, and the
        // frames live are those of the stack with tail calls in place.
        EXPECT_GE(stats.peak_live_frames, AckTailFreeDepth(3, n)) << n;
      } else {
        // Each invocation on the native stack, plus the partial invocation
        // of its outer call ack(m-1, .) created as soon as m-1 is known.
        EXPECT_GE(stats.peak_live_frames, depth) << n;
      }
      EXPECT_LE(stats.peak_live_frames, GetParam() * (2 * depth + 2)) << n;
      // One worker: far fewer live frames than calls. (More workers than
      // cores hold up to P such stacks; the bound above covers them.)
      if (GetParam() == 1) EXPECT_GT(stats.frames_created, 10 * stats.peak_live_frames) << n;
      EXPECT_EQ(stats.live_frames_after_run, 0);
    }
  }
}

TEST_P(StatsTest, BatchedLiveCountsStayWithinTheirTolerance) {
  // Without exact_live_frames, workers publish frame counts in batches of
  // 32 when others run: the peak is exact to within workers x 32 and
  // nothing is left uncounted at the end.
  SessionOptions o;
  o.num_workers = GetParam();
  auto s = MakeSession(reference::Ack(), o);
  ASSERT_NE(s, nullptr);
  int64_t depth = 0, result = 0;
  AckDepth(3, 5, 1, &depth, &result);
  const int64_t frames_needed = AckTailFreeDepth(3, 5);  // compiled units (the default)
  const int64_t slack = GetParam() == 1 ? 0 : GetParam() * 32;
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"m", I(3)}, {"n", I(5)}}, &stats).scalar<int64_t>(), result);
  EXPECT_GE(stats.peak_live_frames, frames_needed - slack);
  EXPECT_LE(stats.peak_live_frames, GetParam() * (2 * depth + 2) + slack);
  EXPECT_EQ(stats.live_frames_after_run, 0);
}

// Invocations made by tak(x, y, z) (design.md §7), itself included.
int64_t TakCalls(int64_t x, int64_t y, int64_t z) {
  if (!(y < x)) return 1;
  return 1 + TakCalls(x - 1, y, z) + TakCalls(y - 1, z, x) + TakCalls(z - 1, x, y) +
         TakCalls(reference::NativeTak(x - 1, y, z), reference::NativeTak(y - 1, z, x),
                  reference::NativeTak(z - 1, x, y));
}

TEST_P(StatsTest, FramesCreatedCountsEachInvocationOnce) {
  // tak's call sites take three arguments, so three Call nodes race to
  // create each invocation's frame; the frame count must not depend on who
  // wins. Repeated because a miscount needs the race to happen.
  SessionOptions o;
  o.num_workers = GetParam();
  auto s = MakeSession(reference::Tak(), o);
  ASSERT_NE(s, nullptr);
  const int64_t calls = TakCalls(12, 8, 4);
  for (int r = 0; r < 10; ++r) {
    RunStats stats;
    EXPECT_EQ(RunResult(s.get(), {{"x", I(12)}, {"y", I(8)}, {"z", I(4)}}, &stats).scalar<int64_t>(),
              reference::NativeTak(12, 8, 4));
    EXPECT_EQ(stats.frames_created, calls + 1) << "run " << r;
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST_P(StatsTest, TraceHasOneEventPerFiring) {
  const std::string path = absl::StrCat(::testing::TempDir(), "tdf_trace_", GetParam(), "_",
                                        ::testing::UnitTest::GetInstance()->random_seed(), ".json");
  std::remove(path.c_str());
  SessionOptions o;
  o.num_workers = GetParam();
  o.collect_node_stats = true;
  o.trace_path = path;
  auto s = MakeSession(reference::CallInWhile(), o);
  ASSERT_NE(s, nullptr);
  RunStats stats;
  EXPECT_EQ(RunResult(s.get(), {{"n", I(8)}}, &stats).scalar<int64_t>(), reference::NativeCallInWhile(8));
  const std::string json = ReadFile(path);
  ASSERT_FALSE(json.empty()) << "no trace at " << path;
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);

  // One complete ("X") event per line.
  const std::regex event(
      R"re(\{"name":"([^"]+)","cat":"([^"]+)","ph":"X","pid":1,"tid":([0-9]+),"ts":[0-9.e+-]+,"dur":[0-9.e+-]+,"args":\{"tag":"(\[[^"]*\])","dead":(true|false)\}\},?)re");
  std::map<std::string, std::pair<int64_t, int64_t>> by_op, by_node;
  int64_t events = 0;
  std::istringstream lines(json);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, event)) << line;
    ++events;
    const bool dead = m[5] == "true";
    (dead ? by_op[m[2]].second : by_op[m[2]].first) += 1;
    (dead ? by_node[m[1]].second : by_node[m[1]].first) += 1;
    const int tid = std::stoi(m[3]);
    EXPECT_GE(tid, 0);
    EXPECT_LT(tid, GetParam());
    // The op is the node's op in the executable graph.
    const NodeDef* def = s->executable_graph().FindNode(m[1].str());
    ASSERT_NE(def, nullptr) << m[1];
    EXPECT_EQ(def->op, m[2]);
  }
  EXPECT_EQ(events, stats.firings);
  EXPECT_EQ(by_op, stats.firings_by_op);
  EXPECT_EQ(by_node, stats.firings_by_node);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Workers, StatsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
