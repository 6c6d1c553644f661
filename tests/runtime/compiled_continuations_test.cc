// Compiled continuations (issue #28, SessionOptions::compile_continuations):
// a frame a compiled unit left waiting for its calls runs, on registers,
// what its nodes would once every result has returned. With them on, off
// and with no compiled units at all, programs give the same answers, the
// same RunStats firings (per op, live and dead), frames and depths, and the
// same errors; results that are dead, tensors, or of another dtype than the
// continuation's typed code assumes go node by node.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

// The program `b` built; a build error fails the test (an empty graph then).
Graph Built(GraphBuilder& b) {
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

using Feeds = std::vector<std::pair<std::string, Tensor>>;
using Outs = std::vector<Output>;
Tensor I(int64_t v) { return Tensor::Scalar<int64_t>(v); }

struct Program {
  std::string name;
  std::function<Graph()> graph;
  Feeds feeds;
  bool joins = false;  // some frame waits for a call's result and goes on on scalars
};

// fib(n) = n <= 1 ? 1.0 : fib(n - 1) + fib(n - 2) on doubles: the join adds
// two results whose dtype the continuation's code cannot tell from its
// body (it assumes int64), so it runs its untyped code.
Graph FibOfDoubles() {
  GraphBuilder b;
  (void)b.DefineFunction(FunctionSignature{"fib", {{"n", DType::kInt64}}, {{"r", DType::kFloat64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output n = a[0];
                           return f.Cond(
                               f.LessEqual(n, f.Const<int64_t>(1)), [&] { return Outs{f.Const<double>(1.5)}; },
                               [&] {
                                 Output x = f.Call("fib", {f.Sub(n, f.Const<int64_t>(1))})[0];
                                 Output y = f.Call("fib", {f.Sub(n, f.Const<int64_t>(2))})[0];
                                 return Outs{f.Add(x, y)};
                               });
                         });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("fib", {n})[0], "result");
  return Built(b);
}

// The same on vectors: results are tensors, not inline scalars.
Graph FibOfVectors() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"fib", {{"n", DType::kInt64}}, {{"r", DType::kFloat64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        Output n = a[0];
        return f.Cond(
            f.LessEqual(n, f.Const<int64_t>(1)),
            [&] { return Outs{f.Const(Tensor::Vector<double>({1.0, 2.0, 3.0}))}; },
            [&] {
              Output x = f.Call("fib", {f.Sub(n, f.Const<int64_t>(1))})[0];
              Output y = f.Call("fib", {f.Sub(n, f.Const<int64_t>(2))})[0];
              return Outs{f.Add(x, y)};
            });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Sum(b.Call("fib", {n})[0]), "result");
  return Built(b);
}

// h(n, p) = n <= 0 ? (n if p, else dead) : h(n - 1, p) + h(n - 2, p): with
// p false every base case returns dead into a frame waiting at its join.
Graph DeadBaseCases() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"h", {{"n", DType::kInt64}, {"p", DType::kBool}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        Output n = a[0], p = a[1];
        return f.Cond(
            f.LessEqual(n, f.Const<int64_t>(0)),
            [&] { return Outs{f.Outputs(f.Op("Switch", {n, p}, {{"T", DType::kInt64}}))[1]}; },
            [&] {
              Output x = f.Call("h", {f.Sub(n, f.Const<int64_t>(1)), p})[0];
              Output y = f.Call("h", {f.Sub(n, f.Const<int64_t>(2)), p})[0];
              return Outs{f.Add(f.Add(x, y), f.Const<int64_t>(1))};
            });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  Output p = b.Placeholder("p", DType::kBool);
  b.Identity(b.Call("h", {n, p})[0], "result");
  return Built(b);
}

// k(n, p) = n <= 0 ? (n if p, else dead) : k(k(n - 1, p) + n - n, p): the
// outer call's site waits for the inner call's result with p already in its
// Call's slot (held, as ack's outer call): with p false the result is dead
// and the held Call goes node by node.
Graph DeadIntoAHeldSite() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"k", {{"n", DType::kInt64}, {"p", DType::kBool}}, {{"r", DType::kInt64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        Output n = a[0], p = a[1];
        return f.Cond(
            f.LessEqual(n, f.Const<int64_t>(0)),
            [&] { return Outs{f.Outputs(f.Op("Switch", {n, p}, {{"T", DType::kInt64}}))[1]}; },
            [&] {
              Output inner = f.Call("k", {f.Sub(n, f.Const<int64_t>(1)), p})[0];
              return f.Call("k", {inner, p});
            });
      });
  Output n = b.Placeholder("n", DType::kInt64);
  Output p = b.Placeholder("p", DType::kBool);
  b.Identity(b.Call("k", {n, p})[0], "result");
  return Built(b);
}

// q(n) = n <= 0 ? 0 : 100 / q(n - 1) + 1: q(1) divides by zero in its join.
Graph DivideInTheJoin() {
  GraphBuilder b;
  (void)b.DefineFunction(FunctionSignature{"q", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output n = a[0];
                           return f.Cond(
                               f.LessEqual(n, f.Const<int64_t>(0)), [&] { return Outs{f.Const<int64_t>(0)}; },
                               [&] {
                                 Output r = f.Call("q", {f.Sub(n, f.Const<int64_t>(1))})[0];
                                 return Outs{f.Add(f.Div(f.Const<int64_t>(100), r), f.Const<int64_t>(1))};
                               });
                         });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("q", {n})[0], "result");
  return Built(b);
}

std::vector<Program> Programs() {
  return {
      {"fib0", reference::Fib, {{"n", I(0)}}},
      {"fib15", reference::Fib, {{"n", I(15)}}, true},
      {"ack", reference::Ack, {{"m", I(2)}, {"n", I(3)}}, true},
      {"tak", reference::Tak, {{"x", I(12)}, {"y", I(8)}, {"z", I(4)}}, true},
      {"fact", reference::Fact, {{"n", I(20)}}, true},
      {"evenodd", reference::EvenOdd, {{"n", I(41)}}},
      {"exp", reference::Exp, {{"x", Tensor::Scalar<double>(1.5)}, {"n", I(7)}}, true},
      {"primes", reference::Primes, {{"n", I(100)}}, true},
      {"mccarthy91", reference::McCarthy91, {{"n", I(87)}}, true},
      {"sum", reference::Sum, {{"n", I(300)}}, true},
      {"deepsum", reference::Sum, {{"n", I(20000)}}, true},
      {"callinwhile", reference::CallInWhile, {{"n", I(25)}}, true},
      {"whileinfunction", reference::WhileInFunction, {{"n", I(12)}}, true},
      {"multiwayif", [] { return reference::MultiWayIf(4); }, {{"n", I(9)}}},
      {"wide", [] { return reference::WideBody(6); }, {{"n", I(5)}}, true},
      {"fibdoubles", FibOfDoubles, {{"n", I(12)}}, true},
      {"fibvectors", FibOfVectors, {{"n", I(8)}}},
      {"deadbase", DeadBaseCases, {{"n", I(9)}, {"p", Tensor::Scalar<bool>(true)}}, true},
      {"heldsite", DeadIntoAHeldSite, {{"n", I(30)}, {"p", Tensor::Scalar<bool>(true)}}, true},
  };
}

enum class Units { kNone, kEntryOnly, kWithContinuations };

struct Outcome {
  absl::Status status;
  Tensor result;
  RunStats stats;
};

Outcome RunProgram(const Graph& graph, const Feeds& feeds, Units units, int workers) {
  SessionOptions options;
  options.compile_threads = units != Units::kNone;
  options.compile_continuations = units == Units::kWithContinuations;
  options.num_workers = workers;
  Outcome out;
  auto session = Session::Create(graph, options);
  if (!session.ok()) {
    out.status = session.status();
    return out;
  }
  auto run = (*session)->Run(feeds, {"result"}, {}, &out.stats);
  out.status = run.status();
  if (run.ok()) out.result = run->at(0);
  return out;
}

void ExpectSameResult(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.num_elements(), b.num_elements());
  if (a.dtype() == DType::kInt64) EXPECT_EQ(a.scalar<int64_t>(), b.scalar<int64_t>());
  if (a.dtype() == DType::kBool) EXPECT_EQ(a.scalar<bool>(), b.scalar<bool>());
  if (a.dtype() == DType::kFloat64) EXPECT_EQ(a.scalar<double>(), b.scalar<double>());
}

class CompiledContinuationsTest : public ::testing::TestWithParam<int> {};

TEST_P(CompiledContinuationsTest, SameAnswersFiringsAndFramesWithAndWithout) {
  for (const Program& p : Programs()) {
    SCOPED_TRACE(p.name);
    const Graph graph = p.graph();
    const Outcome on = RunProgram(graph, p.feeds, Units::kWithContinuations, GetParam());
    const Outcome entry = RunProgram(graph, p.feeds, Units::kEntryOnly, GetParam());
    const Outcome off = RunProgram(graph, p.feeds, Units::kNone, GetParam());
    ASSERT_TRUE(on.status.ok()) << on.status;
    ASSERT_TRUE(entry.status.ok()) << entry.status;
    ASSERT_TRUE(off.status.ok()) << off.status;
    ExpectSameResult(on.result, off.result);
    ExpectSameResult(entry.result, off.result);
    for (const Outcome* o : {&on, &entry}) {
      EXPECT_EQ(o->stats.firings_by_op, off.stats.firings_by_op);
      EXPECT_EQ(o->stats.firings, off.stats.firings);
      EXPECT_EQ(o->stats.frames_created, off.stats.frames_created);
      EXPECT_EQ(o->stats.max_tag_depth, off.stats.max_tag_depth);
      EXPECT_EQ(o->stats.live_frames_after_run, 0);
    }
    EXPECT_EQ(on.stats.compiled_units, entry.stats.compiled_units);
    // One worker: frames live as long as without continuations (a join
    // that calls runs its callee's unit where the node-by-node join did),
    // and tail callers are released as often.
    if (GetParam() == 1) {
      EXPECT_EQ(on.stats.peak_live_frames, entry.stats.peak_live_frames);
      EXPECT_EQ(on.stats.tail_callers_released, entry.stats.tail_callers_released);
    }
    if (p.joins) {
      EXPECT_GT(on.stats.compiled_continuations, 0);
    } else {
      EXPECT_EQ(on.stats.compiled_continuations, 0);
    }
    EXPECT_EQ(entry.stats.compiled_continuations, 0);
    EXPECT_EQ(off.stats.compiled_continuations, 0);
  }
}

TEST_P(CompiledContinuationsTest, DeadResultsGoNodeByNode) {
  const Graph graph = DeadBaseCases();
  const Feeds feeds = {{"n", I(9)}, {"p", Tensor::Scalar<bool>(false)}};
  const Outcome on = RunProgram(graph, feeds, Units::kWithContinuations, GetParam());
  const Outcome off = RunProgram(graph, feeds, Units::kNone, GetParam());
  // Every result is dead: so is h's, and the fetch never gets a value.
  ASSERT_FALSE(off.status.ok());
  EXPECT_EQ(on.status, off.status);
  EXPECT_EQ(on.status.code(), absl::StatusCode::kFailedPrecondition) << on.status;
}

TEST_P(CompiledContinuationsTest, DeadResultIntoAHeldSiteGoesNodeByNode) {
  const Graph graph = DeadIntoAHeldSite();
  const Feeds feeds = {{"n", I(30)}, {"p", Tensor::Scalar<bool>(false)}};
  const Outcome on = RunProgram(graph, feeds, Units::kWithContinuations, GetParam());
  const Outcome off = RunProgram(graph, feeds, Units::kNone, GetParam());
  ASSERT_FALSE(off.status.ok());
  EXPECT_EQ(on.status, off.status);
  EXPECT_EQ(on.status.code(), absl::StatusCode::kFailedPrecondition) << on.status;
}

TEST_P(CompiledContinuationsTest, DivisionByZeroInAJoinFailsAsNodeByNode) {
  const Graph graph = DivideInTheJoin();
  for (int64_t n : {0, 1, 2, 5}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    const Outcome on = RunProgram(graph, {{"n", I(n)}}, Units::kWithContinuations, GetParam());
    const Outcome off = RunProgram(graph, {{"n", I(n)}}, Units::kNone, GetParam());
    EXPECT_EQ(on.status, off.status);
    if (n == 0) {
      ASSERT_TRUE(on.status.ok()) << on.status;
      EXPECT_EQ(on.result.scalar<int64_t>(), 0);
      continue;
    }
    // q(1) = 100 / q(0): the Div names itself and q(1)'s tag.
    ASSERT_FALSE(on.status.ok());
    EXPECT_NE(on.status.message().find("(Div)"), std::string::npos) << on.status;
    EXPECT_NE(on.status.message().find("integer division by zero"), std::string::npos) << on.status;
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, CompiledContinuationsTest, ::testing::Values(1, 2, 8),
                         [](const auto& info) { return std::to_string(info.param) + "Workers"; });

TEST(CompiledContinuations, FibJoinsEveryRecursiveCallCompiled) {
  const Outcome on = RunProgram(reference::Fib(), {{"n", I(15)}}, Units::kWithContinuations, 1);
  ASSERT_TRUE(on.status.ok()) << on.status;
  EXPECT_EQ(on.result.scalar<int64_t>(), reference::NativeFib(15));
  // fib(15) makes fib(15) base cases and fib(15) - 1 recursive calls, each
  // of which joins its two results in a continuation (no chain of them is
  // deeper than the recursion, 15, under the nesting bound of 16).
  EXPECT_EQ(on.stats.compiled_continuations, reference::NativeFib(15) - 1);
}

TEST(CompiledContinuations, TracedAndCountedRunsFireNodeByNode) {
  SessionOptions options;
  options.collect_node_stats = true;
  auto session = Session::Create(reference::Fib(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  RunStats stats;
  auto out = (*session)->Run({{"n", I(10)}}, {"result"}, {}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(stats.compiled_continuations, 0);
  // Every recursive call's join fired node by node: fib(10) makes 88.
  int64_t adds = 0;
  for (const auto& [name, firings] : stats.firings_by_node)
    if (name.find("/Add") != std::string::npos) adds += firings.first;
  EXPECT_EQ(adds, reference::NativeFib(10) - 1);
}

}  // namespace
}  // namespace tdf
