// File: bench/tdf_runner.cc
#include "tdf_runner.h"

#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#if defined(TDF_BENCH_WITH_TDF) && __has_include("tdf/reference_programs.h") && __has_include("tdf/session.h")
#define TDF_BENCH_TDF_ENABLED 1
#include "tdf/reference_programs.h"
#include "tdf/session.h"
#include "tdf/status.h"
#endif

namespace tdf_bench {

#ifdef TDF_BENCH_TDF_ENABLED
namespace {

struct Program {
  tdf::Graph graph;
  std::vector<std::string> feeds;  // placeholder per argument, in order
};

absl::StatusOr<Program> BuildProgram(const std::string& family, const std::vector<int64_t>& args) {
  namespace ref = tdf::reference;
  if (family == "fib") return Program{ref::Fib(), {"n"}};
  if (family == "ack") return Program{ref::Ack(), {"m", "n"}};
  if (family == "tak") return Program{ref::Tak(), {"x", "y", "z"}};
  if (family == "primes") return Program{ref::Primes(), {"n"}};
  if (family == "sum") return Program{ref::Sum(), {"n"}};
  if (family == "while") return Program{ref::WhileLoop(), {"n"}};
  if (family == "callinwhile") return Program{ref::CallInWhile(), {"n"}};
  if (family == "whileinfunction") return Program{ref::WhileInFunction(), {"n"}};
  // The chain's length is its structure; its one feed "x" is the start
  // value, args[1] (0), fed at run time so nothing can be folded.
  if (family == "chain") return Program{ref::OpChain(args.at(0)), {"", "x"}};
  return absl::InvalidArgumentError(absl::StrCat("no tdf program for benchmark family '", family, "'"));
}

class SessionProgram : public TdfProgram {
 public:

  SessionProgram(std::unique_ptr<tdf::Session> session, std::vector<std::string> feeds)
      : session_(std::move(session)), feeds_(std::move(feeds)) {}

  absl::StatusOr<TdfRunResult> Run(const std::vector<int64_t>& args) override {
    std::vector<std::pair<std::string, tdf::Tensor>> feeds;
    for (size_t i = 0; i < feeds_.size() && i < args.size(); ++i) {
      if (feeds_[i].empty()) continue;
      feeds.emplace_back(feeds_[i], tdf::Tensor::Scalar<int64_t>(args[i]));
    }
    tdf::RunStats stats;
    TDF_ASSIGN_OR_RETURN(std::vector<tdf::Tensor> out, session_->Run(feeds, {"result"}, {}, &stats));
    if (out.size() != 1) return absl::InternalError(absl::StrCat("expected 1 fetch, got ", out.size()));
    TDF_ASSIGN_OR_RETURN(int64_t value, out[0].ScalarValue<int64_t>());
    TdfRunResult r;
    r.value = value;
    r.firings = stats.firings;
    r.peak_live_frames = stats.peak_live_frames;
    r.frames_created = stats.frames_created;
    return r;
  }

 private:
  std::unique_ptr<tdf::Session> session_;
  std::vector<std::string> feeds_;
};

}  // namespace

bool TdfProgram::Available(std::string* why) { return true; }

absl::StatusOr<std::unique_ptr<TdfProgram>> TdfProgram::Create(const std::string& family,
                                                               const std::vector<int64_t>& args,
                                                               bool dynamic_mode, int workers) {
  // The variants of a case run one after the other: keep the last graph so
  // a big one (chain(10^6)) is built once, not once per variant.
  struct LastGraph {
    std::string key;
    Program program;
    double build_seconds = 0;
  };
  static LastGraph* last = new LastGraph;
  const std::string key = absl::StrCat(family, "/", absl::StrJoin(args, "/"));
  if (last->key != key) {
    last->key.clear();
    auto start = std::chrono::steady_clock::now();
    TDF_ASSIGN_OR_RETURN(last->program, BuildProgram(family, args));
    last->build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    last->key = key;
  }
  tdf::SessionOptions options;
  options.mode = dynamic_mode ? tdf::ExecutionMode::kDynamic : tdf::ExecutionMode::kStatic;
  options.num_workers = workers;
  // A/B of compiled units (issue #28): TDF_BENCH_COMPILE_THREADS=0 runs
  // every invocation node by node.
  if (const char* threads = std::getenv("TDF_BENCH_COMPILE_THREADS")) options.compile_threads = std::atoi(threads) != 0;
  // TDF_BENCH_COMPILE_CONTINUATIONS=0: compiled units without continuations.
  if (const char* cont = std::getenv("TDF_BENCH_COMPILE_CONTINUATIONS"))
    options.compile_continuations = std::atoi(cont) != 0;
  auto start = std::chrono::steady_clock::now();
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<tdf::Session> session, tdf::Session::Create(last->program.graph, options));
  double compile = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto program = std::make_unique<SessionProgram>(std::move(session), last->program.feeds);
  program->build_seconds_ = last->build_seconds;
  program->compile_seconds_ = compile;
  return std::unique_ptr<TdfProgram>(std::move(program));
}

#else  // !TDF_BENCH_TDF_ENABLED

bool TdfProgram::Available(std::string* why) {
  if (why != nullptr) {
    *why =
        "built without the tdf executor (needs include/tdf/reference_programs.h and a "
        "Session::Create definition under src/ at configure time; re-run cmake once they exist)";
  }
  return false;
}

absl::StatusOr<std::unique_ptr<TdfProgram>> TdfProgram::Create(const std::string& family,
                                                               const std::vector<int64_t>& args,
                                                               bool dynamic_mode, int workers) {
  std::string why;
  Available(&why);
  return absl::UnimplementedError(why);
}

#endif  // TDF_BENCH_TDF_ENABLED

}  // namespace tdf_bench
