// tdf_create_bench: what Session::Create costs against the size of the
// program it is given (issue #26 item 5): time and peak memory per Create.
//
// Cases (static mode; every function body is a Cond unless said):
//   calls/N    main calls each of N functions once (reference::ManyCalls(N, N))
//   plaincalls/N  the same with bodies of one Add, f_i(n) = n + i, no Cond
//   sites/N    main calls one function N times (reference::ManyCalls(N, 1))
//   chain/N    N functions, each calling the next (reference::CallChain(N))
//   longbody/K one function whose body is K Conds in sequence (reference::LongBody(K))
//   widebody/K one function whose body makes K calls of another (reference::WideBody(K))
//   multiway/D one function whose body is a D-way if, D Conds each in the
//              else branch of the one before (reference::MultiWayIf(D))
//   opchain/L  a main graph of L Adds and no calls (reference::OpChain(L))
// Each case builds its graph once, outside the timing, and checks one run's
// answer against the native one. The time (manual, wall clock) is that of
// Session::Create(const Graph&) alone: validation, transformation,
// placement, compilation (and, for a call-free graph, the copy of its
// nodes); the CPU column also counts the untimed rest of each iteration
// (reading /proc, destroying the Session).
//
// Counters:
//   nodes          nodes of the input (main graph and library)
//   us_per_node    time per Create / nodes: flat when Create is linear
//   create_cpu_ms  CPU time of the thread that ran Create, per Create (all of
//                  Create runs on the calling thread; steadier than the wall
//                  time on a loaded machine)
//   create_mb      the peak memory of one Create: the process's resident
//                  high-water mark during Create (VmHWM, reset just before
//                  through /proc/self/clear_refs) minus its resident size just
//                  before; the largest over the iterations. Input graph excluded.
//   kept_mb        resident size with the Session alive minus just before Create
//   peak_rss_mb    the process's resident high-water mark during Create, input
//                  graph and benchmark harness included (absolute)
// Between iterations the freed Session is handed back to the OS
// (malloc_trim), so that one iteration's freed pages do not hide the next
// one's peak. Where /proc/self/clear_refs cannot be written the memory
// counters are absent.
//
//   tdf_create_bench [--quick] [google benchmark flags]
//   --quick: up to 10^4 functions and a 10^5-op chain (default: 10^5 and 10^6).
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace {

// Resident size and its high-water mark, in MB (/proc/self/status).
struct Rss {
  double current_mb = 0, peak_mb = 0;
};

Rss ReadRss() {
  Rss r;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &kb) == 1) r.current_mb = kb / 1024.0;
    if (std::sscanf(line.c_str(), "VmHWM: %ld kB", &kb) == 1) r.peak_mb = kb / 1024.0;
  }
  return r;
}

// Resets VmHWM to the current resident size (Linux >= 4.0).
bool ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

// CPU time of the calling thread: Create runs on it, and on a shared
// machine its wall time also counts other processes' turns.
double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

struct Shape {
  std::string family;  // calls, sites, chain, opchain
  int64_t size = 0;
};

// Main calls each of `functions` functions f_i(n) = n + i once and sums
// the results: the smallest body a function can have.
tdf::Graph PlainCalls(int64_t functions) {
  tdf::GraphBuilder b;
  for (int64_t i = 0; i < functions; ++i) {
    (void)b.DefineFunction({absl::StrCat("f", i), {{"n", tdf::DType::kInt64}}, {{"r", tdf::DType::kInt64}}},
                           [i](tdf::GraphBuilder& f, const std::vector<tdf::Output>& a) -> std::vector<tdf::Output> {
                             return {f.Add(a[0], f.Const<int64_t>(i))};
                           });
  }
  tdf::Output n = b.Placeholder("n", tdf::DType::kInt64);
  tdf::Output sum = b.Call("f0", {n})[0];
  for (int64_t i = 1; i < functions; ++i) sum = b.Add(sum, b.Call(absl::StrCat("f", i), {n})[0]);
  b.Identity(sum, "result");
  absl::StatusOr<tdf::Graph> g = b.Build();
  return g.ok() ? *std::move(g) : tdf::Graph();
}

tdf::Graph Build(const Shape& s) {
  if (s.family == "longbody") return tdf::reference::LongBody(s.size);
  if (s.family == "widebody") return tdf::reference::WideBody(s.size);
  if (s.family == "multiway") return tdf::reference::MultiWayIf(s.size);
  if (s.family == "plaincalls") return PlainCalls(s.size);
  if (s.family == "calls") return tdf::reference::ManyCalls(s.size, s.size);
  if (s.family == "sites") return tdf::reference::ManyCalls(s.size, 1);
  if (s.family == "chain") return tdf::reference::CallChain(s.size);
  return tdf::reference::OpChain(s.size);
}

int64_t Expected(const Shape& s, int64_t n) {
  if (s.family == "longbody") return tdf::reference::NativeLongBody(s.size, n);
  if (s.family == "widebody") return tdf::reference::NativeWideBody(s.size, n);
  if (s.family == "multiway") return tdf::reference::NativeMultiWayIf(s.size, n);
  if (s.family == "plaincalls") return tdf::reference::NativeManyCalls(s.size, s.size, n);  // n > 0: the same
  if (s.family == "calls") return tdf::reference::NativeManyCalls(s.size, s.size, n);
  if (s.family == "sites") return tdf::reference::NativeManyCalls(s.size, 1, n);
  if (s.family == "chain") return tdf::reference::NativeCallChain(s.size, n);
  return n + s.size;
}

void CreateCase(benchmark::State& state, const Shape& shape) {
  const tdf::Graph graph = Build(shape);
  int64_t nodes = static_cast<int64_t>(graph.node.size());
  for (const auto& [name, f] : graph.library.functions()) nodes += static_cast<int64_t>(f.node.size());
  tdf::SessionOptions options;
  options.num_workers = 1;
  {
    // One answer, checked: a fast Create of the wrong program proves nothing.
    auto session = tdf::Session::Create(graph, options);
    if (!session.ok()) {
      state.SkipWithError(std::string(session.status().message()).c_str());
      return;
    }
    const bool chain = shape.family == "opchain";
    const int64_t n = 3;
    auto out = (*session)->Run({{chain ? "x" : "n", tdf::Tensor::Scalar<int64_t>(n)}}, {"result"}, {});
    if (!out.ok() || (*out)[0].scalar<int64_t>() != Expected(shape, n)) {
      state.SkipWithError(out.ok() ? "wrong answer" : std::string(out.status().message()).c_str());
      return;
    }
  }
  malloc_trim(0);
  bool memory = true;
  double create_mb = 0, kept_mb = 0, peak_rss_mb = 0, seconds = 0, cpu_seconds = 0;
  for (auto _ : state) {
    memory &= ResetPeakRss();
    const Rss before = ReadRss();
    const double cpu_start = ThreadCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(graph, options);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cpu_seconds += ThreadCpuSeconds() - cpu_start;
    if (!session.ok()) {
      state.SkipWithError(std::string(session.status().message()).c_str());
      break;
    }
    state.SetIterationTime(s);
    seconds += s;
    const Rss after = ReadRss();
    create_mb = std::max(create_mb, after.peak_mb - before.current_mb);
    kept_mb = std::max(kept_mb, after.current_mb - before.current_mb);
    peak_rss_mb = std::max(peak_rss_mb, after.peak_mb);
    session->reset();
    malloc_trim(0);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  if (state.iterations() > 0) {
    state.counters["us_per_node"] = seconds * 1e6 / state.iterations() / nodes;
    state.counters["create_cpu_ms"] = cpu_seconds * 1e3 / state.iterations();
  }
  if (memory) {
    state.counters["create_mb"] = create_mb;
    state.counters["kept_mb"] = kept_mb;
    state.counters["peak_rss_mb"] = peak_rss_mb;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      continue;
    }
    args.push_back(argv[i]);
  }
  int nargs = static_cast<int>(args.size());
  std::vector<int64_t> sizes = {1000, 2000, 4000, 8000, 10000};
  if (!quick) sizes.push_back(100000);
  std::vector<Shape> shapes;
  for (const char* family : {"calls", "plaincalls", "sites", "chain"})
    for (int64_t n : sizes) shapes.push_back({family, n});
  // One large body: its passes must not scan the body per node.
  for (const char* family : {"longbody", "widebody", "multiway"})
    for (int64_t n : {int64_t{100}, int64_t{1000}, int64_t{4000}, int64_t{16000}}) shapes.push_back({family, n});
  shapes.push_back({"opchain", quick ? int64_t{100000} : int64_t{1000000}});
  for (const Shape& s : shapes) {
    const std::string name = absl::StrCat("create/", s.family, "/", s.size);
    benchmark::RegisterBenchmark(name.c_str(), [s](benchmark::State& state) { CreateCase(state, s); })
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
  }
  benchmark::Initialize(&nargs, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
