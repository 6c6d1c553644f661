// A distributed run fires what its fetches and targets need, on every rank
// (distributed/cut_pruning.h): under mpirun on 2, 3 and 4 ranks
// (tests/CMakeLists.txt, the DistributedSession.* suites). A Placeholder
// nothing needed reads need not be fed, an update nothing needs does not
// run, a loop on other ranks that nothing needs does not start, and every
// rank ends with zero live frames.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "distributed/test_programs.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tdf/builder.h"
#include "tdf/distributed.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;
using Feeds = std::vector<std::pair<std::string, Tensor>>;

using distributed_test::NumRanks;

std::string LastRank() { return absl::StrCat("rank:", NumRanks() - 1); }

Graph BuildOrDie(GraphBuilder& b) {
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

std::unique_ptr<DistributedSession> CreateOrDie(const Graph& graph) {
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(graph);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// The fetched int64 scalars, gathered on rank 0 (-1 elsewhere).
struct Outcome {
  absl::Status status;
  std::vector<int64_t> values;  // int64 scalars, -1 where not here
  std::vector<Tensor> tensors;
  int64_t tokens = 0;       // sent by all ranks
  int64_t live_frames = 0;  // this rank's, after the run
};

Outcome RunOn(DistributedSession& s, const Feeds& feeds, const std::vector<std::string>& fetches,
              const std::vector<std::string>& targets = {}) {
  Outcome o;
  RunStats stats;
  DistributedRunStats remote;
  RunOptions options;
  options.deadline = absl::Seconds(60);  // a stall fails, naming what waits
  absl::StatusOr<std::vector<Tensor>> out = s.Run(options, feeds, fetches, targets, &stats, &remote);
  o.status = out.status();
  o.tokens = remote.total.tokens_sent;
  o.live_frames = stats.live_frames_after_run;
  if (out.ok()) {
    o.tensors = *out;
    for (const Tensor& t : *out)
      o.values.push_back(t.valid() && t.dtype() == DType::kInt64 && t.num_elements() == 1 ? t.scalar<int64_t>() : -1);
  }
  return o;
}

// ra = x * 3 + 1 and rb = y * 5: each branch crosses ranks, and each has
// its own Placeholder on a rank of its own.
Graph TwoBranches() {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kInt64);
  b.SetDevice(x, "rank:0");
  Output a = b.Mul(x, b.Const<int64_t>(3));
  b.SetDevice(a, "rank:1");
  b.Identity(b.Add(a, b.Const<int64_t>(1)), "ra");
  Output y = b.Placeholder("y", DType::kInt64);
  b.SetDevice(y, LastRank());
  Output m = b.Mul(y, b.Const<int64_t>(5));
  b.SetDevice(m, "rank:1");
  b.Identity(m, "rb");
  return BuildOrDie(b);
}

TEST(DistributedSession, PruningFetchesOneBranchWithoutTheOthersFeed) {
  std::unique_ptr<DistributedSession> s = CreateOrDie(TwoBranches());
  ASSERT_NE(s, nullptr);
  const bool zero = s->rank() == 0;
  Outcome a = RunOn(*s, {{"x", Tensor::Scalar<int64_t>(4)}}, {"ra"});
  ASSERT_TRUE(a.status.ok()) << a.status;
  if (zero) EXPECT_EQ(a.values[0], 13);
  EXPECT_EQ(a.live_frames, 0);
  Outcome b = RunOn(*s, {{"y", Tensor::Scalar<int64_t>(7)}}, {"rb"});
  ASSERT_TRUE(b.status.ok()) << b.status;
  if (zero) EXPECT_EQ(b.values[0], 35);
  Outcome both = RunOn(*s, {{"x", Tensor::Scalar<int64_t>(4)}, {"y", Tensor::Scalar<int64_t>(7)}}, {"ra", "rb"});
  ASSERT_TRUE(both.status.ok()) << both.status;
  if (zero) EXPECT_THAT(both.values, ::testing::ElementsAre(13, 35));
  // One branch sends only its own tokens.
  EXPECT_LT(a.tokens, both.tokens);
  EXPECT_LT(b.tokens, both.tokens);
  EXPECT_EQ(a.tokens + b.tokens, both.tokens);
  // What a fetch needs must still be fed: every rank fails, naming it.
  Outcome missing = RunOn(*s, {{"y", Tensor::Scalar<int64_t>(7)}}, {"ra"});
  EXPECT_FALSE(missing.status.ok());
  EXPECT_THAT(missing.status.message(), HasSubstr("'x' (Placeholder): missing feed"));
  // The session goes on after the failed run.
  Outcome again = RunOn(*s, {{"x", Tensor::Scalar<int64_t>(1)}}, {"ra"});
  ASSERT_TRUE(again.status.ok()) << again.status;
  if (zero) EXPECT_EQ(again.values[0], 4);
  EXPECT_TRUE(s->Close().ok());
}

TEST(DistributedSession, PruningRunsAnUpdateOnAnotherRankOnlyWhenTargeted) {
  GraphBuilder b;
  Output v = b.Variable("v", Tensor::Scalar<int64_t>(10));
  b.SetDevice(v, "rank:1");
  Output x = b.Placeholder("x", DType::kInt64);
  b.SetDevice(x, "rank:0");
  Output loss = b.Mul(b.Read(v), x);
  b.SetDevice(loss, "rank:0");
  b.Identity(loss, "loss");
  Output step = b.AssignAdd(v, b.Const<int64_t>(1));
  const std::string step_name = b.Name(step);
  std::unique_ptr<DistributedSession> s = CreateOrDie(BuildOrDie(b));
  ASSERT_NE(s, nullptr);
  const bool zero = s->rank() == 0;
  const Feeds feeds = {{"x", Tensor::Scalar<int64_t>(2)}};
  for (int i = 0; i < 2; ++i) {  // fetching the loss takes no step
    Outcome o = RunOn(*s, feeds, {"loss"});
    ASSERT_TRUE(o.status.ok()) << o.status;
    if (zero) EXPECT_EQ(o.values[0], 20);
  }
  // The step alone, on rank 1, needs no feed.
  Outcome stepped = RunOn(*s, {}, {}, {step_name});
  ASSERT_TRUE(stepped.status.ok()) << stepped.status;
  EXPECT_TRUE(stepped.values.empty());
  EXPECT_EQ(stepped.live_frames, 0);
  Outcome after = RunOn(*s, feeds, {"loss"});
  ASSERT_TRUE(after.status.ok()) << after.status;
  if (zero) EXPECT_EQ(after.values[0], 22);
  EXPECT_TRUE(s->Close().ok());
}

// while (i < n) i += 1, its Add on rank 1 and its Less on the last rank (the
// loop starts on other ranks than those), beside other = z * z.
Graph LoopBesideAnotherOutput() {
  GraphBuilder b;
  Output n = b.Placeholder("n", DType::kInt64);
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) {
        Output c = b.Less(v[0], n);
        b.SetDevice(c, LastRank());
        return c;
      },
      [&](const std::vector<Output>& v) {
        Output next = b.Add(v[0], b.Const<int64_t>(1));
        b.SetDevice(next, "rank:1");
        return std::vector<Output>{next};
      },
      {b.Const<int64_t>(0)});
  b.Identity(out[0], "result");
  Output z = b.Placeholder("z", DType::kInt64);
  b.SetDevice(z, LastRank());
  Output sq = b.Mul(z, z);
  b.SetDevice(sq, "rank:1");
  b.Identity(sq, "other");
  return BuildOrDie(b);
}

TEST(DistributedSession, PruningLeavesOutALoopCutAcrossRanks) {
  std::unique_ptr<DistributedSession> s = CreateOrDie(LoopBesideAnotherOutput());
  ASSERT_NE(s, nullptr);
  const bool zero = s->rank() == 0;
  for (int i = 0; i < 2; ++i) {
    Outcome other = RunOn(*s, {{"z", Tensor::Scalar<int64_t>(6)}}, {"other"});
    ASSERT_TRUE(other.status.ok()) << other.status;
    if (zero) EXPECT_EQ(other.values[0], 36);
    EXPECT_EQ(other.live_frames, 0);
    Outcome loop = RunOn(*s, {{"n", Tensor::Scalar<int64_t>(40)}}, {"result"});
    ASSERT_TRUE(loop.status.ok()) << loop.status;
    if (zero) EXPECT_EQ(loop.values[0], 40);
    EXPECT_EQ(loop.live_frames, 0);
    // The loop's iterations cross ranks; z * z sends at most two tokens.
    EXPECT_LE(other.tokens, 2);
    EXPECT_GT(loop.tokens, 40);
  }
  Outcome both = RunOn(*s, {{"n", Tensor::Scalar<int64_t>(5)}, {"z", Tensor::Scalar<int64_t>(3)}}, {"other", "result"});
  ASSERT_TRUE(both.status.ok()) << both.status;
  if (zero) EXPECT_THAT(both.values, ::testing::ElementsAre(9, 5));
  EXPECT_TRUE(s->Close().ok());
}

TEST(DistributedSession, PruningTargetsARecursionOnAnotherRank) {
  // fib's body on the last rank, its result a target: it runs, nothing
  // comes back, and the frames it made are all freed.
  Graph g = reference::Fib();
  absl::StatusOr<std::unique_ptr<Session>> one = Session::Create(g);
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<std::vector<Tensor>> want = (*one)->Run({{"n", Tensor::Scalar<int64_t>(12)}}, {"result"});
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<std::string> functions;
  for (const auto& [name, f] : g.library.functions()) functions.push_back(name);
  for (const std::string& name : functions)
    for (NodeDef& n : g.library.FindMutable(name)->node) n.device = LastRank();
  for (NodeDef& n : g.node)
    if (n.op == "Invoke") n.device = LastRank();
  std::unique_ptr<DistributedSession> s = CreateOrDie(g);
  ASSERT_NE(s, nullptr);
  Outcome o = RunOn(*s, {{"n", Tensor::Scalar<int64_t>(12)}}, {}, {"result"});
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_TRUE(o.values.empty());
  EXPECT_EQ(o.live_frames, 0);
  EXPECT_GT(o.tokens, 0);
  Outcome fetched = RunOn(*s, {{"n", Tensor::Scalar<int64_t>(12)}}, {"result"});
  ASSERT_TRUE(fetched.status.ok()) << fetched.status;
  if (s->rank() == 0) EXPECT_EQ(fetched.values[0], (*want)[0].scalar<int64_t>());
  EXPECT_TRUE(s->Close().ok());
}

// Each reference program beside q_out = q * q + q, every node of both on
// a seeded random rank: fetching either leaves the other out (its feeds
// too), on every rank. TDF_DISTRIBUTED_SEED=<seed> replays one placement;
// TDF_DUMP=<dir> writes each placed graph there (for `mpirun tdf run`).
TEST(DistributedSession, PruningReferenceProgramsBesideAnotherOutput) {
  uint32_t first = 1, last = 3;
  if (const char* env = std::getenv("TDF_DISTRIBUTED_SEED")) first = last = static_cast<uint32_t>(std::atoi(env));
  for (distributed_test::Program& p : distributed_test::Programs()) {
    absl::StatusOr<std::unique_ptr<Session>> one = Session::Create(p.graph);
    ASSERT_TRUE(one.ok()) << one.status();
    absl::StatusOr<std::vector<Tensor>> want = (*one)->Run(p.feeds, {"result"});
    ASSERT_TRUE(want.ok()) << want.status();
    GraphBuilder b;
    Output q = b.Placeholder("q", DType::kInt64);
    Output sq = b.Op("Mul", {q, q}, {}, "q_square");
    b.Identity(b.Op("Add", {sq, q}, {}, "q_sum"), "q_out");
    const Graph other = BuildOrDie(b);
    for (uint32_t seed = first; seed <= last; ++seed) {
      SCOPED_TRACE(absl::StrCat(p.name, ", seed ", seed));
      if (std::getenv("TDF_TEST_VERBOSE") != nullptr) std::fprintf(stderr, "%s seed %u\n", p.name.c_str(), seed);
      Graph g = p.graph;
      g.node.insert(g.node.end(), other.node.begin(), other.node.end());
      distributed_test::PlaceRandomly(g, seed, NumRanks());
      if (const char* dump = std::getenv("TDF_DUMP")) (void)SaveGraph(g, absl::StrCat(dump, "/", p.name, seed, ".pbtxt"));
      std::unique_ptr<DistributedSession> s = CreateOrDie(g);
      ASSERT_NE(s, nullptr);
      Outcome q_only = RunOn(*s, {{"q", Tensor::Scalar<int64_t>(5)}}, {"q_out"});
      ASSERT_TRUE(q_only.status.ok()) << q_only.status;
      EXPECT_EQ(q_only.live_frames, 0);
      Outcome program = RunOn(*s, p.feeds, {"result"});
      ASSERT_TRUE(program.status.ok()) << program.status;
      EXPECT_EQ(program.live_frames, 0);
      Feeds all = p.feeds;
      all.emplace_back("q", Tensor::Scalar<int64_t>(3));
      Outcome both = RunOn(*s, all, {"result", "q_out"}, {"result"});
      ASSERT_TRUE(both.status.ok()) << both.status;
      EXPECT_EQ(both.live_frames, 0);
      // Fetches are on the rank of their node: gathered ones are compared
      // where they are.
      if (s->RankOf("q_out") == s->rank()) {
        EXPECT_EQ(q_only.values[0], 30);
        EXPECT_EQ(both.values[1], 12);
      }
      if (s->RankOf("result") == s->rank()) {
        EXPECT_TRUE(program.tensors[0].Equals((*want)[0])) << program.tensors[0].DebugString();
        EXPECT_TRUE(both.tensors[0].Equals((*want)[0])) << both.tensors[0].DebugString();
      }
      EXPECT_LE(q_only.tokens, 4);  // q_out's edges, at most
      EXPECT_TRUE(s->Close().ok());
    }
  }
}

}  // namespace
}  // namespace tdf
