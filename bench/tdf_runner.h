// File: bench/tdf_runner.h
//
// Runs a reference program (tdf/reference_programs.h) in a tdf Session.
// The tdf cases are compiled in only when both the reference programs and
// a Session implementation exist (CMake defines TDF_BENCH_WITH_TDF after
// finding Session::Create in src/); otherwise Available() is false, says
// why, and the driver runs the native and oneTBB cases alone.
#ifndef TDF_BENCH_TDF_RUNNER_H_
#define TDF_BENCH_TDF_RUNNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tdf_bench {

struct TdfRunResult {
  int64_t value = 0;
  int64_t firings = 0;
  int64_t peak_live_frames = 0;
  int64_t frames_created = 0;
};

class TdfProgram {
 public:
  // False when the harness was built without the tdf executor; `why` says
  // what was missing.
  static bool Available(std::string* why);

  // Builds and compiles `family` ("fib", "ack", "tak", "primes", "sum",
  // "while", "chain", "callinwhile", "whileinfunction"). `args` are the
  // case's arguments; "chain" takes its length from args[0] at build time.
  static absl::StatusOr<std::unique_ptr<TdfProgram>> Create(const std::string& family,
                                                            const std::vector<int64_t>& args,
                                                            bool dynamic_mode, int workers);
  virtual ~TdfProgram() = default;

  // One Session::Run with the case's arguments as feeds.
  virtual absl::StatusOr<TdfRunResult> Run(const std::vector<int64_t>& args) = 0;

  // Seconds spent building the reference program's Graph (the last built
  // graph is reused by the next Create of the same case, which then reports
  // the first build's time) and in Session::Create.
  double build_seconds() const { return build_seconds_; }
  double compile_seconds() const { return compile_seconds_; }

 protected:
  double build_seconds_ = 0;
  double compile_seconds_ = 0;
};

}  // namespace tdf_bench

#endif  // TDF_BENCH_TDF_RUNNER_H_
