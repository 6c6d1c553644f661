// Seeded structural mutation of runnable graphs. The project's promise is
// that bad input never crashes, hangs or leaks: every malformed graph, wrong
// type, missing feed, kernel error or runaway recursion ends in an
// absl::Status that names the node, its op and the tag. The serialization
// mutation test (tests/serialize/mutation_test.cc) only feeds corrupted bytes
// to the loaders and Validate; here the reference programs (differentiated
// and training ones too, and already transformed ones, whose Call/Return
// attrs are then open to mutation) are mutated at the Graph / NodeDef level
// -- inputs rewired, dropped, duplicated, ops and attrs changed, nodes
// deleted, renamed or duplicated, constants set to 0 or to a huge or negative
// recursion depth, signatures changed -- and everything Session::Create
// accepts is run, in static and dynamic mode, with the program's feeds and
// with other feeds, fetches, targets, a cancellation and concurrent runs.
//
// Each mutant must end in a Status (OK, or failed with a message), by its
// deadline (a watchdog aborts naming the mutant when a run outlives it by
// far), without an exception escaping, and leave a session that can be
// destroyed; a successful run leaves no frame live. Failed runs whose message
// names no node are counted and printed, not failed: the summary shows how
// far the messages are from the promise. Under the asan preset this also
// catches memory errors and leaks.
//
// Most mutants are drawn until one passes Validate (the executor is where
// the bugs are), the rest are kept as drawn (Create must reject them).
//
// The test is split over several files (one held it all and outgrew the
// size limit):
//   mutated_graphs.h               this header: the programs, the known
//                                  bugs, mutants, the crash reporter and
//                                  watchdog, and the runs and their checks
//   mutated_graphs_mutator.h       the structural mutations (Mutator)
//   mutated_graphs_test.cc         the seeded mutants (EveryMutantEndsInAStatus)
//                                  and the known crashers; it says how to
//                                  choose, skip and trace seeds
//   mutated_graphs_repros_test.cc  the seed-free repros (MinimalRepros, ...)
#ifndef TDF_TESTS_RUNTIME_MUTATED_GRAPHS_H_
#define TDF_TESTS_RUNTIME_MUTATED_GRAPHS_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/mutated_graphs_mutator.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/graph.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"
#include "tdf/session.h"
#include "tdf/tensor.h"
#include "tdf/validate.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TDF_MUTATED_GRAPHS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TDF_MUTATED_GRAPHS_SANITIZER 1
#endif
#endif
#ifdef TDF_MUTATED_GRAPHS_SANITIZER
#include <sanitizer/common_interface_defs.h>
#endif

namespace tdf {
namespace mutated_graphs {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

inline constexpr uint64_t kNumMutants = 4000;
inline constexpr absl::Duration kDeadline = absl::Seconds(2);
// A run still going this long after its deadline counts as a hang: the
// watchdog prints the mutant and aborts (a hung test names nothing).
inline constexpr absl::Duration kHangAfter = absl::Seconds(60);
// A run that ends this long after its deadline is an overrun (a failure).
inline constexpr absl::Duration kOverrunSlack = absl::Seconds(3);

// Mutants that the library mishandled, found by this test and fixed since
// (Compile rejects what the executor could not route: an Enter nothing
// reads, an edge into another frame, a call_site of two frames or out of
// range, a Retval inside a loop; a run refuses to fetch an Enter or a
// Call): kept as regression cases. Crashing ones (memory errors) run in a
// child process (KnownCrashers, in mutated_graphs_test.cc), so that one
// crash does not hide every other outcome; the others run with the rest
// and their failures carry the note.
//
// The seeds name mutants of today's reference programs, builder and passes;
// when those change, the mutants change too: rerun with
// TDF_MUTATED_GRAPHS_TRACE=1 under the asan preset to find the crashers
// again. MinimalRepros (mutated_graphs_repros_test.cc) has each bug's
// smallest form, seed-free.
struct KnownBug {
  uint64_t seed;
  bool crashes;
  const char* note;
};
inline const std::vector<KnownBug> kKnownBugs = {
    // Bug A: an Enter that no node of its loop reads (duplicated, or its
    // Merge lost it) never gets a target block (executable.cc sets
    // target_block only from a consumer); FireEnter reads
    // exe_->blocks[-1]: heap-buffer-overflow / SEGV in FireEnter.
    {2038, true, "bug A: an Enter that nothing in its loop reads (executor reads blocks[-1] in FireEnter)"},
    {2129, true, "bug A: an Enter that nothing in its loop reads (executor reads blocks[-1] in FireEnter)"},
    // Bug B: in a transformed graph, a Call or Return whose call_site is
    // another site's (a main-graph Call given the callee's recursive site):
    // results are delivered into the wrong frame's slots.
    {430, true, "bug B: a Call whose call_site is another site's (heap-buffer-overflow in DeliverEdge)"},
    {2395, true, "bug B: a Call whose call_site is another site's (heap-use-after-free in DeliverEdge)"},
    {3723, true, "bug B: a Call whose call_site is another site's (heap-buffer-overflow in DeliverEdge)"},
    // Bug D: in a transformed graph, a function's argument Merge that lists
    // its Call input twice: FireEnter dereferences a LoopState at 0x1.
    {914, true, "bug D: an argument Merge listing its Call input twice (LoopState* 0x1 in FireEnter)"},
    // Bug F: fetching or targeting a main-graph Enter or Call (whose output
    // lives in a child frame) succeeds but ends with frames live (the run
    // then frees them: memory does not grow over 200k such runs).
    {403, false, "bug F: targeting a main-graph Call leaves frames live"},
    {2182, false, "bug F: fetching a main-graph Enter leaves a frame live"},
    {2429, false, "bug F: fetching a main-graph Call leaves frames live"},
    {2820, false, "bug F: targeting a main-graph Enter leaves a frame live"},
    {3385, false, "bug F: fetching a main-graph Enter leaves a frame live"},
    {3414, false, "bug F: targeting a main-graph Enter leaves a frame live"},
    {3507, false, "bug F: targeting a main-graph Call leaves frames live"},
};

inline const KnownBug* FindKnownBug(uint64_t seed) {
  for (const KnownBug& b : kKnownBugs)
    if (b.seed == seed) return &b;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Programs

struct Program {
  std::string name;
  Graph graph;
  Feeds feeds;                       // small inputs
  std::vector<std::string> fetches;  // "result" (and gradients)
  std::string step;                  // a training step to target ("" if none)
};

// `g` with the gradients of "result" with respect to `xs` as further fetches.
inline Program WithGradients(std::string name, Graph g, Feeds feeds, const std::vector<std::string>& xs) {
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, xs);
  EXPECT_TRUE(grads.ok()) << name << ": " << grads.status();
  std::vector<std::string> fetches = {"result"};
  if (grads.ok()) fetches.insert(fetches.end(), grads->begin(), grads->end());
  return Program{std::move(name), std::move(g), std::move(feeds), std::move(fetches), ""};
}

// y = x^n by a while loop (float, differentiable through the loop).
inline Graph PowLoop() {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat64);
  Output n = b.Placeholder("n", DType::kInt64);
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Mul(v[1], x)};
      },
      {b.Const<int64_t>(0), b.Const<double>(1.0)});
  b.Identity(out[1], "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

// result = (exp(w, n) - 2)^2 for a variable w, its gradient and an SGD step.
inline Program Training() {
  GraphBuilder b;
  EXPECT_TRUE(b.DefineFunction({"exp", {{"x", DType::kFloat64}, {"n", DType::kInt64}}, {{"y", DType::kFloat64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 return f.Cond(
                                     f.Equal(a[1], f.Const<int64_t>(0)),
                                     [&] { return std::vector<Output>{f.Const<double>(1.0)}; },
                                     [&] {
                                       return std::vector<Output>{
                                           f.Mul(a[0], f.Call("exp", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])};
                                     });
                               })
                  .ok());
  Output w = b.Variable("w", F64(1.1));
  Output rw = b.Read(w);
  Output e = b.Sub(b.Call("exp", {rw, b.Placeholder("n", DType::kInt64)})[0], b.Const<double>(2.0));
  b.Identity(b.Mul(e, e), "result");
  absl::StatusOr<Graph> built = b.Build();
  EXPECT_TRUE(built.ok()) << built.status();
  Program p = WithGradients("training", built.ok() ? *std::move(built) : Graph{}, {{"n", I64(4)}}, {b.Name(rw)});
  if (p.fetches.size() == 2) {
    absl::StatusOr<std::string> step = AddSgdStep(p.graph, {"w"}, {p.fetches[1]}, 0.01);
    EXPECT_TRUE(step.ok()) << step.status();
    if (step.ok()) p.step = *step;
  }
  return p;
}

// A source program, transformed by a static session (Call/Return pairs with
// call sites, argument and result indices instead of Invokes): mutations of
// those attrs reach the executor's call machinery directly. A saved
// executable graph is as valid an input as any other.
inline Program Transformed(const Program& p) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(p.graph);
  EXPECT_TRUE(s.ok()) << p.name << ": " << s.status();
  Program out = p;
  out.name = p.name + "/transformed";
  if (s.ok()) out.graph = (*s)->executable_graph();
  return out;
}

inline const std::vector<Program>& Programs() {
  static const std::vector<Program>* programs = [] {
    using namespace reference;  // NOLINT
    auto* v = new std::vector<Program>;
    auto add = [&](std::string name, Graph g, Feeds feeds) {
      v->push_back(Program{std::move(name), std::move(g), std::move(feeds), {"result"}, ""});
    };
    add("fib", Fib(), {{"n", I64(6)}});
    add("ack", Ack(), {{"m", I64(2)}, {"n", I64(2)}});
    add("tak", Tak(), {{"x", I64(6)}, {"y", I64(4)}, {"z", I64(2)}});
    add("fact", Fact(), {{"n", I64(5)}});
    add("evenodd", EvenOdd(), {{"n", I64(7)}});
    add("exp", Exp(), {{"x", F64(1.1)}, {"n", I64(4)}});
    add("primes", Primes(), {{"n", I64(5)}});
    add("mc91", McCarthy91(), {{"n", I64(95)}});
    add("sum", Sum(), {{"n", I64(10)}});
    add("yaghi", Yaghi(), {});
    add("while", WhileLoop(), {{"n", I64(5)}});
    add("opchain", OpChain(5), {{"x", I64(1)}});
    add("call_in_while", CallInWhile(), {{"n", I64(4)}});
    add("while_in_function", WhileInFunction(), {{"n", I64(4)}});
    v->push_back(WithGradients("exp_grad", Exp(), {{"x", F64(1.1)}, {"n", I64(4)}}, {"x"}));
    v->push_back(WithGradients("pow_loop_grad", PowLoop(), {{"x", F64(1.1)}, {"n", I64(3)}}, {"x"}));
    v->push_back(Training());
    const size_t n = v->size();
    for (size_t i = 0; i < n; ++i) {
      const std::string& name = (*v)[i].name;
      if (name == "fib" || name == "ack" || name == "tak" || name == "evenodd" || name == "primes" ||
          name == "call_in_while" || name == "while_in_function" || name == "exp_grad" ||
          name == "pow_loop_grad" || name == "training")
        v->push_back(Transformed((*v)[i]));
    }
    return v;
  }();
  return *programs;
}

// ---------------------------------------------------------------------------
// A crash names its mutant: the description of what runs now is kept in a
// static buffer that a fatal signal handler (or, under a sanitizer, its
// death callback) writes out.

inline char g_current[16384];

inline void SetCurrent(const std::string& what) {
  const size_t n = std::min(what.size(), sizeof(g_current) - 2);
  std::memcpy(g_current, what.data(), n);
  g_current[n] = '\n';
  g_current[n + 1] = '\0';
}

inline void WriteCurrent() {
  static const char kPrefix[] = "\nMUTANT RUNNING WHEN THE PROCESS DIED: ";
  (void)!write(2, kPrefix, sizeof(kPrefix) - 1);
  (void)!write(2, g_current, std::strlen(g_current));
}

inline void InstallCrashReporter() {
#ifdef TDF_MUTATED_GRAPHS_SANITIZER
  __sanitizer_set_death_callback(WriteCurrent);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction sa = {};
    sa.sa_handler = [](int signo) {
      WriteCurrent();
      signal(signo, SIG_DFL);
      raise(signo);
    };
    sa.sa_flags = SA_RESETHAND;
    sigaction(sig, &sa, nullptr);
  }
#endif
}

// A run that outlives its deadline by kHangAfter aborts the test with the
// mutant's description, so a hang names its repro.
class Watchdog {
 public:
  Watchdog() : thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Start(const std::string& what, absl::Duration limit) {
    SetCurrent(what);
    std::lock_guard<std::mutex> lock(mu_);
    what_ = what;
    until_ = absl::Now() + limit;
    armed_ = true;
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (armed_ && absl::Now() > until_) {
        std::fprintf(stderr, "HANG: %s\n", what_.c_str());
        std::fflush(stderr);
        std::abort();
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  std::string what_;
  absl::Time until_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// Mutants

struct Mutant {
  uint64_t seed;
  const Program* program;
  Graph graph;
  std::vector<std::string> log;
  SessionOptions options;
  std::string Describe() const {
    std::string s = absl::StrCat(
        "seed ", seed, " program ", program->name, " mode ",
        options.mode == ExecutionMode::kStatic ? "static" : "dynamic", " workers ", options.num_workers,
        " forward ", options.forward_call_values, " release ", options.release_tail_callers, " skip ",
        options.skip_dead_branches, " node_stats ", options.collect_node_stats, "\n    ", absl::StrJoin(log, "\n    "));
    if (const KnownBug* bug = FindKnownBug(seed)) absl::StrAppend(&s, "\n  KNOWN BUG: ", bug->note);
    return s;
  }
};

inline Mutant MakeMutant(uint64_t seed) {
  const std::vector<Program>& programs = Programs();
  const Program& program = programs[seed % programs.size()];
  Mutant m{seed, &program, program.graph, {}, {}};
  // Three in four are redrawn (up to 8 times) until Validate accepts them.
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 1);
  const bool want_valid = rng() % 4 != 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    m.graph = program.graph;
    Mutator mutator(rng(), &m.graph);
    m.log = mutator.Mutate();
    if (!want_valid || Validate(m.graph).ok()) break;
  }
  SessionOptions& o = m.options;
  o.deadline = kDeadline;
  o.max_tag_depth = 5000;
  o.max_live_frames = 200000;
  o.mode = seed % 4 == 3 ? ExecutionMode::kDynamic : ExecutionMode::kStatic;
  o.num_workers = seed % 8 == 5 ? 3 : 1;
  o.forward_call_values = rng() % 4 != 0;
  o.release_tail_callers = o.forward_call_values && rng() % 4 != 0;
  o.skip_dead_branches = rng() % 4 != 0;
  o.collect_node_stats = rng() % 8 == 0;
  return m;
}

// ---------------------------------------------------------------------------
// Outcomes

struct Summary {
  int mutants = 0;
  int created = 0;
  int create_failed = 0;
  int runs = 0;
  int runs_ok = 0;
  int deadline_hits = 0;
  int64_t frames_reclaimed_after_failures = 0;  // RunStats::live_frames_after_run, summed
  int64_t max_overrun_ms = 0;
  std::map<std::string, int> create_codes;
  std::map<std::string, int> run_codes;
  std::map<std::string, int> run_errors_without_node;  // code -> count
  std::map<std::string, int> run_errors_without_tag;
  std::map<std::string, int> create_errors_without_node;
  std::vector<std::string> examples_without_node;
  std::vector<std::string> examples_without_tag;
  std::vector<std::string> bad;  // hard failures, with their mutants
};

inline bool Verbose() { return std::getenv("TDF_MUTATED_GRAPHS_SEED") != nullptr; }

// Is this failure one whose message need not name a node?
inline bool ExemptFromNodeName(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kDeadlineExceeded || s.code() == absl::StatusCode::kCancelled) return true;
  // Feeds, fetches and targets are the caller's mistake, not a node's.
  if (s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kNotFound) {
    for (const char* word : {"feed", "fetch", "target", "placeholder", "Placeholder"})
      if (absl::StrContains(s.message(), word)) return true;
  }
  return false;
}

inline void RecordRun(Summary& sum, const std::string& where, const absl::StatusOr<std::vector<Tensor>>& out,
               size_t num_fetches, const RunStats& stats, absl::Duration elapsed) {
  ++sum.runs;
  if (Verbose()) {
    std::printf("  %s\n    -> %s (live after run %lld, %s)\n", where.substr(where.rfind("run: ")).c_str(),
                out.ok() ? "OK" : out.status().ToString().c_str(),
                static_cast<long long>(stats.live_frames_after_run), absl::FormatDuration(elapsed).c_str());
    std::fflush(stdout);
  }
  const int64_t overrun_ms = absl::ToInt64Milliseconds(elapsed - kDeadline);
  if (overrun_ms > sum.max_overrun_ms) sum.max_overrun_ms = overrun_ms;
  if (elapsed > kDeadline + kOverrunSlack)
    sum.bad.push_back(absl::StrCat("run took ", absl::FormatDuration(elapsed), " (deadline ",
                                   absl::FormatDuration(kDeadline), "): ", where));
  if (out.ok()) {
    ++sum.runs_ok;
    if (out->size() != num_fetches)
      sum.bad.push_back(absl::StrCat("OK run returned ", out->size(), " tensors for ", num_fetches, " fetches: ", where));
    // "0 after a successful run unless something leaked" (RunStats).
    if (stats.live_frames_after_run != 0)
      sum.bad.push_back(absl::StrCat("OK run left ", stats.live_frames_after_run, " frames live: ", where));
    return;
  }
  const absl::Status& s = out.status();
  // After a failed run: the frames the run reclaimed once it stopped.
  sum.frames_reclaimed_after_failures += stats.live_frames_after_run;
  ++sum.run_codes[absl::StatusCodeToString(s.code())];
  if (s.code() == absl::StatusCode::kDeadlineExceeded) ++sum.deadline_hits;
  if (s.message().empty()) sum.bad.push_back(absl::StrCat("failed run with an empty message: ", where));
  if (s.code() == absl::StatusCode::kUnknown || s.code() == absl::StatusCode::kInternal)
    sum.bad.push_back(absl::StrCat("run failed with ", s.ToString(), ": ", where));
  if (ExemptFromNodeName(s)) return;
  if (!absl::StrContains(s.message(), "node '")) {
    ++sum.run_errors_without_node[absl::StatusCodeToString(s.code())];
    if (sum.examples_without_node.size() < 25)
      sum.examples_without_node.push_back(absl::StrCat(s.ToString(), "\n      [", where, "]"));
  } else if (!absl::StrContains(s.message(), " at tag [")) {
    ++sum.run_errors_without_tag[absl::StatusCodeToString(s.code())];
    if (sum.examples_without_tag.size() < 15)
      sum.examples_without_tag.push_back(absl::StrCat(s.ToString(), "\n      [", where, "]"));
  }
}

inline void RunMutantOrThrow(Summary& sum, Watchdog& watchdog, const Mutant& m);

// The library reports errors as Status; an exception escaping it is a bug
// (outside a gtest body it terminates the process), named with its mutant.
inline void RunMutant(Summary& sum, Watchdog& watchdog, uint64_t seed) {
  // Names each seed as it starts: a report that no death callback follows
  // (UBSan's) is then still attributable.
  static const bool trace = std::getenv("TDF_MUTATED_GRAPHS_TRACE") != nullptr;
  if (trace) std::fprintf(stderr, "SEED %llu\n", static_cast<unsigned long long>(seed));
  Mutant m = MakeMutant(seed);
  ++sum.mutants;
  try {
    RunMutantOrThrow(sum, watchdog, m);
  } catch (const std::exception& e) {
    watchdog.Stop();
    sum.bad.push_back(absl::StrCat("exception '", e.what(), "' escaped the library: ", g_current));
  }
}

inline void RunMutantOrThrow(Summary& sum, Watchdog& watchdog, const Mutant& m) {
  if (Verbose()) {
    std::printf("%s\n%s\n", m.Describe().c_str(), GraphToText(m.graph).c_str());
    std::fflush(stdout);
  }
  watchdog.Start(absl::StrCat("Session::Create: ", m.Describe()), kHangAfter);
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(m.graph, m.options);
  watchdog.Stop();
  if (!session.ok()) {
    const absl::Status& s = session.status();
    ++sum.create_failed;
    ++sum.create_codes[absl::StatusCodeToString(s.code())];
    if (Verbose()) std::printf("  Create -> %s\n", s.ToString().c_str());
    if (s.message().empty()) sum.bad.push_back(absl::StrCat("Create failed with an empty message: ", m.Describe()));
    if (s.code() == absl::StatusCode::kUnknown || s.code() == absl::StatusCode::kInternal)
      sum.bad.push_back(absl::StrCat("Create failed with ", s.ToString(), ": ", m.Describe()));
    if (!absl::StrContains(s.message(), "node '") && !absl::StrContains(s.message(), "function '")) {
      ++sum.create_errors_without_node[absl::StatusCodeToString(s.code())];
      if (sum.examples_without_node.size() < 25)
        sum.examples_without_node.push_back(absl::StrCat("(Create) ", s.ToString(), "\n      [", m.Describe(), "]"));
    }
    return;
  }
  ++sum.created;
  Session& session_ref = **session;
  const Program& p = *m.program;

  auto run = [&](const std::string& what, const Feeds& feeds, const std::vector<std::string>& fetches,
                 const std::vector<std::string>& targets, const CancellationToken* cancel = nullptr) {
    const std::string where = absl::StrCat(m.Describe(), "\n  run: ", what, " (fetches ", absl::StrJoin(fetches, ","),
                                           "; targets ", absl::StrJoin(targets, ","), ")");
    RunStats stats;
    watchdog.Start(where, kDeadline + kHangAfter);
    const absl::Time start = absl::Now();
    absl::StatusOr<std::vector<Tensor>> out = session_ref.Run(feeds, fetches, targets, &stats, cancel);
    const absl::Duration elapsed = absl::Now() - start;
    watchdog.Stop();
    RecordRun(sum, where, out, fetches.size(), stats, elapsed);
    return out.status();
  };

  // The program's own run first; a mutant that spins until its deadline is
  // not run again (each such run costs the whole deadline).
  std::mt19937_64 rng(m.seed);
  if (rng() % 8 == 0) {
    // Two runs in flight at once on one session (Run is thread-safe).
    std::vector<absl::StatusOr<std::vector<Tensor>>> outs(2, absl::UnknownError("not run"));
    std::vector<RunStats> stats(2);
    const std::string where = absl::StrCat(m.Describe(), "\n  run: two concurrent runs, all fetches");
    watchdog.Start(where, kDeadline + kHangAfter);
    const absl::Time start = absl::Now();
    std::thread other([&] { outs[1] = session_ref.Run(p.feeds, p.fetches, {}, &stats[1]); });
    outs[0] = session_ref.Run(p.feeds, p.fetches, {}, &stats[0]);
    other.join();
    const absl::Duration elapsed = absl::Now() - start;
    watchdog.Stop();
    for (int i = 0; i < 2; ++i) RecordRun(sum, where, outs[i], p.fetches.size(), stats[i], elapsed);
    if (!outs[0].ok() && outs[0].status().code() == absl::StatusCode::kDeadlineExceeded) return;
  } else {
    absl::Status first = run("feeds, all fetches", p.feeds, p.fetches, {});
    if (first.code() == absl::StatusCode::kDeadlineExceeded) return;
  }
  // Only a target: the fetch's node (or the training step) must run.
  absl::Status second =
      run("feeds, a target only", p.feeds, {}, {p.step.empty() || rng() % 2 ? p.fetches.front() : p.step});
  if (second.code() == absl::StatusCode::kDeadlineExceeded) return;
  // Something else: another fetch subset, a missing, mistyped or extreme
  // feed, a fetch of some other main-graph node, a cancelled deep run.
  Feeds feeds = p.feeds;
  std::vector<std::string> fetches = p.fetches;
  std::vector<std::string> targets;
  CancellationToken cancel;
  std::thread canceller;
  std::string what;
  switch (rng() % 7) {
    case 0:
      fetches = {p.fetches.back()};
      what = "feeds, the last fetch only";
      break;
    case 1:
      if (!feeds.empty()) feeds.erase(feeds.begin() + static_cast<std::ptrdiff_t>(rng() % feeds.size()));
      what = "a feed missing";
      break;
    case 2:
      if (!feeds.empty()) {
        auto& f = feeds[rng() % feeds.size()];
        f.second = f.second.dtype() == DType::kInt64 ? F64(3.0) : I64(3);
      }
      if (rng() % 3 == 0) feeds.push_back({"result", I64(1)});  // a node that is no Placeholder
      what = "a mistyped feed";
      break;
    case 3:
      for (auto& f : feeds)
        if (f.second.dtype() == DType::kInt64 && rng() % 2) f.second = I64(rng() % 2 ? 0 : -3);
      what = "feeds of 0 or -3";
      break;
    case 4: {
      const std::vector<NodeDef>& nodes = m.graph.node;
      if (!nodes.empty()) {
        const NodeDef& n = nodes[rng() % nodes.size()];
        const std::string name = rng() % 3 == 0 ? absl::StrCat(n.name, ":1") : n.name;
        if (rng() % 2) {
          fetches = {name};
        } else {
          targets = {name};
          fetches.clear();
        }
      }
      what = "another node";
      break;
    }
    case 5:
      // Deep or long recursion (bounded by max_tag_depth, max_live_frames,
      // the deadline), cancelled from another thread.
      for (auto& f : feeds)
        if (f.second.dtype() == DType::kInt64) f.second = I64(rng() % 2 ? 40 : 100000);
      canceller = std::thread([&cancel] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        cancel.Cancel();
      });
      what = "deep feeds, cancelled after 20 ms";
      break;
    default:
      what = "feeds, all fetches, again";
      break;
  }
  (void)run(what, feeds, fetches, targets, &cancel);
  if (canceller.joinable()) canceller.join();
  watchdog.Start(absl::StrCat("~Session: ", m.Describe()), kHangAfter);
  session->reset();
  watchdog.Stop();
}

// Death tests in the "threadsafe" style: the runs left TBB threads behind,
// so a child must start afresh.
class ThreadsafeDeathTests {
 public:
  ThreadsafeDeathTests() : saved_(GTEST_FLAG_GET(death_test_style)) { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  ~ThreadsafeDeathTests() { GTEST_FLAG_SET(death_test_style, saved_); }

 private:
  std::string saved_;
};

}  // namespace mutated_graphs
}  // namespace tdf

#endif  // TDF_TESTS_RUNTIME_MUTATED_GRAPHS_H_
