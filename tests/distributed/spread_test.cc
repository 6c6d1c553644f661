// Invocations spread over ranks by tag (DistributedOptions::spread,
// docs/distributed.md "Spread invocations"), under mpirun on 2, 3 and 4
// ranks (tests/CMakeLists.txt): answers equal the one-process Session's,
// every rank ends with zero live frames, the work really leaves rank 0,
// and an error inside a remote invocation fails every rank.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "distributed/spread.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "tdf/builder.h"
#include "tdf/distributed.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using Feeds = std::vector<std::pair<std::string, Tensor>>;
using Outs = std::vector<Output>;

Feeds Ints(const std::vector<std::pair<std::string, int64_t>>& values) {
  Feeds feeds;
  for (const auto& [name, v] : values) feeds.emplace_back(name, Tensor::Scalar<int64_t>(v));
  return feeds;
}

int64_t OneProcess(const Graph& graph, const Feeds& feeds) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(graph);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return -1;
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(feeds, {"result"});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0].scalar<int64_t>() : -1;
}

// Runs `graph` with `policies` for each feed set and checks "result"
// (gathered on rank 0) against one process, and zero live frames on every
// rank. Returns the tokens this rank received over all runs.
int64_t CheckSpread(const Graph& graph, const std::vector<SpreadPolicy>& policies, const std::vector<Feeds>& runs,
                    int num_workers = 1) {
  DistributedOptions options;
  options.session.num_workers = num_workers;
  options.spread = policies;
  options.gather_fetches = true;
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(graph, options);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return 0;
  int64_t received = 0;
  for (const Feeds& feeds : runs) {
    SCOPED_TRACE(absl::StrCat("feed ", feeds[0].first, " = ", feeds[0].second.scalar<int64_t>(), ", rank ",
                              (*s)->rank()));
    RunStats stats;
    DistributedRunStats remote;
    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(feeds, {"result"}, &stats, &remote);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) continue;
    if ((*s)->rank() == 0) EXPECT_EQ((*out)[0].scalar<int64_t>(), OneProcess(graph, feeds));
    EXPECT_EQ(stats.live_frames_after_run, 0);
    received += remote.tokens_received;
  }
  EXPECT_TRUE((*s)->Close().ok());
  return received;
}

int WorldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

SpreadPolicy Policy(const std::string& fn, SpreadPolicy::Kind kind, int depth) {
  SpreadPolicy p;
  p.function = fn;
  p.kind = kind;
  p.max_depth = depth;
  return p;
}
SpreadPolicy Hash(const std::string& fn, int depth) { return Policy(fn, SpreadPolicy::Kind::kHashOfTag, depth); }
SpreadPolicy RoundRobin(const std::string& fn, int depth) { return Policy(fn, SpreadPolicy::Kind::kRoundRobin, depth); }

TEST(DistributedSession, SpreadFib) {
  std::vector<Feeds> runs;
  for (int64_t n : {0, 1, 2, 5, 12, 18}) runs.push_back(Ints({{"n", n}}));
  const int64_t received = CheckSpread(reference::Fib(), {Hash("fib", 4)}, runs);
  // Every rank but possibly one gets invocations (the hash of 8 leaves
  // and the levels above them reaches every rank of up to 4).
  int got = received > 0 ? 1 : 0, ranks_with_work = 0;
  MPI_Allreduce(&got, &ranks_with_work, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GE(ranks_with_work, WorldSize() - 1);
  CheckSpread(reference::Fib(), {RoundRobin("fib", 3)}, runs);
  CheckSpread(reference::Fib(), {Hash("fib", 1)}, runs, /*num_workers=*/2);
}

// A run's figures are exchanged in its collective end: every rank gets
// every rank's, and their sum; remote invocations are the spread levels'
// invocations whose rank is not their caller's.
TEST(DistributedSession, SpreadRunStatsOfEveryRankAndTheirSum) {
  DistributedOptions options;
  options.spread = {Hash("fib", 3)};
  options.gather_fetches = true;
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(reference::Fib(), options);
  ASSERT_TRUE(s.ok()) << s.status();
  const int me = (*s)->rank(), size = (*s)->num_ranks();
  RunStats stats;
  DistributedRunStats remote;
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(Ints({{"n", 12}}), {"result"}, &stats, &remote);
  ASSERT_TRUE(out.ok()) << out.status();
  if (me == 0) EXPECT_EQ((*out)[0].scalar<int64_t>(), OneProcess(reference::Fib(), Ints({{"n", 12}})));
  EXPECT_EQ(remote.rank, me);
  EXPECT_EQ(remote.firings, stats.firings);
  EXPECT_EQ(remote.live_firings, stats.live_firings);
  EXPECT_EQ(remote.frames_created, stats.frames_created);
  ASSERT_EQ(remote.ranks.size(), static_cast<size_t>(size));
  const RankRunStats& mine = remote.ranks[me];
  EXPECT_EQ(mine.rank, me);
  EXPECT_EQ(mine.tokens_sent, remote.tokens_sent);
  EXPECT_EQ(mine.bytes_received, remote.bytes_received);
  EXPECT_EQ(mine.remote_invocations, remote.remote_invocations);
  EXPECT_EQ(mine.firings, stats.firings);
  // The sums against an independent reduction of each rank's own figures.
  const int64_t own[] = {remote.tokens_sent, remote.bytes_sent, remote.tokens_received, remote.remote_invocations,
                         stats.firings, stats.frames_created};
  int64_t summed[6] = {};
  MPI_Allreduce(own, summed, 6, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(remote.total.rank, -1);
  EXPECT_EQ(remote.total.tokens_sent, summed[0]);
  EXPECT_EQ(remote.total.bytes_sent, summed[1]);
  EXPECT_EQ(remote.total.tokens_received, summed[2]);
  EXPECT_EQ(remote.total.remote_invocations, summed[3]);
  EXPECT_EQ(remote.total.firings, summed[4]);
  EXPECT_EQ(remote.total.frames_created, summed[5]);
  EXPECT_GT(remote.total.remote_invocations, 0);
  EXPECT_EQ(remote.total.tokens_sent, remote.total.tokens_received);  // every token arrived
  EXPECT_EQ(remote.total.bytes_sent, remote.total.bytes_received);
  // fib(12) to depth 3: every invocation of levels 1-3 is live (n >= 10).
  // Level k's invocation [0, s2, ..., sk] runs on HashRank of its path; it
  // is remote where its caller's rank differs. The outermost call's caller
  // is the main graph, whose Call may sit on either rank: 0 or 1 more.
  std::vector<int64_t> expected(size, 0);
  std::vector<std::vector<int>> level = {{0}};
  for (int depth = 1; depth <= 3; ++depth) {
    std::vector<std::vector<int>> next;
    for (const std::vector<int>& path : level) {
      const int rank = distributed::HashRank(path, size);
      if (depth > 1) {
        const std::vector<int> parent(path.begin(), path.end() - 1);
        if (distributed::HashRank(parent, size) != rank) ++expected[rank];
      }
      for (int site = 0; site < 2; ++site) {
        next.push_back(path);
        next.back().push_back(site);
      }
    }
    level = std::move(next);
  }
  const int first = distributed::HashRank({0}, size);
  for (int p = 0; p < size; ++p) {
    SCOPED_TRACE(absl::StrCat("rank ", p));
    EXPECT_EQ(remote.ranks[p].rank, p);
    const int64_t extra = remote.ranks[p].remote_invocations - expected[p];
    EXPECT_TRUE(extra == 0 || (extra == 1 && p == first && first != 0))
        << remote.ranks[p].remote_invocations << " remote invocations, expected " << expected[p] << " (first " << first
        << ")";
  }
  EXPECT_TRUE((*s)->Close().ok());
}

// Frames created on every rank together by one run of fib(n), spread.
int64_t FramesOnAllRanks(DistributedSession& s, int64_t n) {
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> out = s.Run(Ints({{"n", n}}), {"result"}, &stats);
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(stats.live_frames_after_run, 0);
  int64_t mine = stats.frames_created, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

TEST(DistributedSession, SpreadDeadCallsMakeNoRemoteInvocation) {
  // fib(1) is fib's base case: both recursive calls fire dead, so no rank
  // creates a level-2 frame; fib(2) makes two live calls, which do.
  DistributedOptions options;
  options.spread = {Hash("fib", 4)};
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(reference::Fib(), options);
  ASSERT_TRUE(s.ok()) << s.status();
  const int64_t base = FramesOnAllRanks(**s, 1);
  // A root per rank, and the level-1 invocation on each rank taking part.
  EXPECT_LE(base, 2 * WorldSize());
  EXPECT_EQ(FramesOnAllRanks(**s, 0), base);
  EXPECT_GT(FramesOnAllRanks(**s, 2), base);
  EXPECT_TRUE((*s)->Close().ok());
}

TEST(DistributedSession, SpreadOverSomeRanks) {
  // The main graph on rank 0, fib's invocations over ranks 1.. only: rank
  // 0 fires its few main-graph nodes and none of fib's.
  SpreadPolicy policy = Hash("fib", 4);
  for (int r = 1; r < WorldSize(); ++r) policy.ranks.push_back(r);
  std::vector<Feeds> runs;
  for (int64_t n : {0, 3, 15}) runs.push_back(Ints({{"n", n}}));
  CheckSpread(reference::Fib(), {policy}, runs);
  DistributedOptions options;
  options.spread = {policy};
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(reference::Fib(), options);
  ASSERT_TRUE(s.ok()) << s.status();
  RunStats stats;
  ASSERT_TRUE((*s)->Run(Ints({{"n", 15}}), {"result"}, &stats).ok());
  if ((*s)->rank() == 0) EXPECT_LT(stats.firings, 20) << "fib(15) makes 1973 invocations";
  EXPECT_TRUE((*s)->Close().ok());
  // A rank the session does not have is refused.
  options.spread[0].ranks = {WorldSize()};
  s = DistributedSession::Create(reference::Fib(), options);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), ContainsRegex("is not a rank of this session"));
}

TEST(DistributedSession, SpreadTak) {
  std::vector<Feeds> runs = {Ints({{"x", 0}, {"y", 0}, {"z", 0}}), Ints({{"x", 12}, {"y", 8}, {"z", 4}}),
                             Ints({{"x", 18}, {"y", 12}, {"z", 6}})};
  CheckSpread(reference::Tak(), {Hash("tak", 3)}, runs);
  CheckSpread(reference::Tak(), {RoundRobin("tak", 2)}, runs, /*num_workers=*/2);
}

TEST(DistributedSession, SpreadAck) {
  std::vector<Feeds> runs = {Ints({{"m", 0}, {"n", 3}}), Ints({{"m", 2}, {"n", 3}}), Ints({{"m", 3}, {"n", 3}})};
  CheckSpread(reference::Ack(), {Hash("ack", 5)}, runs);
}

// pair(n) = n <= 1 ? (1, 1) : (a + b, a) where (a, b) = pair(n - 1):
// two results cross back from every remote invocation.
Graph TwoResults() {
  GraphBuilder b;
  FunctionSignature sig{"pair", {{"n", DType::kInt64}}, {{"a", DType::kInt64}, {"b", DType::kInt64}}};
  (void)b.DefineFunction(sig, [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.LessEqual(n, f.Const<int64_t>(1)), [&] { return Outs{f.Const<int64_t>(1), f.Const<int64_t>(1)}; },
        [&] {
          Outs r = f.Call("pair", {f.Sub(n, f.Const<int64_t>(1))});
          return Outs{f.Add(r[0], r[1]), r[0]};
        });
  });
  Output n = b.Placeholder("n", DType::kInt64);
  Outs r = b.Call("pair", {n});
  b.Identity(b.Add(b.Mul(r[0], b.Const<int64_t>(1000000)), r[1]), "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : Graph{};
}

TEST(DistributedSession, SpreadTwoResults) {
  std::vector<Feeds> runs;
  for (int64_t n : {0, 1, 2, 7, 20}) runs.push_back(Ints({{"n", n}}));
  CheckSpread(TwoResults(), {RoundRobin("pair", 6)}, runs);
  CheckSpread(TwoResults(), {Hash("pair", 3)}, runs);
}

TEST(DistributedSession, SpreadLoopInsideRecursion) {
  std::vector<Feeds> runs;
  for (int64_t n : {0, 1, 4, 9}) runs.push_back(Ints({{"n", n}}));
  // The recursive function spread; its loop function wherever it is.
  CheckSpread(reference::WhileInFunction(), {Hash("f", 3)}, runs);
  // Both spread: each loopsum call runs on the rank of its tag.
  CheckSpread(reference::WhileInFunction(), {RoundRobin("f", 4), Hash("loopsum", 1)}, runs, /*num_workers=*/2);
}

TEST(DistributedSession, SpreadMoreReferencePrograms) {
  // A recursive call inside a loop (its site is in the main graph's loop
  // body: every iteration's call goes to the rank of that site's tag).
  std::vector<Feeds> loop_runs;
  for (int64_t n : {0, 3, 12}) loop_runs.push_back(Ints({{"n", n}}));
  CheckSpread(reference::CallInWhile(), {Hash("fib", 3)}, loop_runs);
  // Nested calls, mc91(mc91(n + 11)): a call's argument is another
  // call's result, from another rank.
  std::vector<Feeds> mc_runs;
  for (int64_t n : {0, 87, 100, 105}) mc_runs.push_back(Ints({{"n", n}}));
  CheckSpread(reference::McCarthy91(), {Hash("mc91", 5)}, mc_runs);
  // A deep linear recursion, spread for 3 levels then local.
  std::vector<Feeds> sum_runs;
  for (int64_t n : {0, 2, 500}) sum_runs.push_back(Ints({{"n", n}}));
  CheckSpread(reference::Sum(), {RoundRobin("sum", 3)}, sum_runs);
  // Two mutually independent recursions, both spread: nth's tail calls
  // and isprime's search for a divisor in each of them.
  std::vector<Feeds> prime_runs;
  for (int64_t n : {1, 4, 10}) prime_runs.push_back(Ints({{"n", n}}));
  CheckSpread(reference::Primes(), {Hash("nth", 4), RoundRobin("isprime", 2)}, prime_runs);
}

// down(n) = n <= 0 ? 10 / n : down(n - 1): divides by zero at the bottom.
Graph DividesByZeroAtTheBottom() {
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
  return g.ok() ? *g : Graph{};
}

TEST(DistributedSession, SpreadErrorInARemoteInvocationFailsEveryRank) {
  DistributedOptions options;
  // Round robin would put every level of this linear recursion (one
  // invocation per level) on rank 0: hash instead.
  options.spread = {Hash("down", 8)};
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(DividesByZeroAtTheBottom(), options);
  ASSERT_TRUE(s.ok()) << s.status();
  for (int attempt = 0; attempt < 2; ++attempt) {
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(Ints({{"n", 5}}), {"result"}, &stats);
    ASSERT_FALSE(out.ok());
    if (std::getenv("TDF_TEST_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(std::string(out.status().message()),
                ContainsRegex("^rank [0-9]+: node 'down/[^']*' \\(Div\\) at tag \\[[0-9, ]+\\]: .*integer division by zero"));
    // The user's function, not the spread pass's copy of it.
    EXPECT_THAT(std::string(out.status().message()), Not(HasSubstr("down__")));
  }
  // The session goes on, and the failed runs' frames are gone (a failed
  // run's RunStats count the frames it left, which the run then frees).
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> good = (*s)->Run(Ints({{"n", -2}}), {"result"}, &stats);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(stats.live_frames_after_run, 0);
  EXPECT_TRUE((*s)->Close().ok());
}

TEST(DistributedSession, SpreadErrorsNameTheFunctionNotItsCopies) {
  SpreadPolicy fib;
  fib.function = "fib";
  EXPECT_EQ(distributed::OriginalNames("node 'fib__spread_0_1/Add_3' (Add) and 'fib__rank12/n' in fib__rank0; "
                                       "'fibber__rank1', 'fib__rankx', 'fib__spread_'",
                                       {fib}),
            "node 'fib/Add_3' (Add) and 'fib/n' in fib; 'fibber__rank1', 'fib__rankx', 'fib__spread_'");
  EXPECT_EQ(distributed::OriginalNames("node 'fib__rank1/x'", {}), "node 'fib__rank1/x'");
}

TEST(DistributedSession, SpreadRefusesBadPolicies) {
  DistributedOptions options;
  options.spread = {Hash("nope", 2)};
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(reference::Fib(), options);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), ContainsRegex("no function 'nope'"));
  options.spread = {Hash("fib", 0)};
  EXPECT_FALSE(DistributedSession::Create(reference::Fib(), options).ok());
  options.spread = {Hash("fib", 40)};
  s = DistributedSession::Create(reference::Fib(), options);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), ContainsRegex("copies"));
}

}  // namespace
}  // namespace tdf
