// File: bench/main.cc
//
// tdf_bench: the benchmark harness of issue #5. Registers one Google
// Benchmark per (case, variant) -- native C++ recursion, oneTBB task_group
// (a task per call) at 1, 2 (and N) threads, tdf static and dynamic mode at
// 1, 2 (and N) workers -- runs them one after the other in this process,
// checks every answer against the oracle, measures each variant's peak RSS
// in a fresh child process, and prints one table (plus CSV, JSON and a
// gnuplot chart).
//
//   tdf_bench --quick                 small sizes, well under a minute
//   tdf_bench                         the paper's sizes (long)
//   tdf_bench --filter=fib --workers=4 --csv=out.csv --plot=out.png --json=out.json
//   tdf_bench --benchmark_min_time=2  (--benchmark_* flags go to Google Benchmark)
#include <pthread.h>
#include <regex.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "harness.h"
#include "machine.h"
#include "tbb_baseline.h"
#include "tdf_runner.h"

namespace tdf_bench {
namespace {

// Deep native and oneTBB recursion: a oneTBB chain call (task_group + wait)
// takes about 850 bytes of C stack, so sum(10^6) needs ~850 MB. Only what is
// touched becomes resident.
constexpr size_t kStackBytes = size_t{4} << 30;

struct Flags {
  bool quick = false;
  int workers = 2;
  std::string filter;
  std::string json, csv = "tdf_bench.csv", plot = "tdf_bench.png";
  bool rss = true;
  bool verbose = false;
  std::string probe;  // internal: run one benchmark once, print VmHWM
  std::vector<std::string> benchmark_args;
  bool user_min_time = false;
  int rounds = 1;
};

void PrintUsage() {
  std::fprintf(stderr,
               "usage: tdf_bench [--quick] [--workers=N] [--filter=REGEX] [--json=PATH] [--csv=PATH]\n"
               "                 [--plot=PATH.png] [--no-rss] [--verbose] [--rounds=N] [--benchmark_*=...]\n"
               "  --quick        small sizes (well under a minute)\n"
               "  --rounds=N     run every benchmark N times, round after round; times are medians and\n"
               "                 ratios (tdf/oneTBB, 1w/2w) are medians of per-round ratios with their range\n"
               "  --workers=N    also run tdf and oneTBB with N workers (1 and 2 always run)\n"
               "  --filter=REGEX run the benchmarks whose name (e.g. fib/24/static/2w) matches\n"
               "  --json=PATH    Google Benchmark JSON output\n"
               "  --csv=PATH     table as CSV (default tdf_bench.csv; empty to skip)\n"
               "  --plot=PATH    gnuplot PNG chart (default tdf_bench.png; empty to skip)\n"
               "  --no-rss       skip the per-variant peak-RSS child processes\n"
               "  --verbose      Google Benchmark's own console output on stderr\n");
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name, std::string* out) {
      std::string prefix = absl::StrCat(name, "=");
      if (arg.rfind(prefix, 0) != 0) return false;
      *out = arg.substr(prefix.size());
      return true;
    };
    std::string v;
    if (arg == "--quick") {
      flags->quick = true;
    } else if (value("--workers", &v)) {
      if (!absl::SimpleAtoi(v, &flags->workers) || flags->workers < 1) {
        std::fprintf(stderr, "tdf_bench: --workers wants a positive integer, got '%s'\n", v.c_str());
        return false;
      }
    } else if (value("--rounds", &v)) {
      if (!absl::SimpleAtoi(v, &flags->rounds) || flags->rounds < 1) {
        std::fprintf(stderr, "tdf_bench: --rounds wants a positive integer, got '%s'\n", v.c_str());
        return false;
      }
    } else if (value("--filter", &flags->filter) || value("--json", &flags->json) ||
               value("--csv", &flags->csv) || value("--plot", &flags->plot) || value("--probe", &flags->probe)) {
    } else if (arg == "--no-rss") {
      flags->rss = false;
    } else if (arg == "--verbose") {
      flags->verbose = true;
    } else if (arg.rfind("--benchmark_", 0) == 0) {
      if (arg.rfind("--benchmark_min_time", 0) == 0) flags->user_min_time = true;
      flags->benchmark_args.push_back(arg);
    } else {
      if (arg != "--help" && arg != "-h") std::fprintf(stderr, "tdf_bench: unknown flag '%s'\n", arg.c_str());
      PrintUsage();
      return false;
    }
  }
  return true;
}

std::vector<int> WorkerCounts(const Flags& flags) {
  std::vector<int> counts = {1, 2};
  if (flags.workers > 2) counts.push_back(flags.workers);
  return counts;
}

// One registered benchmark.
struct Bench {
  int case_index;
  Variant variant;
  std::string name;  // "fib/24/static/1w"
};

struct State {
  Flags flags;
  bool tdf_available = false;
  std::string tdf_why;
  std::vector<CaseResult> results;
  std::vector<Bench> benches;
  std::map<std::string, int> bench_by_name;
  int started = -1;  // index of the benchmark whose progress line is open
  bool tty = false;
  int wrong_answers = 0;
  int failures = 0;
};

State* g_state = nullptr;

Measurement& MeasurementOf(const Bench& b) {
  return g_state->results[b.case_index].by_variant[b.variant.Key()];
}

std::vector<Variant> VariantsOf(const Case& c, const std::vector<int>& workers, bool tdf) {
  std::vector<Variant> v = {{Kind::kNative, 1}};
  if (c.tbb) {
    for (int w : workers) v.push_back({Kind::kTbb, w});
  }
  if (tdf) {
    for (int w : workers) {
      v.push_back({Kind::kStatic, w});
      if (c.dynamic) v.push_back({Kind::kDynamic, w});
    }
  }
  return v;
}

// ---- progress -------------------------------------------------------------

std::string FormatSeconds(double s) {
  char buf[32];
  if (std::isnan(s)) return "-";
  if (s < 1e-6) {
    std::snprintf(buf, sizeof buf, "%.0fns", s * 1e9);
  } else if (s < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.1fus", s * 1e6);
  } else if (s < 1) {
    std::snprintf(buf, sizeof buf, "%.1fms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2fs", s);
  }
  return buf;
}

void ProgressStart(int index) {
  if (g_state->started == index) return;
  const Bench& b = g_state->benches[index];
  if (g_state->tty) std::fputs("\r\033[K", stderr);
  std::fprintf(stderr, "[%d/%zu] %s %s ...", index + 1, g_state->benches.size(),
               g_state->results[b.case_index].c.label.c_str(), b.variant.Description().c_str());
  std::fflush(stderr);
  g_state->started = index;
}

void ProgressDone(const Measurement& m) {
  if (g_state->started < 0) return;
  if (m.ok) {
    std::fprintf(stderr, " %s", FormatSeconds(m.seconds).c_str());
  } else {
    std::fprintf(stderr, " FAILED");
  }
  // On a terminal the next line overwrites this one; failures stay.
  std::fputs(g_state->tty && m.ok ? "" : "\n", stderr);
  std::fflush(stderr);
  g_state->started = -1;
}

// ---- running one variant ---------------------------------------------------

// Error messages can carry a whole tag (a recursion-limit error lists ~10^6
// labels): keep the start, say how much was cut.
std::string Truncate(std::string message) {
  constexpr size_t kMax = 600;
  if (message.size() <= kMax) return message;
  size_t cut = message.size() - kMax;
  message.resize(kMax);
  absl::StrAppend(&message, "... [", cut, " more characters]");
  return message;
}

// The tdf program of the benchmark that ran last, kept so Google Benchmark's
// repeated calls of a benchmark function compile it once.
struct CachedProgram {
  std::string name;
  std::unique_ptr<TdfProgram> program;
  std::string error;
};

CachedProgram& ProgramFor(const Bench& b, const Case& c) {
  static CachedProgram* cache = new CachedProgram;
  if (cache->name != b.name) {
    cache->program.reset();
    cache->error.clear();
    cache->name = b.name;
    absl::StatusOr<std::unique_ptr<TdfProgram>> p =
        TdfProgram::Create(c.family, c.args, b.variant.kind == Kind::kDynamic, b.variant.workers);
    if (p.ok()) {
      cache->program = *std::move(p);
      Measurement& m = MeasurementOf(b);
      m.build_s = cache->program->build_seconds();
      m.compile_s = cache->program->compile_seconds();
    } else {
      cache->error = Truncate(absl::StrCat("creating the session: ", p.status().ToString()));
    }
  }
  return *cache;
}

// Runs the benchmark once; false with *error on failure.
bool RunOnce(const Bench& b, const Case& c, int64_t* value, TdfRunResult* stats, std::string* error) {
  switch (b.variant.kind) {
    case Kind::kNative:
      *value = RunNative(c);
      return true;
    case Kind::kTbb:
      *value = RunTbb(c, b.variant.workers);
      return true;
    case Kind::kStatic:
    case Kind::kDynamic: {
      CachedProgram& p = ProgramFor(b, c);
      if (!p.program) {
        *error = p.error;
        return false;
      }
      absl::StatusOr<TdfRunResult> r = p.program->Run(c.args);
      if (!r.ok()) {
        *error = Truncate(absl::StrCat("Session::Run: ", r.status().ToString()));
        return false;
      }
      *stats = *r;
      *value = r->value;
      return true;
    }
  }
  return false;
}

void BenchmarkBody(benchmark::State& state, int index) {
  const Bench& b = g_state->benches[index];
  const Case& c = g_state->results[b.case_index].c;
  Measurement& m = MeasurementOf(b);
  ProgressStart(index);
  const int64_t expected = Expected(c);
  if (b.variant.kind == Kind::kStatic || b.variant.kind == Kind::kDynamic) ProgramFor(b, c);  // compile untimed
  // One untimed run per variant: a process's first deep recursion faults in
  // the memory its frames need, later runs reuse it (sum(10^6): 0.72 s
  // first, 0.17 s after). A case that takes longer than the minimum time is
  // timed over one iteration, which would otherwise carry that cost alone
  // (Google Benchmark 1.7's per-benchmark MinWarmUpTime is not applied).
  if (!m.warmed_up) {
    m.warmed_up = true;
    int64_t value = 0;
    TdfRunResult stats;
    std::string error;
    (void)RunOnce(b, c, &value, &stats, &error);  // checked on the timed runs
  }
  for (auto _ : state) {
    int64_t value = 0;
    TdfRunResult stats;
    std::string error;
    bool ran = RunOnce(b, c, &value, &stats, &error);
    benchmark::DoNotOptimize(value);
    if (ran && value != expected) {
      error = absl::StrCat("WRONG ANSWER: ", c.label, " ", b.variant.Description(), " returned ", value,
                           ", expected ", expected, " (native oracle)");
      ++g_state->wrong_answers;
    }
    if (!error.empty()) {
      m.ran = true;
      m.ok = false;
      m.error = error;
      std::fprintf(stderr, "\n*** %s: %s\n", b.name.c_str(), error.c_str());
      state.SkipWithError(error.c_str());
      break;
    }
    if (stats.firings >= 0 && (b.variant.kind == Kind::kStatic || b.variant.kind == Kind::kDynamic)) {
      m.firings = stats.firings;
      m.peak_live_frames = std::max(m.peak_live_frames, stats.peak_live_frames);  // varies with workers
      m.frames_created = stats.frames_created;
    }
  }
  state.SetLabel(c.label);
}

// ---- collecting Google Benchmark's results ---------------------------------

class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit CollectingReporter(bool verbose) : verbose_(verbose) {
    console_.SetOutputStream(&std::cerr);
    console_.SetErrorStream(&std::cerr);
  }
  bool ReportContext(const Context& context) override {
    return verbose_ ? console_.ReportContext(context) : true;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    if (verbose_) console_.ReportRuns(runs);
    for (const Run& run : runs) {
      auto it = g_state->bench_by_name.find(run.run_name.function_name);
      if (it == g_state->bench_by_name.end()) continue;
      Measurement& m = MeasurementOf(g_state->benches[it->second]);
      m.ran = true;
      if (run.error_occurred) {
        m.ok = false;
        if (m.error.empty()) m.error = run.error_message;
        ++g_state->failures;
        ProgressDone(m);
        continue;
      }
      if (run.run_type != Run::RT_Iteration || run.iterations <= 0) continue;
      // Each round (and each --benchmark_repetitions run) is one sample.
      m.round_seconds.push_back(run.real_accumulated_time / static_cast<double>(run.iterations));
      m.iterations += run.iterations;
      m.seconds = Median(m.round_seconds);
      m.ok = m.error.empty();  // a round that failed fails the variant
      ProgressDone(m);
    }
  }
  void Finalize() override {
    if (verbose_) console_.Finalize();
  }

 private:
  bool verbose_;
  benchmark::ConsoleReporter console_{benchmark::ConsoleReporter::OO_None};
};

// ---- peak RSS in a fresh process -------------------------------------------

// VmHWM (peak resident set) of this process, in KiB; -1 if unreadable.
int64_t ReadVmHwmKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// --probe=NAME: run benchmark NAME once and print the VmHWM before and after.
int Probe(const std::string& name) {
  auto it = g_state->bench_by_name.find(name);
  if (it == g_state->bench_by_name.end()) {
    std::fprintf(stderr, "tdf_bench: --probe: no benchmark '%s'\n", name.c_str());
    return 2;
  }
  const Bench& b = g_state->benches[it->second];
  const Case& c = g_state->results[b.case_index].c;
  int64_t before = ReadVmHwmKb();
  int64_t value = 0;
  TdfRunResult stats;
  std::string error;
  if (!RunOnce(b, c, &value, &stats, &error)) {
    std::fprintf(stderr, "tdf_bench: --probe %s: %s\n", name.c_str(), error.c_str());
    return 1;
  }
  benchmark::DoNotOptimize(value);
  std::printf("TDF_BENCH_PROBE %lld %lld\n", static_cast<long long>(before),
              static_cast<long long>(ReadVmHwmKb()));
  return 0;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

// Runs `exe --probe=NAME`; false if the child failed.
bool RunProbe(const std::string& exe, const Bench& b, double* baseline_mb, double* peak_mb) {
  std::string cmd = absl::StrCat("'", exe, "' --probe='", b.name, "'", g_state->flags.quick ? " --quick" : "",
                                 " --workers=", g_state->flags.workers);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return false;
  char line[256];
  bool found = false;
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    long long before = 0, after = 0;
    if (std::sscanf(line, "TDF_BENCH_PROBE %lld %lld", &before, &after) == 2) {
      *baseline_mb = before / 1024.0;
      *peak_mb = after / 1024.0;
      found = true;
    }
  }
  int rc = pclose(pipe);
  return found && rc == 0;
}

void MeasureRss() {
  std::string exe = SelfExe();
  std::vector<int> todo;
  for (size_t i = 0; i < g_state->benches.size(); ++i) {
    const Bench& b = g_state->benches[i];
    const Measurement& m = MeasurementOf(b);
    // One worker: the memory a run needs, not the pool's.
    if (m.ok && b.variant.workers == 1) todo.push_back(static_cast<int>(i));
  }
  for (size_t k = 0; k < todo.size(); ++k) {
    const Bench& b = g_state->benches[todo[k]];
    if (g_state->tty) std::fputs("\r\033[K", stderr);
    std::fprintf(stderr, "[rss %zu/%zu] %s %s ...", k + 1, todo.size(),
                 g_state->results[b.case_index].c.label.c_str(), b.variant.Description().c_str());
    std::fflush(stderr);
    Measurement& m = MeasurementOf(b);
    bool ok = RunProbe(exe, b, &m.rss_baseline_mb, &m.rss_mb);
    if (ok) {
      std::fprintf(stderr, " %.1f MB%s", m.rss_mb, g_state->tty ? "" : "\n");
    } else {
      std::fprintf(stderr, " probe failed\n");
    }
  }
  if (g_state->tty && !todo.empty()) std::fputs("\r\033[K", stderr);
}

// ---- main ------------------------------------------------------------------

int RealMain(int argc, char** argv) {
  State state;
  g_state = &state;
  if (!ParseFlags(argc, argv, &state.flags)) return 2;
  const Flags& flags = state.flags;
  state.tty = isatty(STDERR_FILENO) && flags.probe.empty();
  state.tdf_available = TdfProgram::Available(&state.tdf_why);
  // Before any other TBB use, so the arena's worker threads get it.
  std::shared_ptr<void> stack = tbb_baseline::ConfigureThreadStack(kStackBytes);
  std::shared_ptr<void> parallelism = tbb_baseline::AllowParallelism(
      std::max<int>(flags.workers, static_cast<int>(std::thread::hardware_concurrency())));

  // POSIX regex: std::regex reports a bad pattern only by throwing.
  regex_t filter;
  if (!flags.filter.empty()) {
    int rc = regcomp(&filter, flags.filter.c_str(), REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
      char msg[256];
      regerror(rc, &filter, msg, sizeof msg);
      std::fprintf(stderr, "tdf_bench: bad --filter regex '%s': %s\n", flags.filter.c_str(), msg);
      return 2;
    }
  }
  const std::vector<int> workers = WorkerCounts(flags);
  const double round_trip_start = CoreToCoreRoundTripNs();
  std::vector<Case> cases = PaperCases(flags.quick);
  for (Case& c : ScalingCases(flags.quick)) cases.push_back(std::move(c));
  for (const Case& c : cases) {
    std::vector<Bench> mine;
    for (const Variant& v : VariantsOf(c, workers, state.tdf_available)) {
      std::string name = absl::StrCat(c.name, "/", v.Key());
      if (!flags.filter.empty() && regexec(&filter, name.c_str(), 0, nullptr, 0) != 0) continue;
      mine.push_back({static_cast<int>(state.results.size()), v, name});
    }
    if (mine.empty()) continue;
    CaseResult r;
    r.c = c;
    state.results.push_back(r);
    for (Bench& b : mine) {
      state.bench_by_name[b.name] = static_cast<int>(state.benches.size());
      state.benches.push_back(std::move(b));
    }
  }
  if (!flags.filter.empty()) regfree(&filter);
  if (!flags.probe.empty()) return Probe(flags.probe);
  if (state.benches.empty()) {
    std::fprintf(stderr, "tdf_bench: no benchmark matches --filter=%s\n", flags.filter.c_str());
    return 2;
  }

  for (size_t i = 0; i < state.benches.size(); ++i) {
    int index = static_cast<int>(i);
    benchmark::internal::Benchmark* bm = benchmark::RegisterBenchmark(
        state.benches[i].name.c_str(), [index](benchmark::State& s) { BenchmarkBody(s, index); });
    bm->UseRealTime()->Unit(benchmark::kMillisecond);
    if (flags.quick && !flags.user_min_time) bm->MinTime(0.05);
  }

  std::vector<std::string> gb_args = {argv[0]};
  if (!flags.json.empty()) {
    gb_args.push_back("--benchmark_out=" + flags.json);
    gb_args.push_back("--benchmark_out_format=json");
  }
  for (const std::string& a : flags.benchmark_args) gb_args.push_back(a);
  std::vector<char*> gb_argv;
  for (std::string& a : gb_args) gb_argv.push_back(a.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  benchmark::Initialize(&gb_argc, gb_argv.data());
  if (benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data())) return 2;

  if (!state.tdf_available) std::fprintf(stderr, "tdf_bench: tdf cases skipped: %s\n", state.tdf_why.c_str());
  CollectingReporter reporter(flags.verbose);
  // Rounds, not Google Benchmark's repetitions: those run one benchmark's
  // repetitions back to back, so the machine's drift (up to 2x between
  // hours here) lands between variants instead of between rounds.
  for (int round = 0; round < flags.rounds; ++round) {
    if (flags.rounds > 1) std::fprintf(stderr, "%s[round %d/%d]\n", state.tty ? "\r\033[K" : "", round + 1, flags.rounds);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    if (state.wrong_answers > 0) break;
  }
  if (state.tty) std::fputs("\r\033[K", stderr);
  for (CaseResult& r : state.results) r.calls = Calls(r.c);
  if (flags.rss) MeasureRss();

  ReportOptions options;
  options.workers = workers;
  options.rounds = flags.rounds;
  options.tdf_available = state.tdf_available;
  options.tdf_unavailable_reason = state.tdf_why;
  options.csv_path = flags.csv;
  options.plot_path = flags.plot;
  options.json_path = flags.json;
  options.machine = MachineLine(round_trip_start, CoreToCoreRoundTripNs());
  PrintTable(state.results, options);
  std::fflush(stdout);  // the table before the files' "wrote" lines on stderr
  bool files_ok = WriteCsv(state.results, options);
  files_ok = WritePlot(state.results, options) && files_ok;

  std::fflush(stdout);
  if (state.wrong_answers > 0 || state.failures > 0) {
    std::fprintf(stderr, "\ntdf_bench: FAILED: %d wrong answer(s), %d failed benchmark(s) (see *** lines above)\n",
                 state.wrong_answers, state.failures);
    return 1;
  }
  return files_ok ? 0 : 1;
}

struct MainArgs {
  int argc;
  char** argv;
  int rc;
};

void* MainThread(void* p) {
  MainArgs* args = static_cast<MainArgs*>(p);
  args->rc = RealMain(args->argc, args->argv);
  return nullptr;
}

}  // namespace
}  // namespace tdf_bench

int main(int argc, char** argv) {
  // Everything runs on a thread with a 4 GiB stack: native sum(10^6) and the
  // oneTBB chains (a nested task_group wait per call) recurse deeply.
  tdf_bench::MainArgs args{argc, argv, 1};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, tdf_bench::kStackBytes);
  pthread_t thread;
  if (pthread_create(&thread, &attr, tdf_bench::MainThread, &args) != 0) {
    std::perror("tdf_bench: pthread_create");
    return 1;
  }
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  std::fflush(stdout);
  return args.rc;
}
