// Seeded random recursive programs, differential against an interpreter in
// this file. Value forwarding (tail results, Switch-fired Calls, result
// Merges passed over) rests on a static analysis that a Merge's inputs are
// exclusive; hand-written tests cover the shapes someone thought of, these
// cover the ones nobody did. A program is a small AST of 1-3 integer
// functions (mutually recursive; a depth argument `n` decreases around every
// cycle of calls) that the interpreter evaluates natively and GraphBuilder
// emits (with, now and then, a hand-built Merge of two live copies of one
// value, which forwarding must leave alone), with bounded While loops in
// function bodies (where dead branches and exiting iterations must drain
// them: issue #26 item 1) and sometimes a main-graph While of calls longer
// than its window of parallel iterations. tdf must give the interpreter's
// answers, make exactly its invocations, fire each Call once per
// invocation, create exactly its frames and leave none live, under every
// option variant, with 1, 2 and 8 workers and in dynamic mode.
// A failure names the seed, the program and the variant;
// TDF_RANDOM_RECURSION_SEED=<seed> runs that program alone (Seeds() below
// has the other knobs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "runtime/exec_test_util.h"
#include "runtime/random_programs.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace random_programs {
namespace {

using exec_test::Built;
using exec_test::ForEachVariant;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::OpCount;
using exec_test::Outs;

// ---------------------------------------------------------------------------
// The interpreter: strict, as dataflow is: every value on a taken path is
// computed (both sides of && and ||, let-bound values nobody uses), only
// the taken side of an if; a loop's condition in every iteration, its body
// in every iteration but the last.

class Interpreter {
 public:
  Interpreter(const Program& p, int64_t max_calls) : p_(p), max_calls_(max_calls) {
    loops_within_.assign(p.nodes.size(), -1);
  }

  // Main's results, or nothing past max_calls invocations.
  std::optional<std::vector<int64_t>> Run(const std::vector<int64_t>& inputs) {
    const MainLoop& loop = p_.main_loop;
    std::vector<int64_t> out;
    if (loop.iterations == 0) {
      out = Invoke(0, inputs);
    } else {
      const Function& entry = p_.functions[0];
      out.assign(entry.num_results, 0);
      for (int64_t i = 0; i < loop.iterations; ++i) {
        std::vector<int64_t> args = inputs;
        for (int a = 0; a < entry.num_args; ++a) {
          if (!loop.varies[a]) continue;
          args[a] = a == entry.depth_arg ? std::min(inputs[a], i) : Wrap(static_cast<uint64_t>(inputs[a]) + i);
        }
        const std::vector<int64_t> results = Invoke(0, std::move(args));
        for (size_t r = 0; r < out.size(); ++r)
          out[r] = Wrap(static_cast<uint64_t>(out[r]) * 3 + static_cast<uint64_t>(results[r]));
      }
      iteration_frames_ += loop.iterations + 1;
    }
    if (calls_ > max_calls_) return std::nullopt;
    return out;
  }
  int64_t calls() const { return calls_; }
  int64_t call_args() const { return call_args_; }  // summed over invocations: tdf fires a Call per argument
  // Frames the run creates: the root's, one per invocation, one per loop
  // iteration (the exiting one too), and one per loop that only a dead
  // token enters (in an untaken branch, or in the body of a loop's exiting
  // iteration): its iteration 0 drains it. No dead call makes a frame.
  int64_t frames() const { return 1 + calls_ + iteration_frames_ + dead_loops_; }
  // Loops a dead token entered because a Cond did not take their branch.
  int64_t loops_in_untaken_branches() const { return untaken_branch_loops_; }

 private:
  struct Env {
    std::vector<int64_t> args;
    std::vector<int64_t> vars;
  };

  std::vector<int64_t> Invoke(int f, std::vector<int64_t> args) {
    const Function& fn = p_.functions[f];
    if (++calls_ > max_calls_) return std::vector<int64_t>(fn.num_results, 0);
    call_args_ += fn.num_args;
    Env env{std::move(args), std::vector<int64_t>(fn.num_vars, 0)};
    return Eval(fn.body, env);
  }

  int64_t Scalar(int id, Env& env) { return Eval(id, env)[0]; }

  // Loops the graph of the subtree of `id` holds (calls not followed).
  int64_t LoopsWithin(int id) {
    if (loops_within_[id] >= 0) return loops_within_[id];
    const Node& n = p_.nodes[id];
    int64_t loops = n.kind == Kind::kLoop ? 1 : 0;
    for (int k : n.kids) loops += LoopsWithin(k);
    if (n.kind == Kind::kMergeTwice) loops *= 2;  // its kid is emitted twice
    return loops_within_[id] = loops;
  }

  std::vector<int64_t> Loop(const Node& n, Env& env) {
    std::vector<int64_t> initial;
    for (int v = 0; v < n.loop_vars; ++v) initial.push_back(Scalar(LoopInit(n, v), env));
    for (int v = 0; v < n.loop_vars; ++v) env.vars[n.value + v] = initial[v];
    for (;;) {
      ++iteration_frames_;
      if (!Scalar(LoopCondition(n), env)) break;
      const int64_t counter = Scalar(LoopNextCounter(n), env);
      const std::vector<int64_t> carried = Eval(LoopNextCarried(n), env);
      env.vars[n.value] = counter;
      for (size_t v = 0; v < carried.size(); ++v) env.vars[n.value + 1 + v] = carried[v];
    }
    dead_loops_ += LoopsWithin(LoopNextCarried(n));  // the exiting iteration's body
    return Eval(LoopAfter(n), env);
  }

  std::vector<int64_t> Eval(int id, Env& env) {
    const Node& n = p_.nodes[id];
    auto kid = [&](int k) { return Scalar(n.kids[k], env); };
    auto call = [&](size_t num_args) {
      std::vector<int64_t> args;
      for (size_t k = 0; k < num_args; ++k) args.push_back(kid(static_cast<int>(k)));
      return Invoke(n.callee, std::move(args));
    };
    switch (n.kind) {
      case Kind::kArg: return {env.args[n.value]};
      case Kind::kConst: return {n.value};
      case Kind::kVar: return {env.vars[n.value]};
      case Kind::kBinary: {
        const int64_t l = kid(0), r = kid(1);
        const auto ul = static_cast<uint64_t>(l), ur = static_cast<uint64_t>(r);
        switch (n.value) {
          case kAdd: return {Wrap(ul + ur)};
          case kSub: return {Wrap(ul - ur)};
          case kMul: return {Wrap(ul * ur)};
          case kMaximum: return {l > r ? l : r};
          default: return {l < r ? l : r};
        }
      }
      case Kind::kDivide: return {kid(0) / n.value};  // truncates, as Div does; n.value is never -1
      case Kind::kModulo: return {kid(0) % n.value};  // the sign of the dividend, as Mod
      case Kind::kCompare: {
        const int64_t l = kid(0), r = kid(1);
        switch (n.value) {
          case kLess: return {l < r};
          case kLessEqual: return {l <= r};
          case kGreater: return {l > r};
          case kGreaterEqual: return {l >= r};
          case kEqual: return {l == r};
          default: return {l != r};
        }
      }
      case Kind::kNot: return {!kid(0)};
      case Kind::kAnd: {
        const int64_t l = kid(0), r = kid(1);  // both: no short circuit in a graph
        return {l && r};
      }
      case Kind::kOr: {
        const int64_t l = kid(0), r = kid(1);
        return {l || r};
      }
      case Kind::kCall: return {call(n.kids.size())[n.value]};
      case Kind::kIf: {
        const bool then = kid(0) != 0;
        const int64_t untaken = LoopsWithin(then ? n.kids[2] : n.kids[1]);
        dead_loops_ += untaken;
        untaken_branch_loops_ += untaken;
        return Eval(then ? n.kids[1] : n.kids[2], env);
      }
      case Kind::kLet:
        env.vars[n.value] = kid(0);
        return Eval(n.kids[1], env);
      case Kind::kLetCall: {
        const std::vector<int64_t> results = call(n.kids.size() - 1);
        for (size_t r = 0; r < results.size(); ++r) env.vars[n.value + r] = results[r];
        return Eval(n.kids.back(), env);
      }
      case Kind::kTuple: {
        std::vector<int64_t> out;
        for (size_t k = 0; k < n.kids.size(); ++k) out.push_back(kid(static_cast<int>(k)));
        return out;
      }
      case Kind::kMergeTwice: {
        const int64_t first = kid(0);
        kid(0);  // the second copy's calls happen all the same
        return {first};
      }
      case Kind::kLoop: return Loop(n, env);
    }
    return {};
  }

  const Program& p_;
  const int64_t max_calls_;
  int64_t calls_ = 0;
  int64_t call_args_ = 0;
  int64_t iteration_frames_ = 0;
  int64_t dead_loops_ = 0;
  int64_t untaken_branch_loops_ = 0;
  std::vector<int64_t> loops_within_;  // LoopsWithin, -1 until known
};

// ---------------------------------------------------------------------------
// Emission through GraphBuilder.

class Emitter {
 public:
  explicit Emitter(const Program& p) : p_(p) {}

  // Main: placeholders in0, in1, ... for f0's arguments, one call (or a
  // While of calls, MainLoop), its results fetched as "result" and
  // "result1".
  Graph Build() {
    GraphBuilder b;
    for (size_t f = 0; f < p_.functions.size(); ++f) (void)b.Declare(Signature(static_cast<int>(f)));
    for (size_t f = 0; f < p_.functions.size(); ++f) {
      const Function& fn = p_.functions[f];
      (void)b.DefineFunction(Signature(static_cast<int>(f)), [&](GraphBuilder& g, const Outs& args) -> Outs {
        Outs vars(fn.num_vars);
        return Emit(g, fn.body, args, vars);
      });
    }
    Outs inputs;
    for (int i = 0; i < p_.functions[0].num_args; ++i)
      inputs.push_back(b.Placeholder(absl::StrCat("in", i), DType::kInt64));
    const MainLoop& loop = p_.main_loop;
    Outs results;
    if (loop.iterations == 0) {
      results = b.Call(FunctionName(0), inputs);
    } else {
      const Function& entry = p_.functions[0];
      Outs initial(1 + entry.num_results, b.Const<int64_t>(0));  // i, then the accs
      WhileOptions options;
      options.parallel_iterations = loop.parallel_iterations;
      const Outs exits = b.While(
          [&](const Outs& v) { return b.Less(v[0], b.Const<int64_t>(loop.iterations)); },
          [&](const Outs& v) {
            Outs args;
            for (int a = 0; a < entry.num_args; ++a) {
              if (!loop.varies[a]) {
                args.push_back(inputs[a]);
              } else {
                args.push_back(a == entry.depth_arg ? b.Op("Minimum", {inputs[a], v[0]}) : b.Add(inputs[a], v[0]));
              }
            }
            const Outs called = b.Call(FunctionName(0), args);
            Outs next{b.Add(v[0], b.Const<int64_t>(1))};
            for (int r = 0; r < entry.num_results; ++r)
              next.push_back(b.Add(b.Mul(v[1 + r], b.Const<int64_t>(3)), called[r]));
            return next;
          },
          initial, options);
      if (exits.size() == initial.size()) results.assign(exits.begin() + 1, exits.end());
    }
    for (size_t r = 0; r < results.size(); ++r) b.Identity(results[r], ResultName(static_cast<int>(r)));
    return Built(b);
  }

  static std::string ResultName(int r) { return r == 0 ? "result" : absl::StrCat("result", r); }

 private:
  FunctionSignature Signature(int f) const {
    const Function& fn = p_.functions[f];
    FunctionSignature sig{FunctionName(f), {}, {}};
    for (int i = 0; i < fn.num_args; ++i) sig.inputs.push_back({ArgName(fn, i), DType::kInt64});
    for (int r = 0; r < fn.num_results; ++r) sig.outputs.push_back({absl::StrCat("r", r), DType::kInt64});
    return sig;
  }

  Outs Emit(GraphBuilder& f, int id, const Outs& args, Outs& vars) {
    const Node& n = p_.nodes[id];
    auto kid = [&](int k) { return Emit(f, n.kids[k], args, vars)[0]; };
    auto call = [&](size_t num_args) {
      Outs in;
      for (size_t k = 0; k < num_args; ++k) in.push_back(kid(static_cast<int>(k)));
      return f.Call(FunctionName(n.callee), in);
    };
    switch (n.kind) {
      case Kind::kArg: return {args[n.value]};
      case Kind::kConst: return {f.Const<int64_t>(n.value)};
      case Kind::kVar: return {vars[n.value]};
      case Kind::kBinary: {
        const Output l = kid(0), r = kid(1);
        switch (n.value) {
          case kAdd: return {f.Add(l, r)};
          case kSub: return {f.Sub(l, r)};
          case kMul: return {f.Mul(l, r)};
          case kMaximum: return {f.Op("Maximum", {l, r})};
          default: return {f.Op("Minimum", {l, r})};
        }
      }
      case Kind::kDivide: return {f.Div(kid(0), f.Const<int64_t>(n.value))};
      case Kind::kModulo: return {f.Mod(kid(0), f.Const<int64_t>(n.value))};
      case Kind::kCompare: {
        const Output l = kid(0), r = kid(1);
        switch (n.value) {
          case kLess: return {f.Less(l, r)};
          case kLessEqual: return {f.LessEqual(l, r)};
          case kGreater: return {f.Greater(l, r)};
          case kGreaterEqual: return {f.GreaterEqual(l, r)};
          case kEqual: return {f.Equal(l, r)};
          default: return {f.NotEqual(l, r)};
        }
      }
      case Kind::kNot: return {f.LogicalNot(kid(0))};
      case Kind::kAnd: return {f.LogicalAnd(kid(0), kid(1))};
      case Kind::kOr: return {f.LogicalOr(kid(0), kid(1))};
      case Kind::kCall: return {call(n.kids.size())[n.value]};
      case Kind::kIf:
        return f.Cond(
            kid(0), [&] { return Emit(f, n.kids[1], args, vars); }, [&] { return Emit(f, n.kids[2], args, vars); });
      case Kind::kLet:
        vars[n.value] = kid(0);
        return Emit(f, n.kids[1], args, vars);
      case Kind::kLetCall: {
        const Outs results = call(n.kids.size() - 1);
        for (size_t r = 0; r < results.size(); ++r) vars[n.value + r] = results[r];
        return Emit(f, n.kids.back(), args, vars);
      }
      case Kind::kTuple: {
        Outs out;
        for (size_t k = 0; k < n.kids.size(); ++k) out.push_back(kid(static_cast<int>(k)));
        return out;
      }
      case Kind::kMergeTwice: {
        const Output first = kid(0);
        return {f.Op("Merge", {first, kid(0)}, {{"T", DType::kInt64}})};
      }
      case Kind::kLoop: return Loop(f, n, args, vars);
    }
    return {};
  }

  // The condition and next values are emitted with the loop's variables
  // bound to the loop's Merges and body inputs; what follows, to its Exits.
  Outs Loop(GraphBuilder& f, const Node& n, const Outs& args, Outs& vars) {
    Outs initial;
    for (int v = 0; v < n.loop_vars; ++v) initial.push_back(Emit(f, LoopInit(n, v), args, vars)[0]);
    auto bind = [&](const Outs& values) {
      for (int v = 0; v < n.loop_vars; ++v) vars[n.value + v] = values[v];
    };
    WhileOptions options;
    options.parallel_iterations = n.parallel_iterations;
    const Outs exits = f.While(
        [&](const Outs& v) {
          bind(v);
          return Emit(f, LoopCondition(n), args, vars)[0];
        },
        [&](const Outs& v) {
          bind(v);
          Outs next{Emit(f, LoopNextCounter(n), args, vars)[0]};
          const Outs carried = Emit(f, LoopNextCarried(n), args, vars);
          next.insert(next.end(), carried.begin(), carried.end());
          return next;
        },
        initial, options);
    if (exits.size() != initial.size()) return Outs(n.arity);  // the builder recorded why; Build() fails
    bind(exits);
    return Emit(f, LoopAfter(n), args, vars);
  }

  const Program& p_;
};

// ---------------------------------------------------------------------------
// Cases: a program and a few inputs with the interpreter's answers.

constexpr int kInputsPerProgram = 3;
constexpr int64_t kMaxInputDepth = 12;
// Invocations per run: a program that branches widely runs shallower.
constexpr int64_t kMaxCalls = 400;

struct Input {
  std::vector<int64_t> values;
  std::vector<int64_t> want;
  int64_t calls = 0;      // invocations, main's calls included
  int64_t call_args = 0;  // their arguments, summed
  int64_t frames = 0;     // Interpreter::frames
  int64_t loops_in_untaken_branches = 0;
};

struct Case {
  uint32_t seed = 0;
  Program program;
  std::string text;
  std::vector<Input> inputs;
};

Case MakeCase(uint32_t seed) {
  Generator gen(seed);
  Case c;
  c.seed = seed;
  // Programs whose entry never gets past its base case on these inputs
  // test little, and those too big even at n = 0 (loops of calls, a main
  // loop) take too long: draw again (from the same generator, so the seed
  // still names the case).
  for (int64_t most_calls = 0; most_calls < 3;) {
    c.program = gen.Generate();
    c.inputs.clear();
    const Function& entry = c.program.functions[0];
    const int64_t entry_calls = std::max(1, c.program.main_loop.iterations);
    bool fits = true;
    for (int k = 0; fits && k < kInputsPerProgram; ++k) {
      Input in;
      for (int i = 0; i < entry.num_args; ++i) in.values.push_back(gen.Int(-4, 8));
      in.values[entry.depth_arg] = gen.Int(0, kMaxInputDepth);
      for (;;) {
        Interpreter interpreter(c.program, kMaxCalls);
        std::optional<std::vector<int64_t>> want = interpreter.Run(in.values);
        if (want.has_value()) {
          in.want = *std::move(want);
          in.calls = interpreter.calls();
          in.call_args = interpreter.call_args();
          in.frames = interpreter.frames();
          in.loops_in_untaken_branches = interpreter.loops_in_untaken_branches();
          break;
        }
        if (in.values[entry.depth_arg] == 0) {
          fits = false;
          break;
        }
        --in.values[entry.depth_arg];
      }
      most_calls = std::max(most_calls, in.calls / entry_calls);
      c.inputs.push_back(std::move(in));
    }
    if (!fits) most_calls = 0;
  }
  c.text = Printer(c.program).Text();
  return c;
}

// A run that hangs fails instead of stalling CI.
constexpr absl::Duration kDeadline = absl::Seconds(60);

// Runs every input of `c` in `session` and checks answers and invocations.
void RunInputs(const Case& c, Session* session, ExecutionMode mode) {
  std::vector<std::string> fetches;
  for (int r = 0; r < c.program.functions[0].num_results; ++r) fetches.push_back(Emitter::ResultName(r));
  // Each session runs every input: later runs reuse the frames of earlier ones.
  for (const Input& in : c.inputs) {
    SCOPED_TRACE(absl::StrCat("inputs (", absl::StrJoin(in.values, ", "), ")"));
    exec_test::Feeds feeds;
    for (size_t i = 0; i < in.values.size(); ++i) feeds.push_back({absl::StrCat("in", i), I(in.values[i])});
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> got = session->Run(feeds, fetches, {}, &stats);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), in.want.size());
    for (size_t r = 0; r < in.want.size(); ++r) EXPECT_EQ((*got)[r].scalar<int64_t>(), in.want[r]) << fetches[r];
    EXPECT_EQ(stats.live_frames_after_run, 0);
    EXPECT_EQ(stats.firings, stats.live_firings + stats.dead_firings);
    EXPECT_EQ(stats.frames_created, in.frames);
    if (mode == ExecutionMode::kStatic) {
      // A Call per argument fires live once per invocation: none twice,
      // however its argument reached it.
      EXPECT_EQ(OpCount(stats, "Call").first, in.call_args);
    } else {
      EXPECT_EQ(OpCount(stats, "Invoke").first, in.calls);
    }
    // One result alone: the run leaves the other's Identity out (and, in
    // static mode, its Return unless a main loop uses it), but the call
    // runs whole (Session::Run), with the same invocations.
    if (fetches.size() < 2) continue;
    RunStats alone;
    got = session->Run(feeds, {fetches.back()}, {}, &alone);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].scalar<int64_t>(), in.want.back()) << fetches.back() << " alone";
    const bool return_pruned = mode == ExecutionMode::kStatic && c.program.main_loop.iterations == 0;
    EXPECT_EQ(alone.nodes_pruned, return_pruned ? 2 : 1);
    EXPECT_EQ(alone.live_frames_after_run, 0);
    EXPECT_EQ(alone.frames_created, in.frames);
  }
}

void CheckCase(const Case& c, int workers) {
  SCOPED_TRACE(absl::StrCat("seed ", c.seed, ":\n", c.text));
  const Graph graph = Emitter(c.program).Build();
  if (::testing::Test::HasFailure()) return;  // Built() said why
  ForEachVariant(workers, [&](const SessionOptions& variant) {
    SessionOptions options = variant;
    options.deadline = kDeadline;
    auto session = MakeSession(graph, options);
    ASSERT_NE(session, nullptr);
    RunInputs(c, session.get(), ExecutionMode::kStatic);
  });
  {
    // Compiled units (SessionOptions::compile_threads) count the nodes they
    // stand for: off and on, the same answers and the same firings.
    SCOPED_TRACE("compile_threads off and on");
    SessionOptions on, off;
    on.num_workers = off.num_workers = workers;
    on.deadline = off.deadline = kDeadline;
    off.compile_threads = false;
    auto with = MakeSession(graph, on);
    auto without = MakeSession(graph, off);
    ASSERT_NE(with, nullptr);
    ASSERT_NE(without, nullptr);
    std::vector<std::string> fetches;
    for (int r = 0; r < c.program.functions[0].num_results; ++r) fetches.push_back(Emitter::ResultName(r));
    for (const Input& in : c.inputs) {
      SCOPED_TRACE(absl::StrCat("inputs (", absl::StrJoin(in.values, ", "), ")"));
      exec_test::Feeds feeds;
      for (size_t i = 0; i < in.values.size(); ++i) feeds.push_back({absl::StrCat("in", i), I(in.values[i])});
      RunStats a, b;
      auto got_a = with->Run(feeds, fetches, {}, &a);
      auto got_b = without->Run(feeds, fetches, {}, &b);
      ASSERT_TRUE(got_a.ok()) << got_a.status();
      ASSERT_TRUE(got_b.ok()) << got_b.status();
      for (size_t r = 0; r < fetches.size(); ++r)
        EXPECT_EQ((*got_a)[r].scalar<int64_t>(), (*got_b)[r].scalar<int64_t>()) << fetches[r];
      EXPECT_EQ(a.firings_by_op, b.firings_by_op);
      EXPECT_EQ(a.frames_created, b.frames_created);
      EXPECT_EQ(a.max_tag_depth, b.max_tag_depth);
      EXPECT_EQ(b.compiled_units, 0);
    }
  }
  SCOPED_TRACE("dynamic mode");
  SessionOptions dynamic;
  dynamic.num_workers = workers;
  dynamic.mode = ExecutionMode::kDynamic;
  dynamic.deadline = kDeadline;
  auto session = MakeSession(graph, dynamic);
  ASSERT_NE(session, nullptr);
  RunInputs(c, session.get(), ExecutionMode::kDynamic);
}

// Distinct programs per worker count: more shapes in the same time.
constexpr int kProgramsPerWorkerCount = 100;
constexpr int kWorkerCounts[] = {1, 2, 8};

std::vector<uint32_t> DefaultSeeds(int workers, int count = kProgramsPerWorkerCount) {
  std::vector<uint32_t> seeds;
  for (int k = 0; k < count; ++k) seeds.push_back(static_cast<uint32_t>(workers * 1'000'000 + k));
  return seeds;
}

// TDF_RANDOM_RECURSION_SEED=<seed> runs that program alone (to reproduce a
// failure); TDF_RANDOM_RECURSION_PROGRAMS=<count> runs that many per worker
// count (a soak); TDF_RANDOM_RECURSION_VERBOSE=1 prints each seed before
// its program runs (a crash prints no trace).
std::vector<uint32_t> Seeds(int workers) {
  if (const char* seed = std::getenv("TDF_RANDOM_RECURSION_SEED"))
    return {static_cast<uint32_t>(std::strtoul(seed, nullptr, 10))};
  if (const char* programs = std::getenv("TDF_RANDOM_RECURSION_PROGRAMS"))
    return DefaultSeeds(workers, std::atoi(programs));
  return DefaultSeeds(workers);
}

// ---------------------------------------------------------------------------
// The shapes the programs are for, counted over the corpus, so that a
// change to the generator cannot quietly stop making them.

class ShapeCounter {
 public:
  std::map<std::string, int> counts;

  void Count(const Case& c) {
    p_ = &c.program;
    std::map<int, int> sites_per_callee;
    const size_t nf = p_->functions.size();
    std::vector<std::vector<bool>> reaches(nf, std::vector<bool>(nf, false));
    for (size_t f = 0; f < nf; ++f) {
      Walk(p_->functions[f].body, false);
      for (int callee : Callees(p_->functions[f].body)) {
        reaches[f][callee] = true;
        ++sites_per_callee[callee];
      }
    }
    for (size_t k = 0; k < nf; ++k)  // transitive closure
      for (size_t i = 0; i < nf; ++i)
        for (size_t j = 0; j < nf; ++j) reaches[i][j] = reaches[i][j] || (reaches[i][k] && reaches[k][j]);
    bool mutual = false;
    for (size_t i = 0; i < nf; ++i)
      for (size_t j = 0; j < nf; ++j) mutual = mutual || (i != j && reaches[i][j] && reaches[j][i]);
    if (mutual) ++counts["programs with mutual recursion"];
    for (const auto& [callee, sites] : sites_per_callee)
      if (sites >= 2) ++counts["functions called from several sites"];
    for (const Input& in : c.inputs) {
      if (in.calls >= 50) ++counts["runs of 50 invocations or more"];
      if (in.loops_in_untaken_branches > 0) ++counts["runs with loops in an untaken branch"];
    }
    const MainLoop& loop = p_->main_loop;
    if (loop.iterations > loop.parallel_iterations) ++counts["main loops longer than their window"];
    if (loop.iterations > 0 && loop.parallel_iterations <= 2) ++counts["main loops of 1 or 2 parallel iterations"];
  }

 private:
  const Node& N(int id) const { return p_->nodes[id]; }
  bool IsCall(int id) const { return N(id).kind == Kind::kCall || N(id).kind == Kind::kLetCall; }

  std::vector<int> Callees(int id) const {
    std::vector<int> out;
    if (IsCall(id)) out.push_back(N(id).callee);
    for (int k : N(id).kids)
      for (int c : Callees(k)) out.push_back(c);
    return out;
  }
  int Uses(int id, int var) const {
    int uses = N(id).kind == Kind::kVar && N(id).value == var ? 1 : 0;
    for (int k : N(id).kids) uses += Uses(k, var);
    return uses;
  }
  // `id` or, for a tuple, one of its values, is of `kind`.
  bool Yields(int id, Kind kind) const {
    if (N(id).kind == kind) return true;
    if (N(id).kind != Kind::kTuple) return false;
    for (int k : N(id).kids)
      if (N(k).kind == kind) return true;
    return false;
  }
  // A call's results, all of them its value.
  bool IsTail(int id) const {
    const Node& n = N(id);
    if (n.kind == Kind::kCall) return true;
    if (n.kind != Kind::kLetCall) return false;
    const Node& body = N(n.kids.back());
    auto own = [&](int v) {
      return N(v).kind == Kind::kVar && N(v).value >= n.value &&
             N(v).value < n.value + p_->functions[n.callee].num_results;
    };
    if (body.kind != Kind::kTuple) return own(n.kids.back());
    for (int k : body.kids)
      if (!own(k)) return false;
    return true;
  }

  bool Contains(int id, Kind kind) const {
    if (N(id).kind == kind) return true;
    for (int k : N(id).kids)
      if (Contains(k, kind)) return true;
    return false;
  }

  bool StartsFromArguments(const Node& loop) const {
    for (int v = 0; v < loop.loop_vars; ++v)
      if (N(LoopInit(loop, v)).kind != Kind::kArg) return false;
    return true;
  }

  void Walk(int id, bool in_branch, bool in_loop_body = false) {
    const Node& n = N(id);
    switch (n.kind) {
      case Kind::kIf:
        if (in_branch) ++counts["nested conds"];
        if (in_loop_body) ++counts["conds in loop bodies"];
        if (Contains(n.kids[0], Kind::kLoop)) {
          ++counts["conds on a loop's result"];
          if (Contains(n.kids[1], Kind::kLoop) || Contains(n.kids[2], Kind::kLoop))
            ++counts["conds on a loop's result with a loop in a branch"];
        }
        if (N(n.kids[0]).kind == Kind::kVar) ++counts["conds sharing a predicate"];
        for (int side : {n.kids[1], n.kids[2]}) {
          if (IsTail(side)) ++counts["tail calls"];
          if (Yields(side, Kind::kConst)) ++counts["branches yielding a constant"];
          if (Yields(side, Kind::kArg)) ++counts["branches yielding an argument"];
        }
        if (!Callees(n.kids[1]).empty() && !Callees(n.kids[2]).empty()) ++counts["conds with calls in both branches"];
        break;
      case Kind::kBinary:
      case Kind::kCompare:
        for (int k : n.kids)
          if (IsCall(k)) ++counts["calls whose result is combined"];
        break;
      case Kind::kCall:
      case Kind::kLetCall: {
        if (!in_branch) ++counts["calls outside any cond"];
        const size_t num_args = n.kind == Kind::kCall ? n.kids.size() : n.kids.size() - 1;
        for (size_t k = 0; k < num_args; ++k)
          if (in_branch && N(n.kids[k]).kind == Kind::kArg) ++counts["arguments passed on into a branch's call"];
        if (n.kind == Kind::kLetCall) {
          const int results = p_->functions[n.callee].num_results;
          int used = 0;
          for (int r = 0; r < results; ++r) {
            const int uses = Uses(n.kids.back(), n.value + r);
            used += uses > 0 ? 1 : 0;
            if (uses >= 2) ++counts["call results used twice"];
          }
          if (results == 2 && used == 2) ++counts["calls using both of two results"];
          if (results == 2 && used == 1) ++counts["calls using one of two results"];
        } else if (p_->functions[n.callee].num_results == 2) {
          ++counts["calls using one of two results"];
        }
        break;
      }
      case Kind::kMergeTwice:
        ++counts["merges of two live values"];
        break;
      case Kind::kLoop:
        if (in_branch) ++counts["loops in cond branches"];
        if (in_loop_body) ++counts["loops in loop bodies"];
        if (in_loop_body && StartsFromArguments(n)) ++counts["loops in loop bodies starting from arguments alone"];
        if (!Callees(LoopNextCarried(n)).empty()) ++counts["loops whose body calls"];
        if (!Callees(LoopCondition(n)).empty()) ++counts["loops whose condition calls"];
        if (n.loop_vars >= 3) ++counts["loops carrying several values"];
        if (n.parallel_iterations <= 2) ++counts["loops of 1 or 2 parallel iterations"];
        break;
      default: break;
    }
    for (size_t k = 0; k < n.kids.size(); ++k) {
      const bool body = n.kind == Kind::kLoop && (n.kids[k] == LoopCondition(n) || n.kids[k] == LoopNextCarried(n));
      Walk(n.kids[k], in_branch || (n.kind == Kind::kIf && k > 0), in_loop_body || body);
    }
  }

  const Program* p_ = nullptr;
};

TEST(RandomRecursionCorpus, HasTheShapesItIsFor) {
  ShapeCounter counter;
  for (int workers : kWorkerCounts)
    for (uint32_t seed : DefaultSeeds(workers)) counter.Count(MakeCase(seed));
  const char* const kShapes[] = {
      "programs with mutual recursion", "functions called from several sites", "runs of 50 invocations or more",
      "tail calls", "branches yielding a constant", "branches yielding an argument", "nested conds",
      "conds with calls in both branches", "calls whose result is combined", "calls outside any cond",
      "arguments passed on into a branch's call", "call results used twice", "calls using both of two results",
      "calls using one of two results", "conds sharing a predicate", "merges of two live values",
      "loops in cond branches", "loops in loop bodies", "loops in loop bodies starting from arguments alone",
      "conds in loop bodies", "loops whose body calls",
      "loops whose condition calls", "loops carrying several values", "loops of 1 or 2 parallel iterations",
      "conds on a loop's result", "conds on a loop's result with a loop in a branch",
      "runs with loops in an untaken branch", "main loops longer than their window",
      "main loops of 1 or 2 parallel iterations"};
  for (const char* shape : kShapes) EXPECT_GE(counter.counts[shape], 10) << shape;
  if (std::getenv("TDF_RANDOM_RECURSION_VERBOSE") != nullptr)
    for (const auto& [shape, count] : counter.counts) std::fprintf(stderr, "%s: %d\n", shape.c_str(), count);
}

class RandomRecursionTest : public ::testing::TestWithParam<int> {};

TEST_P(RandomRecursionTest, AgreesWithTheInterpreterUnderEveryVariant) {
  const bool verbose = std::getenv("TDF_RANDOM_RECURSION_VERBOSE") != nullptr;
  for (uint32_t seed : Seeds(GetParam())) {
    if (verbose) std::fprintf(stderr, "seed %u\n", seed);
    CheckCase(MakeCase(seed), GetParam());
    if (HasFailure()) return;  // the first failing program is the one to look at
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, RandomRecursionTest, ::testing::ValuesIn(kWorkerCounts), exec_test::WorkersName);

}  // namespace
}  // namespace random_programs
}  // namespace tdf
