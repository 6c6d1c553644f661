// tdf::DistributedSession under mpirun (tests/CMakeLists.txt runs these on 2
// and 3 ranks): programs cut across ranks give the one-process Session's
// answers, every rank ends with zero live frames, and a failure on one rank
// fails the run on every rank, naming the rank, node, op and tag.
#include "tdf/distributed.h"

#include <mpi.h>

#include <chrono>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "distributed/test_programs.h"
#include "absl/strings/str_cat.h"
#include "tdf/builder.h"
#include "tdf/partition.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using distributed_test::PlaceRandomly;
using distributed_test::Program;
using distributed_test::Programs;

// The sizes are read before a session exists: initialize MPI as tdf
// would (this test's main leaves it to tdf), finalized at exit.
void EnsureMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

int WorldRank() {
  EnsureMpi();
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int WorldSize() {
  EnsureMpi();
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// The one-process answer of `graph` for one int64 feed.
int64_t OneProcess(const Graph& graph, const std::string& feed, int64_t value) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(graph);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run({{feed, Tensor::Scalar<int64_t>(value)}}, {"result"});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0].scalar<int64_t>() : -1;
}

std::unique_ptr<DistributedSession> CreateOrDie(const Graph& graph, DistributedOptions options = {}) {
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(graph, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// Runs `graph` across ranks with one int64 feed and checks "result" against
// the one-process run on the rank that holds it, and zero live frames
// everywhere; adds the tokens this rank sent to `sent`.
void CheckAcrossRanks(const Graph& graph, const std::string& feed, const std::vector<int64_t>& values,
                      int64_t* sent = nullptr, int num_workers = 1) {
  DistributedOptions options;
  options.session.num_workers = num_workers;
  std::unique_ptr<DistributedSession> s = CreateOrDie(graph, options);
  ASSERT_NE(s, nullptr);
  for (int64_t v : values) {
    SCOPED_TRACE(absl::StrCat(feed, " = ", v, ", rank ", s->rank()));
    RunStats stats;
    DistributedRunStats remote;
    absl::StatusOr<std::vector<Tensor>> out =
        s->Run({{feed, Tensor::Scalar<int64_t>(v)}}, {"result"}, &stats, &remote);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    if (s->RankOf("result") == s->rank()) {
      ASSERT_TRUE((*out)[0].valid());
      EXPECT_EQ((*out)[0].scalar<int64_t>(), OneProcess(graph, feed, v));
    } else {
      EXPECT_FALSE((*out)[0].valid());
    }
    EXPECT_EQ(stats.live_frames_after_run, 0);
    EXPECT_EQ(remote.rank, s->rank());
    if (sent != nullptr) *sent += remote.tokens_sent;
  }
  absl::Status closed = s->Close();
  EXPECT_TRUE(closed.ok()) << closed;
}

// x (rank 0) -> a = x * 3 (rank 1) -> b = a + x (last rank) -> result = b - 1
// (rank 0), with a control edge from rank 1 to the last rank, and a float
// vector crossing as well (a tensor, not a scalar).
Graph MainChain() {
  const std::string last = absl::StrCat("rank:", WorldSize() - 1);
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kInt64);
  Output a = b.Mul(x, b.Const<int64_t>(3));
  b.SetDevice(a, "rank:1");
  Output sum = b.Add(a, x);
  b.SetDevice(sum, last);
  Output v = b.Const(Tensor::Vector<float>({1.5f, 2.5f, -1.0f}));
  b.SetDevice(v, "rank:1");
  Output s = b.Sum(b.Tanh(v));
  b.SetDevice(s, last);
  Output go = b.Op("NoOp", {});
  b.SetDevice(go, "rank:1");
  b.AddControlInput(sum, go);
  Output i = b.Cast(b.Greater(s, b.Const<float>(0.0f)), DType::kInt64);
  b.SetDevice(i, last);
  Output r = b.Sub(b.Add(sum, i), b.Const<int64_t>(1));
  b.Identity(r, "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : Graph{};
}

// Every node of `fn`'s body, and every Invoke of it, on `device`.
void PlaceFunction(Graph& g, const std::string& fn, const std::string& device) {
  for (NodeDef& n : g.node)
    if (n.op == "Invoke" && n.GetString("function").value_or("") == fn) n.device = device;
  FunctionDef* f = g.library.FindMutable(fn);
  ASSERT_NE(f, nullptr);
  for (NodeDef& n : f->node) n.device = device;
}

TEST(DistributedSession, MainGraphCutAcrossRanks) {
  // On 4 ranks, rank 2 holds no node: an empty partition takes part too.
  int64_t sent = 0;
  CheckAcrossRanks(MainChain(), "x", {0, 5, -7}, &sent);
  if (WorldRank() == 1 || WorldRank() == WorldSize() - 1) EXPECT_GT(sent, 0);
}

TEST(DistributedSession, FetchesGatheredOnRankZero) {
  // "result" of fib on the last rank, gathered on rank 0, run after run.
  Graph g = reference::Fib();
  PlaceFunction(g, "fib", absl::StrCat("rank:", WorldSize() - 1));
  for (NodeDef& n : g.node)
    if (n.name == "result") n.device = absl::StrCat("rank:", WorldSize() - 1);
  DistributedOptions options;
  options.gather_fetches = true;
  std::unique_ptr<DistributedSession> s = CreateOrDie(g, options);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->RankOf("result"), WorldSize() - 1);
  for (int64_t n : {3, 7, 11}) {
    absl::StatusOr<std::vector<Tensor>> out = s->Run({{"n", Tensor::Scalar<int64_t>(n)}}, {"result", "n"});
    ASSERT_TRUE(out.ok()) << out.status();
    if (s->rank() == 0 || s->rank() == WorldSize() - 1) {
      ASSERT_TRUE((*out)[0].valid());
      EXPECT_EQ((*out)[0].scalar<int64_t>(), reference::NativeFib(n));
    }
  }
  EXPECT_TRUE(s->Close().ok());
}

TEST(DistributedSession, RecursionPlacedWhollyOnAnotherRank) {
  // The feed stays on rank 0: the argument crosses, then the result.
  Graph g = reference::Fib();
  PlaceFunction(g, "fib", absl::StrCat("rank:", WorldSize() - 1));
  for (NodeDef& n : g.node)
    if (n.name == "n") n.device = "rank:0";
  CheckAcrossRanks(g, "n", {0, 1, 10, 15});
}

TEST(DistributedSession, LoopPlacedWhollyOnAnotherRank) {
  Graph g = reference::WhileLoop();
  for (NodeDef& n : g.node)
    n.device = n.name == "n" || n.name == "result" ? "rank:0" : "rank:1";
  CheckAcrossRanks(g, "n", {0, 3, 100});
}

TEST(DistributedSession, LoopBodyCutAcrossRanks) {
  // The body's Add on rank 1, the predicate's Less on the last rank: every
  // iteration's tokens cross, and ranks without the loop's Enters or
  // NextIteration create its iterations as tokens and predicates come.
  Graph g = reference::WhileLoop();
  for (NodeDef& n : g.node) {
    if (n.op == "Add") n.device = "rank:1";
    if (n.op == "Less") n.device = absl::StrCat("rank:", WorldSize() - 1);
  }
  CheckAcrossRanks(g, "n", {0, 1, 7, 200});
  // Workers that steal iterations while arrivals create them.
  CheckAcrossRanks(g, "n", {0, 50, 300}, nullptr, /*num_workers=*/2);
}

// while (i < n) { i += 1; acc += S } with S the result of a slower loop
// on rank 0 and only the loop-invariant Enter of S and acc's Add on the
// last rank: rank 0's counter runs ahead, so the last rank gets the
// predicates of later iterations before S, the loop's invariant, comes.
TEST(DistributedSession, LaterIterationsBeforeTheLoopsInvariant) {
  using Outs = std::vector<Output>;
  GraphBuilder b;
  Output n = b.Placeholder("n", DType::kInt64);
  Output m = b.Placeholder("m", DType::kInt64);
  Output slow = b.While([&](const Outs& v) { return b.Less(v[0], m); },
                        [&](const Outs& v) { return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], v[0])}; },
                        {b.Const<int64_t>(0), b.Const<int64_t>(0)})[1];
  Outs out = b.While([&](const Outs& v) { return b.Less(v[0], n); },
                     [&](const Outs& v) { return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], slow)}; },
                     {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  b.Identity(out[1], "result");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  // The second loop's Enter of `slow` and the Add that reads it.
  const std::string slow_name = b.Name(slow);
  std::string enter;
  for (const NodeDef& node : g->node)
    if (node.op == "Enter" && !node.input.empty() && node.input[0] == slow_name) enter = node.name;
  ASSERT_FALSE(enter.empty());
  for (NodeDef& node : g->node) {
    const bool reads_slow = std::find(node.input.begin(), node.input.end(), enter) != node.input.end();
    node.device = absl::StrCat("rank:", node.name == enter || reads_slow ? WorldSize() - 1 : 0);
  }
  std::unique_ptr<DistributedSession> s = CreateOrDie(*g);
  ASSERT_NE(s, nullptr);
  for (int64_t iterations : {0, 1, 40}) {
    const int64_t slow_count = 20000;
    absl::StatusOr<std::vector<Tensor>> got =
        s->Run({{"n", Tensor::Scalar<int64_t>(iterations)}, {"m", Tensor::Scalar<int64_t>(slow_count)}}, {"result"});
    ASSERT_TRUE(got.ok()) << got.status();
    if (s->rank() == 0) EXPECT_EQ((*got)[0].scalar<int64_t>(), iterations * (slow_count * (slow_count - 1) / 2));
  }
  EXPECT_TRUE(s->Close().ok());
}

// s = 0; i = 0; while (i < n) { s += id(i); i += 1 }, fetched as "result",
// with id(x) = x + 1.
void AddLoopOfCalls(GraphBuilder& b) {
  using Outs = std::vector<Output>;
  (void)b.DefineFunction(FunctionSignature{"id", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs { return Outs{f.Add(a[0], f.Const<int64_t>(1))}; });
  Output n = b.Placeholder("n", DType::kInt64);
  Outs out = b.While([&](const Outs& v) { return b.Less(v[0], n); },
                     [&](const Outs& v) {
                       return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], b.Call("id", {v[0]})[0])};
                     },
                     {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  b.Identity(out[1], "result");
}

// AddLoopOfCalls with id on the last rank: rank 0's counter runs ahead of the calls, so it is still busy
// sending arguments when the first results come back. A busy worker takes
// them in (Worker::PollWhileBusy); before, every result waited for rank
// 0's loop to drain. The first results can come after the loop only if
// the last rank is descheduled for the whole loop: a few runs allowed.
TEST(DistributedSession, ABusyRankTakesInTokensWhileItWorks) {
  GraphBuilder b;
  AddLoopOfCalls(b);
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  PlaceFunction(*g, "id", absl::StrCat("rank:", WorldSize() - 1));
  std::unique_ptr<DistributedSession> s = CreateOrDie(*g);
  ASSERT_NE(s, nullptr);
  const int64_t calls = 20000;
  int64_t while_busy = 0;
  for (int attempt = 0; attempt < 5 && while_busy == 0; ++attempt) {
    DistributedRunStats remote;
    absl::StatusOr<std::vector<Tensor>> got = s->Run({{"n", Tensor::Scalar<int64_t>(calls)}}, {"result"}, nullptr,
                                                     &remote);
    ASSERT_TRUE(got.ok()) << got.status();
    if (s->rank() == 0) EXPECT_EQ((*got)[0].scalar<int64_t>(), calls * (calls + 1) / 2);
    ASSERT_EQ(remote.ranks.size(), static_cast<size_t>(WorldSize()));
    // Every rank decides alike whether to try again.
    while_busy = remote.ranks[0].tokens_received_while_busy;
    EXPECT_LE(while_busy, remote.ranks[0].tokens_received);
  }
  EXPECT_GT(while_busy, 0);
  EXPECT_TRUE(s->Close().ok());
}

// The same with two workers on every rank and a fib on rank 0 beside the
// loop, so that rank 0's workers run at once. A worker that polls beside
// the other delivers into shared frames (in such runs the frames tokens
// name are shared from their creation; the loop's iterations are, under
// the shared root); before, tokens waited until rank 0 was down to one
// worker or none. Both workers must overlap the results' arrival: a few
// runs allowed.
TEST(DistributedSession, ABusyRankWithSeveralWorkersTakesInTokens) {
  using Outs = std::vector<Output>;
  GraphBuilder b;
  AddLoopOfCalls(b);
  (void)b.DefineFunction(FunctionSignature{"fib", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output n = a[0];
                           return {f.Cond(n <= 1, [&] { return f.ConstLike(n, 1); },
                                          [&] { return f.Call("fib", {n - 1})[0] + f.Call("fib", {n - 2})[0]; })};
                         });
  b.Identity(b.Call("fib", {b.Placeholder("m", DType::kInt64)})[0], "fib_result");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  PlaceFunction(*g, "id", absl::StrCat("rank:", WorldSize() - 1));  // fib and the loop: rank 0
  DistributedOptions options;
  options.session.num_workers = 2;
  std::unique_ptr<DistributedSession> s = CreateOrDie(*g, options);
  ASSERT_NE(s, nullptr);
  const int64_t calls = 20000, m = 27;
  std::function<int64_t(int64_t)> fib = [&](int64_t k) { return k <= 1 ? int64_t{1} : fib(k - 1) + fib(k - 2); };
  int64_t beside_others = 0;
  for (int attempt = 0; attempt < 5 && beside_others == 0; ++attempt) {
    RunStats stats;
    DistributedRunStats remote;
    absl::StatusOr<std::vector<Tensor>> got =
        s->Run({{"n", Tensor::Scalar<int64_t>(calls)}, {"m", Tensor::Scalar<int64_t>(m)}}, {"result", "fib_result"},
               &stats, &remote);
    ASSERT_TRUE(got.ok()) << got.status();
    if (s->rank() == 0) {
      EXPECT_EQ((*got)[0].scalar<int64_t>(), calls * (calls + 1) / 2);
      EXPECT_EQ((*got)[1].scalar<int64_t>(), fib(m));
    }
    EXPECT_EQ(stats.live_frames_after_run, 0);
    ASSERT_EQ(remote.ranks.size(), static_cast<size_t>(WorldSize()));
    // Every rank decides alike whether to try again.
    beside_others = remote.ranks[0].tokens_received_beside_other_workers;
    EXPECT_LE(beside_others, remote.ranks[0].tokens_received_while_busy);
  }
  EXPECT_GT(beside_others, 0);
  EXPECT_TRUE(s->Close().ok());
}

TEST(DistributedSession, CallInALoopBodyCutAcrossRanks) {
  // s += fib(i % 10) with the calls on rank 1 and the loop's counter on
  // rank 0: a call site inside a cut loop, its whole callee on one rank.
  Graph g = reference::CallInWhile();
  for (NodeDef& n : g.node)
    if (n.op == "Invoke") n.device = "rank:1";
  PlaceFunction(g, "fib", "rank:1");
  CheckAcrossRanks(g, "n", {0, 4, 25});
  CheckAcrossRanks(g, "n", {40}, nullptr, /*num_workers=*/2);
}

TEST(DistributedSession, RecursionCutBetweenPredicateAndCalls) {
  // fib's predicate on rank 1, its calls (Call and Return) on rank 0: the
  // predicate crosses into every invocation, and rank 1 learns of each
  // invocation from its replicas of the Calls.
  Graph g = reference::Fib();
  FunctionDef* f = g.library.FindMutable("fib");
  ASSERT_NE(f, nullptr);
  for (NodeDef& n : f->node)
    if (n.op == "LessEqual") n.device = "rank:1";
  int64_t sent = 0;
  CheckAcrossRanks(g, "n", {0, 1, 2, 10}, &sent);
  // One predicate per invocation crosses: fib(10) makes 177 invocations.
  if (WorldRank() == 1) EXPECT_GE(sent, 177);
  CheckAcrossRanks(g, "n", {12}, nullptr, /*num_workers=*/2);
}

TEST(DistributedSession, RecursionWithCallsAndReturnsOnDifferentRanks) {
  // fib's sum of results on the last rank, its predicate on rank 1: the
  // Returns' values cross, and so does the sum back to the result Merge.
  Graph g = reference::Fib();
  FunctionDef* f = g.library.FindMutable("fib");
  ASSERT_NE(f, nullptr);
  for (NodeDef& n : f->node) {
    if (n.op == "LessEqual") n.device = "rank:1";
    if (n.op == "Add") n.device = absl::StrCat("rank:", WorldSize() - 1);
  }
  CheckAcrossRanks(g, "n", {0, 1, 2, 10});
}

// TDF_DISTRIBUTED_SEED=<seed> replays one placement.
TEST(DistributedSession, ReferenceProgramsPlacedRandomly) {
  uint32_t first = 1, last = 5;
  if (const char* env = std::getenv("TDF_DISTRIBUTED_SEED")) first = last = static_cast<uint32_t>(std::atoi(env));
  for (Program& p : Programs()) {
    for (uint32_t seed = first; seed <= last; ++seed) {
      SCOPED_TRACE(absl::StrCat(p.name, ", seed ", seed));
      absl::StatusOr<std::unique_ptr<Session>> one = Session::Create(p.graph);
      ASSERT_TRUE(one.ok()) << one.status();
      absl::StatusOr<std::vector<Tensor>> want = (*one)->Run(p.feeds, {"result"});
      ASSERT_TRUE(want.ok()) << want.status();
      Graph g = p.graph;
      PlaceRandomly(g, seed, WorldSize());
      std::unique_ptr<DistributedSession> s = CreateOrDie(g);
      ASSERT_NE(s, nullptr);
      RunStats stats;
      DistributedRunStats remote;
      absl::StatusOr<std::vector<Tensor>> got = s->Run(p.feeds, {"result"}, &stats, &remote);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(stats.live_frames_after_run, 0);
      // Tokens did cross: every rank reads the sum (a collective, as Run).
      int64_t sent = remote.tokens_sent, all = 0;
      MPI_Allreduce(&sent, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_GT(all, 0);
      if (std::getenv("TDF_TEST_VERBOSE") != nullptr && s->rank() == 0)
        std::fprintf(stderr, "%s seed %u: %lld tokens crossed\n", p.name.c_str(), seed, static_cast<long long>(all));
      if (s->RankOf("result") == s->rank()) {
        ASSERT_TRUE((*got)[0].valid());
        EXPECT_TRUE((*got)[0].Equals((*want)[0])) << (*got)[0].DebugString() << " vs " << (*want)[0].DebugString();
      }
      EXPECT_TRUE(s->Close().ok());
    }
  }
}

// x (rank 0) -> bad = Reshape(x, [2, 2]) (rank 1): x has 3 elements.
Graph FailsOnRankOne() {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat32);
  Output bad = b.Op("Reshape", {x}, {{"shape", std::vector<int64_t>{2, 2}}}, "bad");
  b.SetDevice(bad, "rank:1");
  b.Identity(b.Sum(bad), "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : Graph{};
}

TEST(DistributedSession, AKernelErrorOnOneRankFailsEveryRank) {
  std::unique_ptr<DistributedSession> s = CreateOrDie(FailsOnRankOne());
  ASSERT_NE(s, nullptr);
  for (int attempt = 0; attempt < 2; ++attempt) {
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> out =
        s->Run({{"x", Tensor::Vector<float>({1, 2, 3})}}, {"result"}, &stats);
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), HasSubstr("rank 1: node 'bad' (Reshape) at tag []")) << out.status();
  }
  // The session survives: a good feed runs.
  absl::StatusOr<std::vector<Tensor>> good =
      s->Run({{"x", Tensor::Vector<float>({1, 2, 3, 4})}}, {"result"});
  ASSERT_TRUE(good.ok()) << good.status();
  if (s->rank() == 0) EXPECT_EQ((*good)[0].scalar<float>(), 10.0f);
  EXPECT_TRUE(s->Close().ok());
}

// down(n) = n <= 0 ? 10 / n : down(n - 1), its Div on rank 1, the rest on
// rank 0: down(3) divides by zero at the bottom of the recursion.
Graph DividesByZeroAtTheBottom() {
  using Outs = std::vector<Output>;
  GraphBuilder b;
  (void)b.DefineFunction(FunctionSignature{"down", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output n = a[0];
                           return f.Cond(
                               f.LessEqual(n, f.Const<int64_t>(0)),
                               [&] { return Outs{f.Div(f.Const<int64_t>(10), n)}; },
                               [&] { return f.Call("down", {f.Sub(n, f.Const<int64_t>(1))}); });
                         });
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("down", {n})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph{};
  for (NodeDef& node : g->library.FindMutable("down")->node)
    if (node.op == "Div") node.device = "rank:1";
  return *g;
}

TEST(DistributedSession, AnErrorDeepInACutRecursionNamesRankNodeOpAndTag) {
  std::unique_ptr<DistributedSession> s = CreateOrDie(DividesByZeroAtTheBottom());
  ASSERT_NE(s, nullptr);
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> out = s->Run({{"n", Tensor::Scalar<int64_t>(3)}}, {"result"}, &stats);
  ASSERT_FALSE(out.ok());
  if (std::getenv("TDF_TEST_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  // Four invocations deep: the tag has four call-site labels.
  EXPECT_THAT(std::string(out.status().message()),
              ContainsRegex("^rank 1: node 'down/[^']*' \\(Div\\) at tag \\[[0-9]+, [0-9]+, [0-9]+, [0-9]+\\]: "
                            ".*integer division by zero"));
  // And the session goes on.
  absl::StatusOr<std::vector<Tensor>> good = s->Run({{"n", Tensor::Scalar<int64_t>(-2)}}, {"result"});
  ASSERT_TRUE(good.ok()) << good.status();
  if (s->RankOf("result") == s->rank()) EXPECT_EQ((*good)[0].scalar<int64_t>(), -5);
  EXPECT_TRUE(s->Close().ok());
}

TEST(DistributedSession, ASlowRankMeetsTheOthersDeadlineAndNothingHangs) {
  DistributedOptions options;
  options.session.deadline = absl::Milliseconds(300);
  options.peer_timeout = absl::Seconds(30);
  std::unique_ptr<DistributedSession> s = CreateOrDie(MainChain(), options);
  ASSERT_NE(s, nullptr);
  // Rank 1 comes late: rank 0 waits for its token past its deadline.
  if (s->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  absl::StatusOr<std::vector<Tensor>> out = s->Run({{"x", Tensor::Scalar<int64_t>(2)}}, {"result"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  // Whichever rank waiting for rank 1 fails first tells the others (on 3
  // ranks, rank 2 waits for it too).
  EXPECT_THAT(std::string(out.status().message()),
              ContainsRegex("^rank [02]: run exceeded its deadline; still waiting for '.*' from rank 1"));
  // Then everyone is on time again.
  absl::StatusOr<std::vector<Tensor>> again = s->Run({{"x", Tensor::Scalar<int64_t>(2)}}, {"result"});
  ASSERT_TRUE(again.ok()) << again.status();
  if (s->rank() == 0) EXPECT_EQ((*again)[0].scalar<int64_t>(), OneProcess(MainChain(), "x", 2));
  EXPECT_TRUE(s->Close().ok());
}

// Rank 1 does not come to the run's end within the peer timeout (it is
// stuck, or never calls Run): every other rank fails with a clear error
// within its deadline plus the peer timeout, never a hang, and says the
// session can no longer run (its ranks are out of step).
TEST(DistributedSession, ARankThatNeverComesFailsTheOthersWithinTheirTimeouts) {
  DistributedOptions options;
  options.session.deadline = absl::Milliseconds(300);
  options.peer_timeout = absl::Seconds(1);
  std::unique_ptr<DistributedSession> s = CreateOrDie(MainChain(), options);
  ASSERT_NE(s, nullptr);
  const auto start = std::chrono::steady_clock::now();
  if (s->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(8000));
  absl::StatusOr<std::vector<Tensor>> out = s->Run({{"x", Tensor::Scalar<int64_t>(2)}}, {"result"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(out.ok());
  if (s->rank() != 1) {
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
    EXPECT_LT(seconds, 7.0) << out.status();  // 0.3 s + 1 s (room for a loaded machine), not rank 1's 8 s
    absl::StatusOr<std::vector<Tensor>> again = s->Run({{"x", Tensor::Scalar<int64_t>(2)}}, {"result"});
    ASSERT_FALSE(again.ok());
    EXPECT_THAT(std::string(again.status().message()), ContainsRegex("out of step")) << again.status();
  }
  (void)s->Close();
}

TEST(DistributedSession, ACancelOnOneRankEndsTheRunOnEveryRank) {
  // A long loop cut across ranks (its Add on rank 1, its Less on the last
  // rank); rank 0 cancels its run from another thread.
  Graph g = reference::WhileLoop();
  for (NodeDef& n : g.node) {
    if (n.op == "Add") n.device = "rank:1";
    if (n.op == "Less") n.device = absl::StrCat("rank:", WorldSize() - 1);
  }
  std::unique_ptr<DistributedSession> s = CreateOrDie(g);
  ASSERT_NE(s, nullptr);
  CancellationToken cancel;
  RunOptions run_options;
  run_options.cancel = &cancel;
  std::thread canceller;
  if (s->rank() == 0)
    canceller = std::thread([&cancel] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      cancel.Cancel();
    });
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<Tensor>> out =
      s->Run({{"n", Tensor::Scalar<int64_t>(int64_t{1} << 40)}}, {"result"}, nullptr, nullptr, run_options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (canceller.joinable()) canceller.join();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_THAT(std::string(out.status().message()), ContainsRegex("^rank 0: ")) << out.status();
  EXPECT_LT(seconds, 60.0);  // ended by the cancel, not by the 10-minute default deadline
  // The session runs again.
  absl::StatusOr<std::vector<Tensor>> again = s->Run({{"n", Tensor::Scalar<int64_t>(5)}}, {"result"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(s->Close().ok());
}

TEST(DistributedSession, APartitionNeedsADistributedSession) {
  // A rank's partition alone, in a one-process Session: refused, not hung.
  Graph g = MainChain();
  PartitionOptions po;
  po.num_ranks = WorldSize();
  absl::StatusOr<PartitionedGraph> parts = PartitionGraph(g, po);
  ASSERT_TRUE(parts.ok()) << parts.status();
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(parts->partitions[0]);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run({{"x", Tensor::Scalar<int64_t>(1)}}, {"result"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("DistributedSession"));
}

}  // namespace
}  // namespace tdf
