// Compiled units (issue #28, SessionOptions::compile_threads): with them on
// and off, the reference programs give the same answers and the same
// RunStats firings (per op, live and dead), frames and depths; a run that
// has them counts them, one that does not counts none.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;
Tensor I(int64_t v) { return Tensor::Scalar<int64_t>(v); }

struct Program {
  std::string name;
  std::function<Graph()> graph;
  Feeds feeds;
};

std::vector<Program> Programs() {
  return {
      {"fib0", reference::Fib, {{"n", I(0)}}},
      {"fib1", reference::Fib, {{"n", I(1)}}},
      {"fib15", reference::Fib, {{"n", I(15)}}},
      {"ack", reference::Ack, {{"m", I(2)}, {"n", I(3)}}},
      {"tak", reference::Tak, {{"x", I(12)}, {"y", I(8)}, {"z", I(4)}}},
      {"fact", reference::Fact, {{"n", I(20)}}},
      {"evenodd", reference::EvenOdd, {{"n", I(41)}}},
      {"exp", reference::Exp, {{"x", Tensor::Scalar<double>(1.5)}, {"n", I(7)}}},
      {"primes", reference::Primes, {{"n", I(100)}}},
      {"mccarthy91", reference::McCarthy91, {{"n", I(87)}}},
      {"sum", reference::Sum, {{"n", I(300)}}},
      {"callinwhile", reference::CallInWhile, {{"n", I(25)}}},
      {"whileinfunction", reference::WhileInFunction, {{"n", I(12)}}},
      {"multiwayif", [] { return reference::MultiWayIf(4); }, {{"n", I(9)}}},
      {"wide", [] { return reference::WideBody(6); }, {{"n", I(5)}}},
  };
}

RunStats RunProgram(const Program& p, bool threads, int workers, Tensor* result) {
  SessionOptions options;
  options.compile_threads = threads;
  options.num_workers = workers;
  auto session = Session::Create(p.graph(), options);
  EXPECT_TRUE(session.ok()) << session.status();
  RunStats stats;
  if (!session.ok()) return stats;
  auto out = (*session)->Run(p.feeds, {"result"}, {}, &stats);
  EXPECT_TRUE(out.ok()) << out.status();
  if (out.ok()) *result = out->at(0);
  return stats;
}

class CompiledThreadsTest : public ::testing::TestWithParam<int> {};

TEST_P(CompiledThreadsTest, SameAnswersAndFiringsAsNodeByNode) {
  for (const Program& p : Programs()) {
    SCOPED_TRACE(p.name);
    Tensor on_result, off_result;
    const RunStats on = RunProgram(p, true, GetParam(), &on_result);
    const RunStats off = RunProgram(p, false, GetParam(), &off_result);
    ASSERT_EQ(on_result.dtype(), off_result.dtype());
    if (on_result.dtype() == DType::kInt64) EXPECT_EQ(on_result.scalar<int64_t>(), off_result.scalar<int64_t>());
    if (on_result.dtype() == DType::kBool) EXPECT_EQ(on_result.scalar<bool>(), off_result.scalar<bool>());
    if (on_result.dtype() == DType::kFloat64) EXPECT_EQ(on_result.scalar<double>(), off_result.scalar<double>());
    EXPECT_EQ(on.firings_by_op, off.firings_by_op);
    EXPECT_EQ(on.firings, off.firings);
    EXPECT_EQ(on.frames_created, off.frames_created);
    EXPECT_EQ(on.max_tag_depth, off.max_tag_depth);
    EXPECT_EQ(on.live_frames_after_run, 0);
    // One worker: a base case run compiled is never live at once with
    // anything else (more workers: the peak depends on what is stolen when).
    if (GetParam() == 1) EXPECT_LE(on.peak_live_frames, off.peak_live_frames);
    EXPECT_EQ(off.compiled_units, 0);
  }
}

TEST_P(CompiledThreadsTest, FibRunsEveryInvocationCompiled) {
  Program fib{"fib", reference::Fib, {{"n", I(15)}}};
  Tensor result;
  const RunStats stats = RunProgram(fib, true, GetParam(), &result);
  EXPECT_EQ(result.scalar<int64_t>(), reference::NativeFib(15));
  // fib(15) makes 2 * fib(15) - 1 calls (fib(0) = fib(1) = 1): each a
  // compiled unit, the base cases without a frame, the others leaving one.
  EXPECT_EQ(stats.compiled_units, 2 * reference::NativeFib(15) - 1);
  EXPECT_EQ(stats.frames_created, 2 * reference::NativeFib(15));  // and the root
}

TEST(CompiledThreads, TracedRunsFireNodeByNode) {
  SessionOptions options;
  options.collect_node_stats = true;
  auto session = Session::Create(reference::Fib(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  RunStats stats;
  auto out = (*session)->Run({{"n", I(10)}}, {"result"}, {}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(stats.compiled_units, 0);
  EXPECT_EQ(stats.firings_by_node.at("fib/LessEqual_2").first, 177);  // every invocation's predicate
}

TEST(CompiledThreads, RecursionLimitStillFailsTheRun) {
  SessionOptions options;
  options.max_tag_depth = 5;
  auto session = Session::Create(reference::Fib(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({{"n", I(10)}}, {"result"}, {}, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

// f(n) = n <= 0 ? 100 / n + 100 % n + max(n, -2) - (-n) : f(n - 1), and on
// doubles g(x) = x <= 0 ? x / 0 - x : g(x - 1.5): their compiled units run
// typed code (int64, double registers); integer division by zero must fail
// the run as the Div kernel reports it node by node.
Graph DivideAtTheBottom() {
  GraphBuilder b;
  using Outs = std::vector<Output>;
  (void)b.DefineFunction(
      FunctionSignature{"f", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        Output n = a[0];
        return f.Cond(
            f.LessEqual(n, f.Const<int64_t>(0)),
            [&] {
              Output q = f.Add(f.Div(f.Const<int64_t>(100), n), f.Mod(f.Const<int64_t>(100), n));
              return Outs{f.Sub(f.Add(q, f.Maximum(n, f.Const<int64_t>(-2))), f.Neg(n))};
            },
            [&] { return f.Call("f", {f.Sub(n, f.Const<int64_t>(1))}); });
      });
  (void)b.DefineFunction(
      FunctionSignature{"g", {{"x", DType::kFloat64}}, {{"r", DType::kFloat64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        Output x = a[0];
        return f.Cond(
            f.LessEqual(x, f.Const<double>(0)),
            [&] { return Outs{f.Sub(f.Div(x, f.Const<double>(0)), x)}; },
            [&] { return f.Call("g", {f.Sub(x, f.Const<double>(1.5))}); });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("f", {n})[0], "result");
  Output x = b.Placeholder("x", DType::kFloat64);
  b.Identity(b.Call("g", {x})[0], "fresult");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

TEST(CompiledThreads, TypedCodeComputesAndFailsAsNodeByNode) {
  const Graph graph = DivideAtTheBottom();
  for (int64_t n : {-1, -2, -3, -7, 4, 0}) {
    for (double x : {4.0, -1.0, 0.0}) {
      SCOPED_TRACE(absl::StrCat("n=", n, " x=", x));
      absl::StatusOr<std::vector<Tensor>> outs[2];
      RunStats stats[2];
      for (bool threads : {false, true}) {
        SessionOptions options;
        options.compile_threads = threads;
        auto session = Session::Create(graph, options);
        ASSERT_TRUE(session.ok()) << session.status();
        outs[threads] = (*session)->Run({{"n", I(n)}, {"x", Tensor::Scalar<double>(x)}}, {"result", "fresult"}, {},
                                        &stats[threads]);
      }
      ASSERT_EQ(outs[0].ok(), outs[1].ok()) << outs[0].status() << " vs " << outs[1].status();
      if (!outs[0].ok()) {
        EXPECT_EQ(outs[0].status(), outs[1].status());
        EXPECT_GE(n, 0);  // only 100 / 0 fails (an integer division by zero)
        EXPECT_NE(outs[1].status().message().find("(Div)"), std::string::npos) << outs[1].status();
        continue;
      }
      EXPECT_EQ((*outs[0])[0].scalar<int64_t>(), (*outs[1])[0].scalar<int64_t>());
      const double off = (*outs[0])[1].scalar<double>(), on = (*outs[1])[1].scalar<double>();
      EXPECT_TRUE(off == on || (off != off && on != on)) << off << " vs " << on;
      EXPECT_EQ(stats[0].firings_by_op, stats[1].firings_by_op);
      EXPECT_GT(stats[1].compiled_units, 0);
    }
  }
}

// h(n, b) = n <= 0 ? (n <= 0) && b : h(n - 1, !(n <= 0) && b != (n < 3)):
// the predicate's bool, which typed code branches on in the instruction
// that makes it (FuseBranches), is read again after the branch, returned
// and passed to the next call with another bool made by a compare.
Graph BoolsAfterTheBranch() {
  GraphBuilder b;
  using Outs = std::vector<Output>;
  (void)b.DefineFunction(
      FunctionSignature{"h", {{"n", DType::kInt64}, {"b", DType::kBool}}, {{"r", DType::kBool}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        Output n = a[0], flag = a[1];
        Output p = f.LessEqual(n, f.Const<int64_t>(0));
        return f.Cond(
            p, [&] { return Outs{f.LogicalAnd(p, flag)}; },
            [&] {
              Output next = f.LogicalAnd(f.LogicalNot(p), f.NotEqual(flag, f.Less(n, f.Const<int64_t>(3))));
              return f.Call("h", {f.Sub(n, f.Const<int64_t>(1)), next});
            });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  Output flag = b.Placeholder("b", DType::kBool);
  b.Identity(b.Call("h", {n, flag})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

TEST(CompiledThreads, BoolsReadAfterAFusedBranch) {
  const Graph graph = BoolsAfterTheBranch();
  for (int64_t n : {-1, 0, 1, 2, 5, 8}) {
    for (bool flag : {false, true}) {
      SCOPED_TRACE(absl::StrCat("n=", n, " b=", flag));
      bool expected = flag;  // what h computes, natively
      for (int64_t k = n; k > 0; --k) expected = expected != (k < 3);
      for (bool threads : {false, true}) {
        SessionOptions options;
        options.compile_threads = threads;
        auto session = Session::Create(graph, options);
        ASSERT_TRUE(session.ok()) << session.status();
        RunStats stats;
        auto out = (*session)->Run({{"n", I(n)}, {"b", Tensor::Scalar<bool>(flag)}}, {"result"}, {}, &stats);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].scalar<bool>(), expected) << "threads " << threads;
        if (threads) EXPECT_GT(stats.compiled_units, 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, CompiledThreadsTest, ::testing::Values(1, 2, 8),
                         [](const auto& info) { return std::to_string(info.param) + "Workers"; });

}  // namespace
}  // namespace tdf
