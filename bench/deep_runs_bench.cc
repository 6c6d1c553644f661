// tdf_deep_runs_bench: how fast a deep run that fails comes back, and how
// much memory deep runs leave behind (issue #26, items 7 and 8).
//
// The program: deep(n) = n == 0 ? spin(0) : 1 + deep(n - 1), where spin is a
// While loop that never ends. A run descends n calls (n + 1 live frames)
// and then spins until its deadline or a cancel stops it: everything after
// that point is the teardown of n frames.
//
//   BM_DeadlineOvershoot/<depth>/<clients>  `clients` threads each run deep(depth)
//       with a deadline of kCutAfter on one Session; the time is the worst
//       client's (return - (start + deadline)), mean_ms the clients' mean.
//   BM_CancelToReturn/<depth>/<clients>     the same runs without a deadline,
//       each cancelled from another thread kCutAfter after it started; the
//       time is the worst client's (return - Cancel()).
//   BM_MemoryAfterConcurrentDeepRuns/<depth>/<clients>  `clients` threads each
//       run sum(depth) (depth live frames) concurrently on one Session; then
//       the Session is destroyed. Counters: RSS (MB) before the Session,
//       after the runs, after the Session is gone, and after an explicit
//       malloc_trim(0) (what the process could give back); in_use_mb is what
//       malloc says is allocated at the end. RSS is a process fact: run this
//       case alone (--benchmark_filter=Memory).
//
// min_depth is the shallowest depth any client's run reached before it was
// cut (RunStats::max_tag_depth): the teardown timed is that of >= min_depth
// frames. Report medians with spread: --benchmark_repetitions=5.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace {

using tdf::DType;
using tdf::GraphBuilder;
using tdf::Output;
using Clock = std::chrono::steady_clock;
using Outs = std::vector<Output>;

constexpr DType kI = DType::kInt64;
// Long enough for every client to reach its spin at depth 10^5, 8 clients
// on 2 cores included (min_depth shows it did).
constexpr auto kCutAfter = std::chrono::milliseconds(500);

tdf::Graph DeepThenSpin() {
  GraphBuilder b;
  (void)b.DefineFunction({"spin", {{"k", kI}}, {{"r", kI}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
    return {f.While([&](const Outs& v) { return f.GreaterEqual(v[0], f.Const<int64_t>(0)); },
                    [&](const Outs& v) { return Outs{f.Add(v[0], f.Const<int64_t>(1))}; }, {a[0]})[0]};
  });
  (void)b.DefineFunction({"deep", {{"n", kI}}, {{"r", kI}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.Equal(n, f.Const<int64_t>(0)), [&] { return f.Call("spin", {n}); },
        [&] { return Outs{f.Add(f.Const<int64_t>(1), f.Call("deep", {f.Sub(n, f.Const<int64_t>(1))})[0])}; });
  });
  Output n = b.Placeholder("n", kI);
  b.Identity(b.Call("deep", {n})[0], "result");
  absl::StatusOr<tdf::Graph> g = b.Build();
  if (!g.ok()) {
    std::fprintf(stderr, "DeepThenSpin: %s\n", g.status().ToString().c_str());
    std::abort();
  }
  return *std::move(g);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Cut {
  double latency_ms = 0;  // return - (deadline or Cancel())
  int64_t depth = 0;
  bool expected_code = false;
};

enum class How { kDeadline, kCancel };

// One round: `clients` concurrent runs on `session`, each cut by `how`.
std::vector<Cut> RunRound(tdf::Session& session, int64_t depth, int clients, How how) {
  std::vector<Cut> cuts(clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      tdf::CancellationToken token;
      Clock::time_point cancelled_at{};
      std::thread canceller;
      const Clock::time_point start = Clock::now();
      if (how == How::kCancel) {
        canceller = std::thread([&] {
          std::this_thread::sleep_until(start + kCutAfter);
          cancelled_at = Clock::now();
          token.Cancel();
        });
      }
      tdf::RunStats stats;
      absl::StatusOr<std::vector<tdf::Tensor>> out =
          session.Run({{"n", tdf::Tensor::Scalar<int64_t>(depth)}}, {"result"}, {}, &stats,
                      how == How::kCancel ? &token : nullptr);
      const Clock::time_point end = Clock::now();
      if (canceller.joinable()) canceller.join();
      Cut& cut = cuts[c];
      cut.depth = stats.max_tag_depth;
      if (how == How::kDeadline) {
        cut.latency_ms = Ms(end - (start + kCutAfter));
        cut.expected_code = out.status().code() == absl::StatusCode::kDeadlineExceeded;
      } else {
        cut.latency_ms = Ms(end - cancelled_at);
        cut.expected_code = out.status().code() == absl::StatusCode::kCancelled;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return cuts;
}

void CutBenchmark(benchmark::State& state, How how) {
  const int64_t depth = state.range(0);
  const int clients = static_cast<int>(state.range(1));
  tdf::SessionOptions options;
  if (how == How::kDeadline) options.deadline = absl::FromChrono(kCutAfter);
  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(DeepThenSpin(), options);
  if (!session.ok()) {
    state.SkipWithError(session.status().ToString().c_str());
    return;
  }
  double sum_ms = 0, worst_ms = 0;
  int64_t min_depth = INT64_MAX, runs = 0;
  for (auto _ : state) {
    std::vector<Cut> cuts = RunRound(**session, depth, clients, how);
    double round_worst = 0;
    for (const Cut& cut : cuts) {
      if (!cut.expected_code) {
        state.SkipWithError("a run did not fail with the expected code");
        return;
      }
      round_worst = std::max(round_worst, cut.latency_ms);
      sum_ms += cut.latency_ms;
      min_depth = std::min(min_depth, cut.depth);
      ++runs;
    }
    worst_ms = std::max(worst_ms, round_worst);
    state.SetIterationTime(round_worst / 1e3);
  }
  state.counters["mean_ms"] = sum_ms / static_cast<double>(std::max<int64_t>(runs, 1));
  state.counters["worst_ms"] = worst_ms;
  state.counters["min_depth"] = static_cast<double>(min_depth);
}

void BM_DeadlineOvershoot(benchmark::State& state) { CutBenchmark(state, How::kDeadline); }
void BM_CancelToReturn(benchmark::State& state) { CutBenchmark(state, How::kCancel); }

BENCHMARK(BM_DeadlineOvershoot)
    ->ArgNames({"depth", "clients"})
    ->Args({100'000, 1})
    ->Args({100'000, 8})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CancelToReturn)
    ->ArgNames({"depth", "clients"})
    ->Args({100'000, 1})
    ->Args({100'000, 8})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

double RssMb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double MallocInUseMb() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd) / (1 << 20);
}

void BM_MemoryAfterConcurrentDeepRuns(benchmark::State& state) {
  const int64_t depth = state.range(0);
  const int clients = static_cast<int>(state.range(1));
  double before = 0, after_runs = 0, after_destroy = 0, after_trim = 0, in_use = 0;
  for (auto _ : state) {
    before = RssMb();
    {
      absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(tdf::reference::Sum());
      if (!session.ok()) {
        state.SkipWithError(session.status().ToString().c_str());
        return;
      }
      std::vector<std::thread> threads;
      std::atomic<int> failures{0};
      for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&] {
          absl::StatusOr<std::vector<tdf::Tensor>> out =
              (*session)->Run({{"n", tdf::Tensor::Scalar<int64_t>(depth)}}, {"result"});
          if (!out.ok() || out->at(0).scalar<int64_t>() != tdf::reference::NativeSum(depth)) ++failures;
        });
      }
      for (std::thread& t : threads) t.join();
      if (failures.load() != 0) {
        state.SkipWithError("a run failed");
        return;
      }
      after_runs = RssMb();
    }
    after_destroy = RssMb();
    in_use = MallocInUseMb();
    malloc_trim(0);
    after_trim = RssMb();
  }
  state.counters["rss_before_mb"] = before;
  state.counters["rss_after_runs_mb"] = after_runs;
  state.counters["rss_after_destroy_mb"] = after_destroy;
  state.counters["rss_after_trim_mb"] = after_trim;
  state.counters["in_use_mb"] = in_use;
}

BENCHMARK(BM_MemoryAfterConcurrentDeepRuns)
    ->ArgNames({"depth", "clients"})
    ->Args({1'000'000, 8})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
