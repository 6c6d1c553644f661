// Tail calls' results (OutEdge::kReturnTail): a callee's live result that
// the caller's Merges would only pass on to the caller's own result goes to
// the caller's caller directly, up the frame chain. Asserted as facts of the
// run against the run without forwarding: same answers, same invocations,
// nothing left live, and which Merges fire: none of the passed-over ones,
// every one whose inputs may both be live or whose value is used inside the
// function as well.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::ForEachVariant;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::OpCount;
using exec_test::Outs;
using exec_test::RunResult;

class TailResultsTest : public ::testing::TestWithParam<int> {};

// count(n, acc) = n == 0 ? acc : count(n - 1, acc + 1): the base case's
// value comes through a Switch, the recursive case is a tail call.
Graph Count() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"count", {{"n", DType::kInt64}, {"acc", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output n = args[0], acc = args[1];
        return f.Cond(
            f.Equal(n, f.Const<int64_t>(0)), [&] { return Outs{acc}; },
            [&] { return f.Call("count", {f.Sub(n, f.Const<int64_t>(1)), f.Add(acc, f.Const<int64_t>(1))}); });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  Output acc = b.Placeholder("acc", DType::kInt64);
  b.Identity(b.Call("count", {n, acc})[0], "result");
  return Built(b);
}

TEST_P(TailResultsTest, TailRecursionPassesTheCallersResultMergesOver) {
  ForEachVariant(GetParam(), [](const SessionOptions& options) {
    auto s = MakeSession(Count(), options);
    ASSERT_NE(s, nullptr);
    for (int64_t n : {0, 1, 6, 20000}) {
      SCOPED_TRACE(absl::StrCat("n ", n));
      RunStats st;
      EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}, {"acc", I(5)}}, &st).scalar<int64_t>(), n + 5);
      EXPECT_EQ(st.frames_created, n + 2);  // main's and one per invocation
      EXPECT_EQ(st.max_tag_depth, n + 1);
      // Forwarding, no result Merge fires: the base case's Switch sends acc
      // to the caller itself, and the n that recurse pass theirs over.
      // Without, every invocation fires its two argument Merges and its
      // result Merge.
      EXPECT_EQ(OpCount(st, "Merge").first, options.forward_call_values ? 0 : 3 * (n + 1));
    }
  });
}

// count's two arguments come from two feeds of main. Main's nodes all fire
// before the invocation they create runs, so the first invocation has both
// arguments before it makes its tail call, and the recursion holds three
// frames however deep it goes (it held n + 2 when the first argument's
// chain of calls ran ahead of the second feed).
TEST_P(TailResultsTest, ATailRecursionCalledFromMainWithTwoFeedsHoldsThreeFrames) {
  for (bool release : {true, false})
  for (bool threads : {true, false}) {
    SCOPED_TRACE(absl::StrCat("release_tail_callers ", release, " compile_threads ", threads));
    SessionOptions options;
    options.num_workers = GetParam();
    options.release_tail_callers = release;
    options.compile_threads = threads;
    options.exact_live_frames = true;  // the peak is asserted
    auto s = MakeSession(Count(), options);
    ASSERT_NE(s, nullptr);
    for (int64_t n : {0, 1, 20000}) {
      SCOPED_TRACE(absl::StrCat("n ", n));
      RunStats st;
      EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}, {"acc", I(5)}}, &st).scalar<int64_t>(), n + 5);
      EXPECT_EQ(st.frames_created, n + 2);
      // A compiled unit runs the last call (n == 0) inside its caller's
      // Call: that caller then returns at once, with no callee to hand over to.
      EXPECT_EQ(st.tail_callers_released, release ? (threads ? std::max<int64_t>(n - 1, 0) : n) : 0);
      EXPECT_EQ(st.peak_live_frames, release ? std::min<int64_t>(n + 2, 3) : n + 2);
    }
  }
}

// A tail recursion without end stops at max_tag_depth like any other, and
// the session runs again.
TEST_P(TailResultsTest, RunawayTailRecursionEndsInAStatus) {
  ForEachVariant(GetParam(), [](const SessionOptions& base) {
    SessionOptions options = base;
    options.max_tag_depth = 3000;
    options.exact_live_frames = true;  // the peak is asserted
    auto s = MakeSession(Count(), options);
    ASSERT_NE(s, nullptr);
    RunStats st;
    absl::StatusOr<std::vector<Tensor>> out = s->Run({{"n", I(-1)}, {"acc", I(0)}}, {"result"}, {}, &st);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(out.status().message().find("function 'count' would reach tag depth 3001"), absl::string_view::npos)
        << out.status();
    // Every caller live when it stopped (the root and 3000 invocations), or
    // three frames when released callers hand their place on. Those left
    // when it stopped, the run reclaims itself: how many depends on whether
    // the last invocation still expected an argument (then all of them) or
    // had all of them and unwound on its own (none).
    const bool released = options.forward_call_values && options.release_tail_callers;
    EXPECT_EQ(st.peak_live_frames, released ? 3 : 3001);
    EXPECT_LE(st.live_frames_after_run, st.peak_live_frames);
    EXPECT_EQ(RunResult(s.get(), {{"n", I(5)}, {"acc", I(1)}}).scalar<int64_t>(), 6);  // and nothing after
  });
}

// Mutual tail recursion: even's result is odd's, odd's is even's, and each
// base case is a constant that returns its value itself, so with forwarding
// no result Merge fires at all and the constant goes straight to main.
TEST_P(TailResultsTest, MutualTailRecursionReturnsStraightToMain) {
  ForEachVariant(GetParam(), [](const SessionOptions& options) {
    auto s = MakeSession(reference::EvenOdd(), options);
    ASSERT_NE(s, nullptr);
    for (int64_t n : {0, 1, 7, 20001}) {
      SCOPED_TRACE(absl::StrCat("n ", n));
      RunStats st;
      EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}}, &st).scalar<bool>(), n % 2 == 0);
      EXPECT_EQ(st.frames_created, n + 2);
      EXPECT_EQ(OpCount(st, "Merge").first, options.forward_call_values ? 0 : 2 * (n + 1));
    }
  });
}

// The reference programs with tail calls give the answers of their native
// versions with and without forwarding, and forwarding only removes Merge
// firings: every other op fires as often.
TEST_P(TailResultsTest, ForwardingRemovesOnlyMergeFirings) {
  struct Case {
    std::string name;
    Graph graph;
    exec_test::Feeds feeds;
    int64_t want;
  };
  const Case cases[] = {
      {"ack", reference::Ack(), {{"m", I(2)}, {"n", I(3)}}, reference::NativeAck(2, 3)},
      {"tak", reference::Tak(), {{"x", I(12)}, {"y", I(8)}, {"z", I(4)}}, reference::NativeTak(12, 8, 4)},
      {"primes", reference::Primes(), {{"n", I(60)}}, reference::NativePrimes(60)},
      {"mc91", reference::McCarthy91(), {{"n", I(7)}}, reference::NativeMcCarthy91(7)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RunStats with, without;
    for (bool forward : {true, false}) {
      SessionOptions options;
      options.num_workers = GetParam();
      options.forward_call_values = forward;
      auto s = MakeSession(c.graph, options);
      ASSERT_NE(s, nullptr);
      // Run twice: the second run reuses cached frames.
      RunStats* st = forward ? &with : &without;
      EXPECT_EQ(RunResult(s.get(), c.feeds).scalar<int64_t>(), c.want);
      EXPECT_EQ(RunResult(s.get(), c.feeds, st).scalar<int64_t>(), c.want);
    }
    EXPECT_EQ(with.frames_created, without.frames_created);
    for (const char* op : {"Call", "Sub", "Add", "Less", "Equal", "Greater", "Mul", "Mod"})
      EXPECT_EQ(OpCount(with, op).first, OpCount(without, op).first) << op;
    EXPECT_LT(OpCount(with, "Merge").first, OpCount(without, "Merge").first);
  }
}

// r = Merge(a(x), b(x)) inside a function, both calls live: the first
// result wins and the Merge must fire, once per invocation. Forwarding
// either call's result past it would deliver two results to the caller.
TEST_P(TailResultsTest, MergeOfTwoLiveCallsStillFires) {
  GraphBuilder b;
  for (const char* name : {"a", "b"}) {
    (void)b.DefineFunction(FunctionSignature{name, {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                           [](GraphBuilder& f, const Outs& args) -> Outs {
                             return Outs{f.Add(args[0], f.Const<int64_t>(1))};
                           });
  }
  (void)b.DefineFunction(FunctionSignature{"h", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& args) -> Outs {
                           Output a = f.Call("a", {args[0]})[0];
                           Output c = f.Call("b", {args[0]})[0];
                           return Outs{f.Op("Merge", {a, c}, {{"T", DType::kInt64}})};
                         });
  Output x = b.Placeholder("x", DType::kInt64);
  b.Identity(b.Call("h", {x})[0], "result");
  const Graph g = Built(b);
  for (bool forward : {true, false}) {
    SCOPED_TRACE(absl::StrCat("forward_call_values ", forward));
    SessionOptions options;
    options.num_workers = GetParam();
    options.forward_call_values = forward;
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    for (int round = 0; round < 20; ++round) {
      RunStats st;
      EXPECT_EQ(RunResult(s.get(), {{"x", I(41)}}, &st).scalar<int64_t>(), 42);
      // Without forwarding, the argument Merges and result Identities of
      // the three invocations fire as well.
      EXPECT_EQ(OpCount(st, "Merge").first, forward ? 1 : 4);
      EXPECT_EQ(OpCount(st, "Identity").first, forward ? 1 : 4);  // main's result once
      EXPECT_EQ(st.frames_created, 4);
    }
  }
}

// f(n) = (r, r + 1) with r = n == 0 ? n : f(n - 1).r: the result Merge's
// value is used inside f as well, so the tail call's result must reach it.
TEST_P(TailResultsTest, ResultMergeWithALocalConsumerStillFires) {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"f", {{"n", DType::kInt64}}, {{"r", DType::kInt64}, {"s", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output n = args[0];
        Output r = f.Cond(
            f.Equal(n, f.Const<int64_t>(0)), [&] { return Outs{n}; },
            [&] { return Outs{f.Call("f", {f.Sub(n, f.Const<int64_t>(1))})[0]}; })[0];
        return Outs{r, f.Add(r, f.Const<int64_t>(1))};
      });
  Output n = b.Placeholder("n", DType::kInt64);
  Outs out = b.Call("f", {n});
  b.Identity(out[0], "r");
  b.Identity(out[1], "result");
  const Graph g = Built(b);
  ForEachVariant(GetParam(), [&](const SessionOptions& options) {
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    for (int64_t depth : {0, 5}) {
      RunStats st;
      auto got = s->Run({{"n", I(depth)}}, {"r", "result"}, {}, &st);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ((*got)[0].scalar<int64_t>(), 0);
      EXPECT_EQ((*got)[1].scalar<int64_t>(), 1);
      EXPECT_EQ(st.live_frames_after_run, 0);
      // The result Merge of every invocation (and, without forwarding, its
      // argument Merge).
      EXPECT_EQ(OpCount(st, "Merge").first, (options.forward_call_values ? 1 : 2) * (depth + 1));
    }
  });
}

// ---- Released callers (SessionOptions::release_tail_callers) ----

// even(n) = n == 0 ? true : odd(n - 1), odd likewise: every invocation but
// the last ends in a tail call, so each is reclaimed as soon as it has made
// that call, and its callee returns to main in its place. One worker then
// holds the root and at most two invocations (a caller and the callee it
// has just created), however deep the recursion; without releasing, every
// caller stays live until the last one returns.
TEST_P(TailResultsTest, ReleasedCallersHoldATailRecursionInThreeFrames) {
  for (bool release : {true, false})
  for (bool threads : {true, false}) {
    SCOPED_TRACE(absl::StrCat("release_tail_callers ", release, " compile_threads ", threads));
    SessionOptions options;
    options.num_workers = GetParam();
    options.release_tail_callers = release;
    options.compile_threads = threads;
    options.exact_live_frames = true;  // the peak is asserted
    auto s = MakeSession(reference::EvenOdd(), options);
    ASSERT_NE(s, nullptr);
    for (int64_t n : {0, 1, 7, 100001}) {
      SCOPED_TRACE(absl::StrCat("n ", n));
      RunStats st;
      EXPECT_EQ(RunResult(s.get(), {{"n", I(n)}}, &st).scalar<bool>(), n % 2 == 0);
      EXPECT_EQ(st.frames_created, n + 2);
      EXPECT_EQ(st.max_tag_depth, n + 1);  // tags still count every call
      EXPECT_EQ(st.live_frames_after_run, 0);
      if (!release) {
        EXPECT_EQ(st.tail_callers_released, 0);
        EXPECT_EQ(st.peak_live_frames, n + 2);
      } else {
        // Nothing here is worth offering to other workers, so no frame is
        // shared and every caller is released, with any number of workers.
        // A compiled unit runs the last call (n == 0) inside its caller's
        // Call: that caller then returns at once, with no callee to hand over to.
        EXPECT_EQ(st.tail_callers_released, threads ? std::max<int64_t>(n - 1, 0) : n);
        EXPECT_EQ(st.peak_live_frames, std::min<int64_t>(n + 2, 3));
      }
    }
  }
}

// primes(n): nth's recursive calls and isprime's are tail calls, nth's call
// of isprime is not. Released, the live frames no longer follow the number
// of nth and isprime calls in flight (76 483 for primes(7500)); every
// count that says what ran is unchanged.
TEST_P(TailResultsTest, ReleasedCallersLeaveEveryOtherCountUnchanged) {
  RunStats with, without;
  for (bool release : {true, false}) {
    SessionOptions options;
    options.num_workers = GetParam();
    options.release_tail_callers = release;
    auto s = MakeSession(reference::Primes(), options);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(RunResult(s.get(), {{"n", I(500)}}).scalar<int64_t>(), reference::NativePrimes(500));
    EXPECT_EQ(RunResult(s.get(), {{"n", I(500)}}, release ? &with : &without).scalar<int64_t>(),
              reference::NativePrimes(500));
  }
  EXPECT_EQ(with.frames_created, without.frames_created);
  EXPECT_EQ(with.max_tag_depth, without.max_tag_depth);
  EXPECT_EQ(with.firings_by_op, without.firings_by_op);
  EXPECT_EQ(with.live_frames_after_run, 0);
  EXPECT_EQ(without.tail_callers_released, 0);
  EXPECT_GT(with.tail_callers_released, with.frames_created / 2);
  if (GetParam() == 1) EXPECT_LT(with.peak_live_frames * 20, without.peak_live_frames);
}

// A tail call whose callee is invoked live but returns a dead result (one
// argument live, the other dead): once its caller is released, the dead
// result goes to the caller's caller as the caller's own dead result would
// have. Both runs end alike: main's result fired dead.
TEST_P(TailResultsTest, ADeadResultOfAReleasedCallerReachesItsCaller) {
  GraphBuilder b;
  (void)b.DefineFunction(FunctionSignature{"g", {{"k", DType::kInt64}, {"v", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& args) -> Outs { return Outs{f.Add(args[1], args[0])}; });
  (void)b.DefineFunction(
      FunctionSignature{"f", {{"n", DType::kInt64}, {"x", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        Output n = args[0], x = args[1];
        return f.Cond(
            f.Greater(n, f.Const<int64_t>(0)),
            [&] {
              // The true port of a Switch on false: dead in every invocation.
              Output never = f.Op("Switch", {x, f.Const<bool>(false)}, {{"T", DType::kInt64}});
              never.port = 1;
              return f.Call("g", {f.Sub(n, f.Const<int64_t>(1)), f.Add(never, f.Const<int64_t>(1))});
            },
            [&] { return Outs{x}; });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  Output x = b.Placeholder("x", DType::kInt64);
  b.Identity(b.Call("f", {n, x})[0], "result");
  const Graph g = Built(b);
  ForEachVariant(GetParam(), [&](const SessionOptions& options) {
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(RunResult(s.get(), {{"n", I(0)}, {"x", I(7)}}).scalar<int64_t>(), 7);
    RunStats st;
    absl::StatusOr<std::vector<Tensor>> out = s->Run({{"n", I(3)}, {"x", I(7)}}, {"result"}, {}, &st);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
    EXPECT_NE(out.status().message().find("fired with a dead output"), absl::string_view::npos) << out.status();
    EXPECT_EQ(st.frames_created, 3);
    EXPECT_EQ(st.live_frames_after_run, 0);
    if (options.forward_call_values && options.release_tail_callers && GetParam() == 1)
      EXPECT_EQ(st.tail_callers_released, 1);
  });
}

// Runaway mutual tail recursion (even(-1) never reaches 0) still ends at
// max_tag_depth: a released caller's callee keeps its depth, and the
// message counts the calls it passed over.
TEST_P(TailResultsTest, RunawayReleasedTailRecursionEndsAtTheSameDepth) {
  for (bool release : {true, false}) {
    SCOPED_TRACE(absl::StrCat("release_tail_callers ", release));
    SessionOptions options;
    options.num_workers = GetParam();
    options.release_tail_callers = release;
    options.max_tag_depth = 3000;
    auto s = MakeSession(reference::EvenOdd(), options);
    ASSERT_NE(s, nullptr);
    RunStats st;
    absl::StatusOr<std::vector<Tensor>> out = s->Run({{"n", I(-1)}}, {"result"}, {}, &st);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(out.status().message().find("would reach tag depth 3001"), absl::string_view::npos) << out.status();
    EXPECT_EQ(st.max_tag_depth, 3000);
    // The callers of the call that failed had nothing else to do: they
    // completed on their own, released or not.
    EXPECT_EQ(st.live_frames_after_run, 0);
    if (release) {
      EXPECT_NE(out.status().message().find("at tag [+2999 tail calls, 0]"), absl::string_view::npos)
          << out.status();
    } else {
      EXPECT_NE(out.status().message().find("at tag [0, 1, 0, 1, "), absl::string_view::npos) << out.status();
    }
    EXPECT_EQ(RunResult(s.get(), {{"n", I(6)}}).scalar<bool>(), true);
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, TailResultsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
