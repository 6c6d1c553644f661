// Seeded random recursive programs, differential against an interpreter in
// this file. Value forwarding (tail results, Switch-fired Calls, result
// Merges passed over) rests on a static analysis that a Merge's inputs are
// exclusive; hand-written tests cover the shapes someone thought of, these
// cover the ones nobody did. A program is a small AST of 1-3 integer
// functions (mutually recursive; a depth argument `n` decreases around every
// cycle of calls) that the interpreter evaluates natively and GraphBuilder
// emits (with, now and then, a hand-built Merge of two live copies of one
// value, which forwarding must leave alone). tdf must give the interpreter's
// answers, make exactly its invocations, fire each Call once per invocation
// and leave no frame live, under every option variant, with 1, 2 and 8
// workers and in dynamic mode.
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
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::ForEachVariant;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::OpCount;
using exec_test::Outs;

// ---------------------------------------------------------------------------
// Programs

enum class Kind {
  kArg,      // value: the argument's index
  kConst,    // value: the constant
  kVar,      // value: a variable bound by an enclosing kLet or kLetCall
  kBinary,   // value: a BinaryOp; kids: l, r
  kDivide,   // value: the divisor, a constant other than 0 and -1; kids: x
  kModulo,   // the same
  kCompare,  // value: a CompareOp; kids: l, r; yields a bool
  kNot,      // kids: a bool
  kAnd,      // kids: two bools
  kOr,
  kCall,     // callee; value: the result it yields; kids: the arguments
  kIf,       // kids: predicate, then, else (each yields `arity` values)
  kLet,      // value: the variable; kids: its value (an integer or a bool), then the body
  kLetCall,  // callee; value: the first variable (one per result); kids: the arguments, then the body
  kTuple,    // kids: one value each
  // A Merge of two copies of its kid, both live: the first wins (the same
  // value), and no forwarding may take it for a Cond's exclusive Merge.
  kMergeTwice,
};
enum BinaryOp : int64_t { kAdd, kSub, kMul, kMaximum, kMinimum, kNumBinaryOps };
enum CompareOp : int64_t { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual, kNumCompareOps };

struct Node {
  Kind kind;
  int64_t value = 0;
  int callee = -1;
  int arity = 1;  // how many values it yields
  std::vector<int> kids;  // indices into Program::nodes
};

struct Function {
  int num_args = 1;
  int num_results = 1;
  int depth_arg = 0;         // `n`, printed so
  bool equal_guard = false;  // base case n == 0 (n never negative) rather than n <= 0
  int body = -1;
  int num_vars = 0;
};

struct Program {
  std::vector<Node> nodes;
  std::vector<Function> functions;  // functions[0] is the one main calls
};

std::string FunctionName(int f) { return absl::StrCat("f", f); }
std::string ArgName(const Function& fn, int i) { return i == fn.depth_arg ? "n" : absl::StrCat("a", i); }

// Wrapping, as tdf's integer kernels do; signed overflow would be UB here.
int64_t Wrap(uint64_t v) { return static_cast<int64_t>(v); }

// ---------------------------------------------------------------------------
// Printing, for failure messages: one line per function.

class Printer {
 public:
  explicit Printer(const Program& p) : p_(p) {}

  std::string Text() const {
    std::string out;
    for (size_t f = 0; f < p_.functions.size(); ++f) {
      const Function& fn = p_.functions[f];
      std::vector<std::string> args;
      for (int i = 0; i < fn.num_args; ++i) args.push_back(ArgName(fn, i));
      absl::StrAppend(&out, FunctionName(f), "(", absl::StrJoin(args, ", "), ") -> ", fn.num_results,
                      fn.num_results == 1 ? " result" : " results", " = ", Print(fn.body, fn), "\n");
    }
    return out;
  }

 private:
  std::string Print(int id, const Function& fn) const {
    const Node& n = p_.nodes[id];
    auto kid = [&](int k) { return Print(n.kids[k], fn); };
    auto args = [&](size_t count) {
      std::vector<std::string> out;
      for (size_t k = 0; k < count; ++k) out.push_back(kid(k));
      return absl::StrCat(FunctionName(n.callee), "(", absl::StrJoin(out, ", "), ")");
    };
    static const char* const kBinary[] = {"+", "-", "*", "max", "min"};
    static const char* const kCompare[] = {"<", "<=", ">", ">=", "==", "!="};
    switch (n.kind) {
      case Kind::kArg: return ArgName(fn, static_cast<int>(n.value));
      case Kind::kConst: return absl::StrCat(n.value);
      case Kind::kVar: return absl::StrCat("v", n.value);
      case Kind::kBinary:
        if (n.value == kMaximum || n.value == kMinimum)
          return absl::StrCat(kBinary[n.value], "(", kid(0), ", ", kid(1), ")");
        return absl::StrCat("(", kid(0), " ", kBinary[n.value], " ", kid(1), ")");
      case Kind::kDivide: return absl::StrCat("(", kid(0), " / ", n.value, ")");
      case Kind::kModulo: return absl::StrCat("(", kid(0), " % ", n.value, ")");
      case Kind::kCompare: return absl::StrCat("(", kid(0), " ", kCompare[n.value], " ", kid(1), ")");
      case Kind::kNot: return absl::StrCat("!", kid(0));
      case Kind::kAnd: return absl::StrCat("(", kid(0), " && ", kid(1), ")");
      case Kind::kOr: return absl::StrCat("(", kid(0), " || ", kid(1), ")");
      case Kind::kCall: {
        const std::string call = args(n.kids.size());
        return p_.functions[n.callee].num_results == 1 ? call : absl::StrCat(call, "[", n.value, "]");
      }
      case Kind::kIf: return absl::StrCat("(", kid(0), " ? ", kid(1), " : ", kid(2), ")");
      case Kind::kLet: return absl::StrCat("{v", n.value, " = ", kid(0), "; ", kid(1), "}");
      case Kind::kLetCall: {
        std::vector<std::string> vars;
        for (int r = 0; r < p_.functions[n.callee].num_results; ++r) vars.push_back(absl::StrCat("v", n.value + r));
        const std::string bound = vars.size() == 1 ? vars[0] : absl::StrCat("(", absl::StrJoin(vars, ", "), ")");
        return absl::StrCat("{", bound, " = ", args(n.kids.size() - 1), "; ", kid(n.kids.size() - 1), "}");
      }
      case Kind::kTuple: {
        std::vector<std::string> out;
        for (size_t k = 0; k < n.kids.size(); ++k) out.push_back(kid(k));
        return absl::StrCat("(", absl::StrJoin(out, ", "), ")");
      }
      case Kind::kMergeTwice: return absl::StrCat("merge_twice(", kid(0), ")");
    }
    return "?";
  }

  const Program& p_;
};

// ---------------------------------------------------------------------------
// The generator. Every program terminates: on the recursive side of a depth
// guard (n <= 0 / n == 0 and their negations) a call may name any function
// and passes n - 1 (n - 2 to callees whose guard is n <= 0); elsewhere it
// names only a later function and passes n on, so every cycle of calls
// decreases n. A function with the n == 0 guard only ever sees n >= 0.

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  Program Generate() {
    for (;;) {
      Program p = Attempt();
      if (entry_call_sites_ > 0) return p;  // a main that makes one call tests little
    }
  }

  // Not std::uniform_int_distribution: its output differs between standard
  // libraries, and a seed must name the same program everywhere.
  int64_t Int(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1)); }
  bool Chance(int percent) { return Int(0, 99) < percent; }

 private:
  static constexpr int kMaxDepth = 4;  // of a function body's AST

  // A predicate bound to a variable, for several Conds to share (their
  // Switches on one predicate form one group).
  struct SharedPred {
    int var;
    int recursive_side;  // a guard's: 1 (then) or 2 (else); 0 for any other predicate
  };
  struct Scope {
    bool recursive = false;  // on a guard's recursive side: n >= 1
    std::vector<int> vars;   // integers
    std::vector<SharedPred> preds;
  };

  Program Attempt() {
    p_ = Program{};
    call_sites_ = 0;
    entry_call_sites_ = 0;
    const int64_t roll = Int(0, 99);
    const int num_functions = roll < 40 ? 1 : roll < 75 ? 2 : 3;
    for (int f = 0; f < num_functions; ++f) {
      Function fn;
      fn.num_args = static_cast<int>(Int(1, 3));
      fn.num_results = Chance(40) ? 2 : 1;
      fn.depth_arg = static_cast<int>(Int(0, fn.num_args - 1));
      fn.equal_guard = Chance(50);
      p_.functions.push_back(fn);
    }
    for (int f = 0; f < num_functions; ++f) {
      fn_ = f;
      next_var_ = 0;
      sites_left_ = static_cast<int>(Int(1, 3));  // bounds the branching of the recursion
      const int body = Gen(p_.functions[f].num_results, 0, Scope{});
      p_.functions[f].body = body;
      p_.functions[f].num_vars = next_var_;
      if (f == 0) entry_call_sites_ = call_sites_;
    }
    return std::move(p_);
  }

  int Add(Node n) {
    p_.nodes.push_back(std::move(n));
    return static_cast<int>(p_.nodes.size()) - 1;
  }
  int Leaf(Kind kind, int64_t value) { return Add(Node{kind, value, -1, 1, {}}); }
  int Binary(BinaryOp op, int l, int r) { return Add(Node{Kind::kBinary, op, -1, 1, {l, r}}); }
  const Function& fn() const { return p_.functions[fn_]; }
  std::vector<int> Callees(const Scope& s) const {
    std::vector<int> out;
    if (sites_left_ <= 0) return out;
    for (int g = 0; g < static_cast<int>(p_.functions.size()); ++g) {
      const bool n_stays_valid = !p_.functions[g].equal_guard || fn().equal_guard;
      if (s.recursive || (g > fn_ && n_stays_valid)) out.push_back(g);
    }
    return out;
  }
  bool CanCall(const Scope& s) const { return !Callees(s).empty(); }
  int Callee(const Scope& s) {
    const std::vector<int> callees = Callees(s);
    return callees[Int(0, static_cast<int64_t>(callees.size()) - 1)];
  }

  // A node yielding `arity` values.
  int Gen(int arity, int depth, const Scope& s) {
    if (!s.recursive && depth < kMaxDepth && Chance(depth == 0 ? 75 : 20)) return Guard(arity, depth, s);
    if (depth >= kMaxDepth) return arity == 1 ? Leaf(s) : Tuple(arity, depth, s);
    const int64_t roll = Int(0, 99);
    if (arity == 1) {
      if (roll < 28) return Leaf(s);
      if (roll < 46) {
        // Drawn in order (the order of a call's arguments is unspecified),
        // so that a seed names one program under every compiler; braced
        // lists below are evaluated in order.
        const auto op = static_cast<BinaryOp>(Int(0, kNumBinaryOps - 1));
        const int l = Gen(1, depth + 1, s);
        return Binary(op, l, Gen(1, depth + 1, s));
      }
      if (roll < 51) {
        const int64_t divisors[] = {2, 3, 5, -2, -3};
        const Kind kind = Chance(50) ? Kind::kDivide : Kind::kModulo;
        return Add(Node{kind, divisors[Int(0, 4)], -1, 1, {Gen(1, depth + 1, s)}});
      }
      if (roll < 66 && CanCall(s)) return Call(depth, s);
      if (roll < 80) return If(1, depth, s);
      if (roll < 86) return Let(1, depth, s);
      if (roll < 88) return Add(Node{Kind::kMergeTwice, 0, -1, 1, {Gen(1, depth + 1, s)}});
      if (CanCall(s)) return LetCall(1, depth, s);
      return Leaf(s);
    }
    if (roll < 30) return Tuple(arity, depth, s);
    if (roll < 55) return If(arity, depth, s);
    if (roll < 70) return Let(arity, depth, s);
    if (CanCall(s)) return LetCall(arity, depth, s);
    return Tuple(arity, depth, s);
  }

  int Leaf(const Scope& s) {
    const int64_t roll = Int(0, 99);
    if (!s.vars.empty() && roll < 35) return Leaf(Kind::kVar, s.vars[Int(0, static_cast<int64_t>(s.vars.size()) - 1)]);
    if (roll < 70) return Leaf(Kind::kArg, Int(0, fn().num_args - 1));
    return Leaf(Kind::kConst, Int(-3, 6));
  }

  int Tuple(int arity, int depth, const Scope& s) {
    Node t{Kind::kTuple, 0, -1, arity, {}};
    for (int k = 0; k < arity; ++k) t.kids.push_back(Gen(1, depth + 1, s));
    return Add(std::move(t));
  }

  // The depth guard, in one of its equivalent forms: calls below it on the
  // recursive side only.
  int Guard(int arity, int depth, const Scope& s) {
    const int n = Leaf(Kind::kArg, fn().depth_arg);
    const int zero = Leaf(Kind::kConst, 0);
    const bool then_is_base = Chance(50);
    CompareOp op;
    if (fn().equal_guard) {
      op = then_is_base ? kEqual : kNotEqual;
    } else {
      op = then_is_base ? kLessEqual : kGreater;
    }
    const bool swapped = Chance(25);  // 0 >= n rather than n <= 0
    if (swapped) {
      static const CompareOp kMirror[] = {kGreater, kGreaterEqual, kLess, kLessEqual, kEqual, kNotEqual};
      op = kMirror[op];
    }
    const int pred = Add(Node{Kind::kCompare, op, -1, 1, {swapped ? zero : n, swapped ? n : zero}});
    if (Chance(30)) {
      // Two Conds on it: (p ? a : f(n - 1)) + (p ? b : f(n - 2)).
      const SharedPred shared{next_var_++, then_is_base ? 2 : 1};
      Scope inner = s;
      inner.preds.push_back(shared);
      int body;
      if (arity == 1) {
        const auto combine = static_cast<BinaryOp>(Int(0, kNumBinaryOps - 1));
        const int l = IfOn(shared, 1, depth + 1, inner);
        body = Binary(combine, l, IfOn(shared, 1, depth + 1, inner));
      } else {
        Node t{Kind::kTuple, 0, -1, arity, {}};
        for (int k = 0; k < arity; ++k) t.kids.push_back(IfOn(shared, 1, depth + 1, inner));
        body = Add(std::move(t));
      }
      return Add(Node{Kind::kLet, shared.var, -1, arity, {pred, body}});
    }
    Scope recursive = s;
    recursive.recursive = true;
    const int base = Gen(arity, depth + 1, s);
    const int rec = Gen(arity, depth + 1, recursive);
    return Add(Node{Kind::kIf, 0, -1, arity, {pred, then_is_base ? base : rec, then_is_base ? rec : base}});
  }

  int Pred(int depth, const Scope& s) {
    const int64_t roll = Int(0, 99);
    if (depth < kMaxDepth && roll < 10) return Add(Node{Kind::kNot, 0, -1, 1, {Pred(depth + 1, s)}});
    if (depth < kMaxDepth && roll < 18)
      return Add(Node{Chance(50) ? Kind::kAnd : Kind::kOr, 0, -1, 1, {Pred(depth + 1, s), Pred(depth + 1, s)}});
    auto operand = [&] { return Chance(60) ? Leaf(s) : Gen(1, depth + 1, s); };
    const int l = operand();
    const int r = Chance(40) ? Leaf(Kind::kConst, Int(-2, 4)) : operand();
    return Add(Node{Kind::kCompare, Int(0, kNumCompareOps - 1), -1, 1, {l, r}});
  }

  int If(int arity, int depth, const Scope& s) {
    if (!s.preds.empty() && Chance(40))
      return IfOn(s.preds[Int(0, static_cast<int64_t>(s.preds.size()) - 1)], arity, depth, s);
    const int pred = Pred(depth + 1, s);
    const int then_side = Gen(arity, depth + 1, s);
    const int else_side = Gen(arity, depth + 1, s);
    return Add(Node{Kind::kIf, 0, -1, arity, {pred, then_side, else_side}});
  }

  // A Cond on a shared predicate.
  int IfOn(SharedPred p, int arity, int depth, const Scope& s) {
    Scope then_scope = s, else_scope = s;
    then_scope.recursive = s.recursive || p.recursive_side == 1;
    else_scope.recursive = s.recursive || p.recursive_side == 2;
    const int pred = Leaf(Kind::kVar, p.var);
    const int then_side = Gen(arity, depth + 1, then_scope);
    const int else_side = Gen(arity, depth + 1, else_scope);
    return Add(Node{Kind::kIf, 0, -1, arity, {pred, then_side, else_side}});
  }

  int Let(int arity, int depth, const Scope& s) {
    const int var = next_var_++;
    Scope inner = s;
    int bound;
    if (Chance(25)) {
      bound = Pred(depth + 1, s);
      inner.preds.push_back({var, 0});
    } else {
      bound = Gen(1, depth + 1, s);
      inner.vars.push_back(var);
    }
    return Add(Node{Kind::kLet, var, -1, arity, {bound, Gen(arity, depth + 1, inner)}});
  }

  // Arguments of a call to `callee`: the depth (decreased on a guard's
  // recursive side), and the others often the caller's arguments passed on
  // unchanged (in a Cond branch, a Switch output: the Call is Switch-fired).
  std::vector<int> CallArgs(int callee, int depth, const Scope& s) {
    --sites_left_;
    ++call_sites_;
    const Function& g = p_.functions[callee];
    std::vector<int> args;
    for (int j = 0; j < g.num_args; ++j) {
      if (j == g.depth_arg && !s.recursive) {
        args.push_back(Leaf(Kind::kArg, fn().depth_arg));
      } else if (j == g.depth_arg) {
        const int64_t step = !g.equal_guard && Chance(30) ? 2 : 1;
        const int n = Leaf(Kind::kArg, fn().depth_arg);
        args.push_back(Binary(kSub, n, Leaf(Kind::kConst, step)));
      } else if (Chance(45)) {
        args.push_back(Leaf(Kind::kArg, Int(0, fn().num_args - 1)));
      } else {
        args.push_back(Gen(1, depth + 1, s));
      }
    }
    return args;
  }

  // One result of a call, used in an expression.
  int Call(int depth, const Scope& s) {
    const int callee = Callee(s);
    Node call{Kind::kCall, Int(0, p_.functions[callee].num_results - 1), callee, 1, CallArgs(callee, depth, s)};
    return Add(std::move(call));
  }

  // All results of a call, bound to variables. Often the body is just those
  // variables: a tail call, whose results are the branch's.
  int LetCall(int arity, int depth, const Scope& s) {
    const int callee = Callee(s);
    const int num_results = p_.functions[callee].num_results;
    std::vector<int> kids = CallArgs(callee, depth, s);
    const int first = next_var_;
    next_var_ += num_results;
    Scope inner = s;
    for (int r = 0; r < num_results; ++r) inner.vars.push_back(first + r);
    int body;
    if (Chance(45)) {
      auto result = [&] {
        return Chance(80) ? Leaf(Kind::kVar, first + Int(0, num_results - 1)) : Gen(1, depth + 1, inner);
      };
      if (arity == 1) {
        body = result();
      } else {
        Node t{Kind::kTuple, 0, -1, arity, {}};
        for (int k = 0; k < arity; ++k) t.kids.push_back(result());
        body = Add(std::move(t));
      }
    } else {
      body = Gen(arity, depth + 1, inner);
    }
    kids.push_back(body);
    return Add(Node{Kind::kLetCall, first, callee, arity, std::move(kids)});
  }

  std::mt19937 rng_;
  Program p_;
  int fn_ = 0;
  int next_var_ = 0;
  int sites_left_ = 0;
  int call_sites_ = 0;
  int entry_call_sites_ = 0;
};

// ---------------------------------------------------------------------------
// The interpreter: strict, as dataflow is: every value on a taken path is
// computed (both sides of && and ||, let-bound values nobody uses), only
// the taken side of an if.

class Interpreter {
 public:
  Interpreter(const Program& p, int64_t max_calls) : p_(p), max_calls_(max_calls) {}

  // The entry function's results, or nothing past max_calls invocations.
  std::optional<std::vector<int64_t>> Run(const std::vector<int64_t>& inputs) {
    std::vector<int64_t> out = Invoke(0, inputs);
    if (calls_ > max_calls_) return std::nullopt;
    return out;
  }
  int64_t calls() const { return calls_; }
  int64_t call_args() const { return call_args_; }  // summed over invocations: tdf fires a Call per argument

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
      case Kind::kIf: return Eval(kid(0) ? n.kids[1] : n.kids[2], env);
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
    }
    return {};
  }

  const Program& p_;
  const int64_t max_calls_;
  int64_t calls_ = 0;
  int64_t call_args_ = 0;
};

// ---------------------------------------------------------------------------
// Emission through GraphBuilder.

class Emitter {
 public:
  explicit Emitter(const Program& p) : p_(p) {}

  // Main: placeholders in0, in1, ... for f0's arguments, one call, its
  // results fetched as "result" and "result1".
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
    const Outs results = b.Call(FunctionName(0), inputs);
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
    }
    return {};
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
  int64_t calls = 0;      // invocations, main's call included
  int64_t call_args = 0;  // their arguments, summed
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
  // test little: draw again (from the same generator, so the seed still
  // names the case).
  for (int64_t most_calls = 0; most_calls < 3;) {
    c.program = gen.Generate();
    c.inputs.clear();
    const Function& entry = c.program.functions[0];
    for (int k = 0; k < kInputsPerProgram; ++k) {
      Input in;
      for (int i = 0; i < entry.num_args; ++i) in.values.push_back(gen.Int(-4, 8));
      in.values[entry.depth_arg] = gen.Int(0, kMaxInputDepth);
      for (;;) {  // n == 0 makes one invocation, so this ends
        Interpreter interpreter(c.program, kMaxCalls);
        std::optional<std::vector<int64_t>> want = interpreter.Run(in.values);
        if (want.has_value()) {
          in.want = *std::move(want);
          in.calls = interpreter.calls();
          in.call_args = interpreter.call_args();
          break;
        }
        --in.values[entry.depth_arg];
      }
      most_calls = std::max(most_calls, in.calls);
      c.inputs.push_back(std::move(in));
    }
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
    EXPECT_EQ(stats.frames_created, 1 + in.calls);  // the root's and one per invocation
    if (mode == ExecutionMode::kStatic) {
      // A Call per argument fires live once per invocation: none twice,
      // however its argument reached it.
      EXPECT_EQ(OpCount(stats, "Call").first, in.call_args);
    } else {
      EXPECT_EQ(OpCount(stats, "Invoke").first, in.calls);
    }
    // One result alone: the run leaves the other's Identity out (and, in
    // static mode, its Return), but the call runs whole (Session::Run),
    // with the same invocations.
    if (fetches.size() < 2) continue;
    RunStats alone;
    got = session->Run(feeds, {fetches.back()}, {}, &alone);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].scalar<int64_t>(), in.want.back()) << fetches.back() << " alone";
    EXPECT_EQ(alone.nodes_pruned, mode == ExecutionMode::kStatic ? 2 : 1);
    EXPECT_EQ(alone.live_frames_after_run, 0);
    EXPECT_EQ(alone.frames_created, 1 + in.calls);
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
    for (const Input& in : c.inputs)
      if (in.calls >= 50) ++counts["runs of 50 invocations or more"];
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

  void Walk(int id, bool in_branch) {
    const Node& n = N(id);
    switch (n.kind) {
      case Kind::kIf:
        if (in_branch) ++counts["nested conds"];
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
      default: break;
    }
    for (size_t k = 0; k < n.kids.size(); ++k) Walk(n.kids[k], in_branch || (n.kind == Kind::kIf && k > 0));
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
      "calls using one of two results", "conds sharing a predicate", "merges of two live values"};
  for (const char* shape : kShapes) EXPECT_GE(counter.counts[shape], 10) << shape;
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
}  // namespace tdf
