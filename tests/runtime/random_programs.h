// Random programs of mutually recursive integer functions, for
// random_recursion_test.cc: their AST, a printer (for failure messages) and
// the seeded generator. The interpreter that gives their answers and the
// emitter that builds them with GraphBuilder live in the test.
#ifndef TDF_TESTS_RUNTIME_RANDOM_PROGRAMS_H_
#define TDF_TESTS_RUNTIME_RANDOM_PROGRAMS_H_

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tdf {
namespace random_programs {
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
  // A While of `loop_vars` variables from `value` on: the first a counter,
  // the others carried. kids: each variable's initial value; the condition
  // (counter < a constant, perhaps && a predicate); the counter's next
  // value (counter + 1 or 2); the carried variables' next values (one node
  // of arity loop_vars - 1); then the node that yields the loop's values,
  // in which the variables hold their final values. The condition and the
  // next values see the variables of the current iteration.
  kLoop,
};
enum BinaryOp : int64_t { kAdd, kSub, kMul, kMaximum, kMinimum, kNumBinaryOps };
enum CompareOp : int64_t { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual, kNumCompareOps };

struct Node {
  Kind kind;
  int64_t value = 0;
  int callee = -1;
  int arity = 1;  // how many values it yields
  std::vector<int> kids;  // indices into Program::nodes
  int loop_vars = 0;            // kLoop
  int parallel_iterations = 10; // kLoop
};

// kLoop's kids, by role.
inline int LoopInit(const Node& n, int var) { return n.kids[var]; }
inline int LoopCondition(const Node& n) { return n.kids[n.loop_vars]; }
inline int LoopNextCounter(const Node& n) { return n.kids[n.loop_vars + 1]; }
inline int LoopNextCarried(const Node& n) { return n.kids[n.loop_vars + 2]; }
inline int LoopAfter(const Node& n) { return n.kids[n.loop_vars + 3]; }

struct Function {
  int num_args = 1;
  int num_results = 1;
  int depth_arg = 0;         // `n`, printed so
  bool equal_guard = false;  // base case n == 0 (n never negative) rather than n <= 0
  int body = -1;
  int num_vars = 0;
};

// Main calls f0 once, or from a While: `iterations` times, in iteration i
// with each argument either main's input or (where it varies) min(n, i) for
// the depth argument (never negative, at most n) and a + i for another; each of
// f0's results r gives acc_r = acc_r * 3 + r (every iteration counts, in
// order); main's results are the accs.
struct MainLoop {
  int iterations = 0;  // 0: no loop, one call
  int parallel_iterations = 10;
  std::vector<bool> varies;  // per argument of f0
};

struct Program {
  std::vector<Node> nodes;
  std::vector<Function> functions;  // functions[0] is the one main calls
  MainLoop main_loop;
};

inline std::string FunctionName(int f) { return absl::StrCat("f", f); }
inline std::string ArgName(const Function& fn, int i) { return i == fn.depth_arg ? "n" : absl::StrCat("a", i); }

// Wrapping, as tdf's integer kernels do; signed overflow would be UB here.
inline int64_t Wrap(uint64_t v) { return static_cast<int64_t>(v); }

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
    const MainLoop& loop = p_.main_loop;
    const Function& entry = p_.functions[0];
    std::vector<std::string> args;
    for (int i = 0; i < entry.num_args; ++i) {
      const std::string a = ArgName(entry, i);
      const bool varies = loop.iterations > 0 && loop.varies[i];
      args.push_back(!varies ? a : i == entry.depth_arg ? "min(n, i)" : absl::StrCat("(", a, " + i)"));
    }
    const std::string call = absl::StrCat(FunctionName(0), "(", absl::StrJoin(args, ", "), ")");
    if (loop.iterations == 0) {
      absl::StrAppend(&out, "main = ", call, "\n");
    } else {
      absl::StrAppend(&out, "main = for i in [0, ", loop.iterations, ") (parallel_iterations ",
                      loop.parallel_iterations, "): acc = acc * 3 + ", call, "\n");
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
      case Kind::kLoop: {
        std::vector<std::string> vars, inits;
        for (int v = 0; v < n.loop_vars; ++v) {
          vars.push_back(absl::StrCat("v", n.value + v));
          inits.push_back(Print(LoopInit(n, v), fn));
        }
        return absl::StrCat("{(", absl::StrJoin(vars, ", "), ") = loop from (", absl::StrJoin(inits, ", "),
                            ") while ", Print(LoopCondition(n), fn), " next (", Print(LoopNextCounter(n), fn),
                            "; ", Print(LoopNextCarried(n), fn), ") parallel_iterations ", n.parallel_iterations,
                            "; ", Print(LoopAfter(n), fn), "}");
      }
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
// Loops end: each counts from -1 or more (n is never below -1) up to a
// constant of at most 3, and they nest two deep at most.

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
    int loop_depth = 0;      // loops around this node (in its function)
  };

  Program Attempt() {
    p_ = Program{};
    call_sites_ = 0;
    entry_call_sites_ = 0;
    // Some programs without loops, so that the shapes of recursion alone
    // keep their share.
    loops_allowed_ = Chance(65);
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
      loops_left_ = 3;  // bounds the size of a body
      const int body = Gen(p_.functions[f].num_results, 0, Scope{});
      p_.functions[f].body = body;
      p_.functions[f].num_vars = next_var_;
      if (f == 0) entry_call_sites_ = call_sites_;
    }
    if (Chance(30)) {
      // More iterations than the loop lets run at once, so that its window
      // fills and waits for calls to end (issue #26 item 1's stall).
      MainLoop& loop = p_.main_loop;
      loop.iterations = static_cast<int>(Int(10, 30));
      const int64_t window = Int(0, 99);
      loop.parallel_iterations = window < 30 ? 1 : window < 60 ? 2 : window < 80 ? static_cast<int>(Int(3, 8)) : 10;
      for (int i = 0; i < p_.functions[0].num_args; ++i) loop.varies.push_back(Chance(50));
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
    if (CanLoop(depth, s) && Chance(s.loop_depth > 0 ? 20 : 12)) return Loop(arity, depth, s);
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
    int pred;
    int loop_side = 0;  // 1: then, 2: else
    if (CanLoop(depth + 1, s) && Chance(20)) {
      // On a loop's result, often with another loop in a branch:
      // L(n) >= 4 ? L(n) : 0 (issue #26 item 1).
      const int loop = Loop(1, depth + 1, s);
      const int other = Chance(50) ? Leaf(Kind::kConst, Int(-2, 4)) : Leaf(s);
      pred = Add(Node{Kind::kCompare, Int(0, kNumCompareOps - 1), -1, 1, {loop, other}});
      loop_side = static_cast<int>(Int(0, 2));
    } else {
      pred = Pred(depth + 1, s);
    }
    auto side = [&](int which) {
      return loop_side == which && CanLoop(depth + 1, s) ? Loop(arity, depth + 1, s) : Gen(arity, depth + 1, s);
    };
    const int then_side = side(1);
    const int else_side = side(2);
    return Add(Node{Kind::kIf, 0, -1, arity, {pred, then_side, else_side}});
  }

  bool CanLoop(int depth, const Scope& s) const {
    return loops_allowed_ && loops_left_ > 0 && s.loop_depth < 2 && depth + 1 < kMaxDepth;
  }

  // A While (Kind::kLoop): a counter and 1-3 carried variables.
  int Loop(int arity, int depth, const Scope& s) {
    --loops_left_;
    const int num_vars = static_cast<int>(Int(2, 4));
    const int first = next_var_;
    next_var_ += num_vars;
    std::vector<int> kids;
    // The counter starts at -1, 0 or 1, at n (never below -1), or at an
    // expression clamped below at -1: at most 4 iterations. A nested loop
    // often starts from invariants of the outer loop alone (n and
    // arguments), which must not start it in the outer loop's exiting
    // iteration.
    const bool from_invariants = s.loop_depth > 0 && Chance(40);
    const int64_t start_roll = from_invariants ? 50 : Int(0, 99);
    if (start_roll < 40) {
      kids.push_back(Leaf(Kind::kConst, Int(-1, 1)));
    } else if (start_roll < 60) {
      kids.push_back(Leaf(Kind::kArg, fn().depth_arg));
    } else {
      const int start = Gen(1, depth + 1, s);
      kids.push_back(Binary(kMaximum, start, Leaf(Kind::kConst, -1)));
    }
    for (int v = 1; v < num_vars; ++v) {
      if (from_invariants) {
        kids.push_back(Leaf(Kind::kArg, Int(0, fn().num_args - 1)));
      } else {
        kids.push_back(Chance(50) ? Leaf(s) : Gen(1, depth + 1, s));
      }
    }
    Scope inner = s;
    ++inner.loop_depth;
    for (int v = 0; v < num_vars; ++v) inner.vars.push_back(first + v);
    // The condition and body are drawn at the loop's own depth: loops nest
    // only two deep, and a body too shallow for a Cond or a loop tests little.
    int cond = Add(Node{Kind::kCompare, kLess, -1, 1, {Leaf(Kind::kVar, first), Leaf(Kind::kConst, Int(0, 3))}});
    if (Chance(35)) {
      int more;
      if (CanCall(inner) && Chance(40)) {  // a call in every iteration, the exiting one too
        const int call = Call(depth, inner);
        more = Add(Node{Kind::kCompare, Int(0, kNumCompareOps - 1), -1, 1, {call, Leaf(Kind::kConst, Int(-2, 4))}});
      } else {
        more = Pred(depth, inner);
      }
      cond = Add(Node{Kind::kAnd, 0, -1, 1, {cond, more}});
    }
    kids.push_back(cond);
    kids.push_back(Binary(kAdd, Leaf(Kind::kVar, first), Leaf(Kind::kConst, Chance(70) ? 1 : 2)));
    const int carried = num_vars - 1;
    if (CanCall(inner) && Chance(35)) {
      kids.push_back(carried == 1 ? Call(depth, inner) : LetCall(carried, depth, inner));  // recursion in a loop
    } else {
      kids.push_back(Gen(carried, depth, inner));
    }
    Scope after = s;
    for (int v = 0; v < num_vars; ++v) after.vars.push_back(first + v);
    if (Chance(50)) {
      // The loop's values themselves.
      Node t{Kind::kTuple, 0, -1, arity, {}};
      for (int k = 0; k < arity; ++k) t.kids.push_back(Leaf(Kind::kVar, first + Int(1, num_vars - 1)));
      kids.push_back(arity == 1 ? t.kids[0] : Add(std::move(t)));
    } else {
      kids.push_back(Gen(arity, depth + 1, after));
    }
    Node loop{Kind::kLoop, first, -1, arity, std::move(kids)};
    loop.loop_vars = num_vars;
    const int64_t window = Int(0, 99);
    loop.parallel_iterations = window < 25 ? 1 : window < 50 ? 2 : 10;
    return Add(std::move(loop));
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
  bool loops_allowed_ = false;
  int loops_left_ = 0;
  int entry_call_sites_ = 0;
};

}  // namespace random_programs
}  // namespace tdf

#endif  // TDF_TESTS_RUNTIME_RANDOM_PROGRAMS_H_
