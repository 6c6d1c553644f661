// tdf_distributed_bench (issue #29 benchmarks): under mpirun,
//
//   mpirun -np 2 bench/tdf_distributed_bench            # every case
//   mpirun -np 4 --oversubscribe bench/tdf_distributed_bench --fib=32 --tak
//   mpirun -np 2 bench/tdf_distributed_bench --no-call ...  # or --latency-only
//
// - "remote call": a loop of N iterations, each calling id(x) = x + 1
//   placed wholly on the last rank (Call -> body on another rank ->
//   Return), against the same graph run by a one-process Session on rank 0;
//   µs per call is the difference per iteration (needs 2 ranks or more).
//   The loop's counter runs ahead of the calls, so many calls are in
//   flight at once: this is the cost of a call in a pipeline.
// - "remote call latency": x = id(x) while x < N: each call waits for the
//   last one's result and the loop's predicate waits for it too, so every
//   iteration is one whole round trip (the predicate and the argument
//   going out, the result coming back) with nothing else in flight.
// - "spread": fib(n) and tak(24,16,8) with DistributedOptions::spread
//   (hash of the tag, or --round-robin, to --depth levels; tak to
//   --tak-depth, 4 by default: at 3 its 16 unequal subtrees gave the
//   busiest of 2 ranks 1.05 s of CPU, at 4 0.75 s, of 1.45 s on 1 rank),
//   one worker per rank; each
//   result is checked against native C++. Run it with -np 1, 2 and 4 and
//   compare the times: on one rank the graph is the plain program.
// - "cut body" (--cut-body=N, off by default): fib(N) with its predicate
//   on rank 1 and the rest of its body on rank 0 (the paper's scheme: a
//   body cut across ranks), against the same graph in one process on rank
//   0: messages per call (every rank's tokens over fib's invocations) and
//   µs per call.
//
// Prints one line per case on rank 0: the best of --reps runs, and the
// load average, since this machine is shared.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tdf/builder.h"
#include "tdf/distributed.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using Outs = std::vector<Output>;
using Feeds = std::vector<std::pair<std::string, Tensor>>;

double LoadAverage() {
  double load = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// s = 0; i = 0; while (i < n) { s += id(i); i++ } with id placed on `rank`.
Graph CallLoop(int rank) {
  GraphBuilder b;
  (void)b.DefineFunction(FunctionSignature{"id", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs { return Outs{f.Add(a[0], f.Const<int64_t>(1))}; });
  Output n = b.Placeholder("n", DType::kInt64);
  Outs out = b.While([&](const Outs& v) { return b.Less(v[0], n); },
                     [&](const Outs& v) {
                       return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], b.Call("id", {v[0]})[0])};
                     },
                     {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  b.Identity(out[1], "result");
  absl::StatusOr<Graph> g = b.Build();
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", g.status().ToString().c_str());
    std::exit(1);
  }
  FunctionDef* f = g->library.FindMutable("id");
  for (NodeDef& node : f->node) node.device = "rank:" + std::to_string(rank);
  return *g;
}

// x = 0; while (x < n) x = id(x), with id placed on `rank`: one call in
// flight at a time.
Graph ChainedCallLoop(int rank) {
  GraphBuilder b;
  (void)b.DefineFunction(FunctionSignature{"id", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                         [](GraphBuilder& f, const Outs& a) -> Outs { return Outs{f.Add(a[0], f.Const<int64_t>(1))}; });
  Output n = b.Placeholder("n", DType::kInt64);
  Outs out = b.While([&](const Outs& v) { return b.Less(v[0], n); },
                     [&](const Outs& v) { return Outs{b.Call("id", {v[0]})[0]}; }, {b.Const<int64_t>(0)});
  b.Identity(out[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", g.status().ToString().c_str());
    std::exit(1);
  }
  FunctionDef* f = g->library.FindMutable("id");
  for (NodeDef& node : f->node) node.device = "rank:" + std::to_string(rank);
  return *g;
}

struct Timing {
  double wall = 1e30;     // best wall seconds of the reps
  double max_cpu = 1e30;  // the busiest rank's CPU seconds in its best rep
  double sum_cpu = 0;     // all ranks' CPU seconds in that rep
  int64_t tokens = 0;     // tokens every rank sent in the last rep
};

// `reps` collective runs; checks "result" on rank 0. CPU time (every
// thread of the process: workers, the run's waiting thread, MPI's) says
// how the work divides when the machine gives the job less than a core
// per rank.
Timing TimeRuns(DistributedSession& s, const Feeds& feeds, int64_t expected, int reps) {
  Timing best;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = Now();
    const std::clock_t c0 = std::clock();
    RunStats stats;
    DistributedRunStats remote;
    absl::StatusOr<std::vector<Tensor>> out = s.Run(feeds, {"result"}, &stats, &remote);
    const double t = Now() - t0;
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    // TDF_BENCH_VERBOSE: how the work fell on the ranks.
    if (std::getenv("TDF_BENCH_VERBOSE") != nullptr)
      std::fprintf(stderr, "rank %d: %.3f s (%.3f s CPU), %lld firings, %lld tokens sent, %lld received\n", s.rank(),
                   t, cpu, static_cast<long long>(stats.firings), static_cast<long long>(remote.tokens_sent),
                   static_cast<long long>(remote.tokens_received));
    if (!out.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", s.rank(), out.status().ToString().c_str());
      std::exit(1);
    }
    if (s.rank() == 0 && (*out)[0].scalar<int64_t>() != expected) {
      std::fprintf(stderr, "wrong result %lld, expected %lld\n", static_cast<long long>((*out)[0].scalar<int64_t>()),
                   static_cast<long long>(expected));
      std::exit(1);
    }
    double max_cpu = 0, sum_cpu = 0;
    MPI_Allreduce(&cpu, &max_cpu, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&cpu, &sum_cpu, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    best.tokens = remote.total.tokens_sent;
    best.wall = std::min(best.wall, t);
    if (max_cpu < best.max_cpu) {
      best.max_cpu = max_cpu;
      best.sum_cpu = sum_cpu;
    }
  }
  return best;
}

std::unique_ptr<DistributedSession> CreateOrDie(const Graph& g, const DistributedOptions& options) {
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(g, options);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(s);
}

// Both remote call cases: the graph run across ranks (the call on the last
// rank), then by a one-process Session on rank 0; µs per call is the
// difference per iteration.
void RemoteCall(int rank, int size, int64_t calls, int reps, bool chained) {
  if (size < 2) return;
  DistributedOptions options;
  options.session.num_workers = 1;
  options.gather_fetches = true;
  const Graph g = chained ? ChainedCallLoop(size - 1) : CallLoop(size - 1);
  const int64_t expected = chained ? calls : calls * (calls + 1) / 2;
  std::unique_ptr<DistributedSession> s = CreateOrDie(g, options);
  const double remote = TimeRuns(*s, {{"n", Tensor::Scalar<int64_t>(calls)}}, expected, reps).wall;
  (void)s->Close();
  if (rank != 0) return;
  SessionOptions local_options;
  local_options.num_workers = 1;
  std::unique_ptr<Session> local = *Session::Create(g, local_options);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now();
    (void)local->Run({{"n", Tensor::Scalar<int64_t>(calls)}}, {"result"});
    best = std::min(best, Now() - t0);
  }
  std::printf("remote call%s  %d ranks  %lld calls: %.2f us/iteration across ranks, %.2f us one process, "
              "%.2f us/call round trip  (load %.1f)\n",
              chained ? " latency" : "", size, static_cast<long long>(calls), remote / calls * 1e6,
              best / calls * 1e6, (remote - best) / calls * 1e6, LoadAverage());
}

void Spread(int rank, int size, const char* label, const Graph& g, const std::string& fn, const Feeds& feeds,
            int64_t expected, int depth, bool round_robin, int reps) {
  DistributedOptions options;
  options.session.num_workers = 1;
  options.gather_fetches = true;
  SpreadPolicy policy;
  policy.function = fn;
  policy.kind = round_robin ? SpreadPolicy::Kind::kRoundRobin : SpreadPolicy::Kind::kHashOfTag;
  policy.max_depth = depth;
  options.spread = {policy};
  const double c0 = Now();
  std::unique_ptr<DistributedSession> s = CreateOrDie(g, options);
  const double created = Now() - c0;
  const Timing t = TimeRuns(*s, feeds, expected, reps);
  (void)s->Close();
  if (rank == 0)
    std::printf("spread %-14s %d ranks  %s depth %d  1 worker each: %.3f s; CPU %.3f s busiest rank, %.3f s all  "
                "(checked; created in %.3f s; load %.1f)\n",
                label, size, round_robin ? "round robin" : "hash", depth, t.wall, t.max_cpu, t.sum_cpu, created,
                LoadAverage());
}

// fib's invocations for fib(n): the root and two calls per n >= 2.
int64_t FibInvocations(int64_t n) { return n < 2 ? 1 : 1 + FibInvocations(n - 1) + FibInvocations(n - 2); }

// fib(n) with its predicate on rank 1, across ranks, then in one process.
void CutBody(int rank, int size, int64_t n, int reps) {
  if (size < 2) return;
  Graph g = reference::Fib();
  for (NodeDef& node : g.library.FindMutable("fib")->node)
    if (node.op == "LessEqual") node.device = "rank:1";
  DistributedOptions options;
  options.session.num_workers = 1;
  options.gather_fetches = true;
  const Feeds feeds = {{"n", Tensor::Scalar<int64_t>(n)}};
  std::unique_ptr<DistributedSession> s = CreateOrDie(g, options);
  const Timing cut = TimeRuns(*s, feeds, reference::NativeFib(n), reps);
  (void)s->Close();
  if (rank != 0) return;
  SessionOptions local_options;
  local_options.num_workers = 1;
  std::unique_ptr<Session> local = *Session::Create(reference::Fib(), local_options);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now();
    (void)local->Run(feeds, {"result"});
    best = std::min(best, Now() - t0);
  }
  const double calls = static_cast<double>(FibInvocations(n));
  std::printf("cut body fib(%lld)  %d ranks  predicate on rank 1: %.0f invocations, %.2f messages/call, "
              "%.2f us/call across ranks, %.3f us/call one process  (load %.1f)\n",
              static_cast<long long>(n), size, calls, static_cast<double>(cut.tokens) / calls, cut.wall / calls * 1e6,
              best / calls * 1e6, LoadAverage());
}

}  // namespace
}  // namespace tdf

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int64_t> fibs = {25, 28};
  bool tak = false, call = true, pipelined = true, round_robin = false;
  int depth = 6, tak_depth = 4, reps = 3;
  int64_t cut_body = 0;
  int64_t calls = 20000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--fib=", 0) == 0) {
      fibs.clear();
      for (absl::string_view v : absl::StrSplit(a.substr(6), ',', absl::SkipEmpty())) {
        int64_t n = 0;
        if (absl::SimpleAtoi(v, &n)) fibs.push_back(n);
      }
    } else if (a == "--tak") {
      tak = true;
    } else if (a == "--round-robin") {
      round_robin = true;
    } else if (a == "--no-call") {
      call = false;
    } else if (a == "--latency-only") {
      pipelined = false;
    } else if (a.rfind("--depth=", 0) == 0) {
      depth = std::atoi(a.c_str() + 8);
    } else if (a.rfind("--cut-body=", 0) == 0) {
      cut_body = std::atoll(a.c_str() + 11);
    } else if (a.rfind("--tak-depth=", 0) == 0) {
      tak_depth = std::atoi(a.c_str() + 12);
    } else if (a.rfind("--reps=", 0) == 0) {
      reps = std::atoi(a.c_str() + 7);
    } else if (a.rfind("--calls=", 0) == 0) {
      calls = std::atoll(a.c_str() + 8);
    } else {
      if (rank == 0) std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      MPI_Finalize();
      return 2;
    }
  }
  if (call) {
    if (pipelined) tdf::RemoteCall(rank, size, calls, reps, /*chained=*/false);
    tdf::RemoteCall(rank, size, calls, reps, /*chained=*/true);
  }
  for (int64_t n : fibs)
    tdf::Spread(rank, size, ("fib(" + std::to_string(n) + ")").c_str(), tdf::reference::Fib(), "fib",
                {{"n", tdf::Tensor::Scalar<int64_t>(n)}}, tdf::reference::NativeFib(n), depth, round_robin, reps);
  if (tak)
    tdf::Spread(rank, size, "tak(24,16,8)", tdf::reference::Tak(), "tak",
                {{"x", tdf::Tensor::Scalar<int64_t>(24)},
                 {"y", tdf::Tensor::Scalar<int64_t>(16)},
                 {"z", tdf::Tensor::Scalar<int64_t>(8)}},
                tdf::reference::NativeTak(24, 16, 8), tak_depth, round_robin, reps);
  if (cut_body > 0) tdf::CutBody(rank, size, cut_body, reps);
  MPI_Finalize();
  return 0;
}
