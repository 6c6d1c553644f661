// File: bench/harness.h
//
// The pieces of tdf_bench shared by the driver (main.cc), the case lists
// (cases.cc) and the report (report.cc): what a case is, which variants
// (native, oneTBB, tdf static/dynamic at some worker count) run it, and what
// each variant measured.
#ifndef TDF_BENCH_HARNESS_H_
#define TDF_BENCH_HARNESS_H_

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tdf_bench {

inline constexpr double kNaN = NAN;

// One program at one size, e.g. fib(24).
struct Case {
  std::string family;          // "fib", "ack", "tak", "primes", "sum", "while", "chain", ...
  std::vector<int64_t> args;   // program arguments ("chain": length, start value)
  std::string label;           // "fib(24)"
  std::string name;            // "fib/24": prefix of the benchmark names
  double plot_x = kNaN;        // x on the chart; NaN: not plotted
  double paper_static_s = kNaN;   // seeds/002 table 1
  double paper_dynamic_s = kNaN;
  std::string unit = "calls";  // what the "calls" column counts: calls, iters, ops
  bool tbb = true;             // has a oneTBB baseline
  bool dynamic = true;         // has a tdf dynamic-mode run (no calls: same as static)
};

enum class Kind { kNative, kTbb, kStatic, kDynamic };

struct Variant {
  Kind kind;
  int workers;  // 1 for native
  // "native", "tbb/1w", "static/2w", ...
  std::string Key() const;
  // "native", "oneTBB 1w", "static 2w", ...
  std::string Description() const;
};

// What one benchmark (case x variant) measured.
struct Measurement {
  bool ran = false;
  bool ok = false;        // ran, every answer verified
  std::string error;
  double seconds = kNaN;  // real time per run: the median over rounds
  // One time per run per round (--rounds): each round runs every benchmark
  // once, in order, so a ratio of two variants pairs samples taken minutes
  // apart at most, whatever the machine's drift between rounds.
  std::vector<double> round_seconds;
  int64_t iterations = 0;
  bool warmed_up = false;  // the untimed first run is done (BenchmarkBody)
  // tdf runs (RunStats of the last run):
  int64_t firings = -1;
  int64_t peak_live_frames = -1;
  int64_t frames_created = -1;
  double build_s = kNaN;    // building the reference program's Graph
  double compile_s = kNaN;  // Session::Create
  // Peak RSS of a fresh process running this variant once (VmHWM), and that
  // process's VmHWM before it built anything.
  double rss_mb = kNaN;
  double rss_baseline_mb = kNaN;
};

struct CaseResult {
  Case c;
  int64_t calls = -1;  // Case::unit count
  std::map<std::string, Measurement> by_variant;  // Variant::Key()
  const Measurement* Find(const std::string& key) const {
    auto it = by_variant.find(key);
    return it == by_variant.end() ? nullptr : &it->second;
  }
};

// cases.cc
std::vector<Case> PaperCases(bool quick);
std::vector<Case> ScalingCases(bool quick);
// The right answer (closed form or loop where one exists; the native
// recursion for tak). Cached per case name.
int64_t Expected(const Case& c);
int64_t Calls(const Case& c);
// Runs the native C++ / oneTBB version once. The TBB version runs in an arena
// of `workers` threads.
int64_t RunNative(const Case& c);
int64_t RunTbb(const Case& c, int workers);

struct ReportOptions {
  std::vector<int> workers;  // worker counts run, ascending; workers[0] == 1
  bool tdf_available = false;
  std::string tdf_unavailable_reason;
  double rss_baseline_mb = kNaN;
  std::string csv_path, plot_path, json_path;
  std::string machine;  // MachineLine: threads and core-to-core latency
  int rounds = 1;
};

// The median of `v` (NaN when empty).
double Median(std::vector<double> v);
// a/b per round (paired by round), NaN-free: empty if either did not run in
// every round.
std::vector<double> RoundRatios(const Measurement* a, const Measurement* b);

// report.cc
void PrintTable(const std::vector<CaseResult>& results, const ReportOptions& options);
bool WriteCsv(const std::vector<CaseResult>& results, const ReportOptions& options);
bool WritePlot(const std::vector<CaseResult>& results, const ReportOptions& options);

}  // namespace tdf_bench

#endif  // TDF_BENCH_HARNESS_H_
