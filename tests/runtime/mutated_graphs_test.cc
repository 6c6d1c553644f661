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
// TDF_MUTATED_GRAPHS_SEED=<seed> runs one mutant alone and prints its graph
// (text form) and every outcome: the way to reproduce a failure.
// TDF_MUTATED_GRAPHS_RANGE=<first>-<end> runs other seeds, and
// TDF_MUTATED_GRAPHS_SKIP=<seed>,... leaves some out (to hunt past a crash),
// TDF_MUTATED_GRAPHS_TRACE=1 names each seed on stderr as it starts.
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
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/graph.h"
#include "tdf/op_registry.h"
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
namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

constexpr uint64_t kNumMutants = 4000;
constexpr absl::Duration kDeadline = absl::Seconds(2);
// A run still going this long after its deadline counts as a hang: the
// watchdog prints the mutant and aborts (a hung test names nothing).
constexpr absl::Duration kHangAfter = absl::Seconds(60);
// A run that ends this long after its deadline is an overrun (a failure).
constexpr absl::Duration kOverrunSlack = absl::Seconds(3);

// Mutants that the library mishandled, found by this test and fixed since
// (Compile rejects what the executor could not route: an Enter nothing
// reads, an edge into another frame, a call_site of two frames or out of
// range, a Retval inside a loop; a run refuses to fetch an Enter or a
// Call): kept as regression cases. Crashing ones (memory errors) run in a
// child process (KnownCrashers below), so that one crash does not hide
// every other outcome; the others run with the rest and their failures
// carry the note.
//
// The seeds name mutants of today's reference programs, builder and passes;
// when those change, the mutants change too: rerun with
// TDF_MUTATED_GRAPHS_TRACE=1 under the asan preset to find the crashers
// again. MinimalRepros below has each bug's smallest form, seed-free.
struct KnownBug {
  uint64_t seed;
  bool crashes;
  const char* note;
};
const std::vector<KnownBug> kKnownBugs = {
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

const KnownBug* FindKnownBug(uint64_t seed) {
  for (const KnownBug& b : kKnownBugs)
    if (b.seed == seed) return &b;
  return nullptr;
}

Tensor I64(int64_t v) { return Tensor::Scalar<int64_t>(v); }
Tensor F64(double v) { return Tensor::Scalar<double>(v); }

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
Program WithGradients(std::string name, Graph g, Feeds feeds, const std::vector<std::string>& xs) {
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, xs);
  EXPECT_TRUE(grads.ok()) << name << ": " << grads.status();
  std::vector<std::string> fetches = {"result"};
  if (grads.ok()) fetches.insert(fetches.end(), grads->begin(), grads->end());
  return Program{std::move(name), std::move(g), std::move(feeds), std::move(fetches), ""};
}

// y = x^n by a while loop (float, differentiable through the loop).
Graph PowLoop() {
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
Program Training() {
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
Program Transformed(const Program& p) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(p.graph);
  EXPECT_TRUE(s.ok()) << p.name << ": " << s.status();
  Program out = p;
  out.name = p.name + "/transformed";
  if (s.ok()) out.graph = (*s)->executable_graph();
  return out;
}

const std::vector<Program>& Programs() {
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
// Mutations

class Mutator {
 public:
  Mutator(uint64_t seed, Graph* graph) : rng_(seed), g_(graph) {
    ops_ = OpRegistry::Global()->ListOps();
  }

  uint64_t Uniform(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool OneIn(uint64_t n) { return Uniform(n) == 0; }

  // Applies 1-3 mutations; returns what was done, one line each.
  std::vector<std::string> Mutate() {
    std::vector<std::string> log;
    const int steps = 1 + static_cast<int>(Uniform(3));
    for (int i = 0; i < steps; ++i) log.push_back(MutateOnce());
    return log;
  }

 private:
  struct Body {
    std::string where;  // "main" or "function 'f'"
    std::vector<NodeDef>* nodes;
  };

  std::vector<Body> Bodies() {
    std::vector<Body> out = {{"main", &g_->node}};
    for (const auto& [name, f] : g_->library.functions())
      if (f.defined) out.push_back({absl::StrCat("function '", name, "'"), &g_->library.FindMutable(name)->node});
    return out;
  }

  std::vector<std::string> FunctionNames() {
    std::vector<std::string> out;
    for (const auto& [name, f] : g_->library.functions()) out.push_back(name);
    return out;
  }

  // A node name: mostly of the same body, sometimes of another body or none.
  std::string SomeNodeName(const Body& body) {
    if (OneIn(12)) {
      std::vector<Body> all = Bodies();
      const Body& other = all[Uniform(all.size())];
      if (!other.nodes->empty()) return (*other.nodes)[Uniform(other.nodes->size())].name;
    }
    if (OneIn(40)) return "no_such_node";
    if (body.nodes->empty()) return "no_such_node";
    return (*body.nodes)[Uniform(body.nodes->size())].name;
  }

  std::string SomeInput(const Body& body) {
    std::string name = SomeNodeName(body);
    switch (Uniform(8)) {
      case 0: return absl::StrCat("^", name);
      case 1: return absl::StrCat(name, ":1");
      case 2: return absl::StrCat(name, ":", Uniform(4));
      case 3: if (OneIn(4)) return absl::StrCat(name, ":-1"); return name;
      default: return name;
    }
  }

  Tensor SomeTensor() {
    static const int64_t kInts[] = {0, -1, 1, 2, 3, 100, 5000, 100000, -100000, 1LL << 40,
                                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    switch (Uniform(10)) {
      case 0: return Tensor::Scalar<double>(OneIn(2) ? 0.0 : std::numeric_limits<double>::quiet_NaN());
      case 1: return Tensor::Scalar<bool>(OneIn(2));
      case 2: return Tensor::Scalar<int32_t>(static_cast<int32_t>(kInts[Uniform(6)]));
      case 3: return Tensor::Vector<int64_t>({1, 2, 3});
      case 4: return Tensor::Vector<double>({});
      case 5: return Tensor();  // invalid
      default: return I64(kInts[Uniform(sizeof(kInts) / sizeof(kInts[0]))]);
    }
  }

  AttrValue SomeAttr(const AttrValue& old) {
    static const int64_t kInts[] = {0, 1, -1, 2, 3, 7, 1000, 1LL << 40, std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
    if (OneIn(6)) {  // another type altogether
      switch (Uniform(6)) {
        case 0: return AttrValue(int64_t{1});
        case 1: return AttrValue("fib");
        case 2: return AttrValue(DType::kFloat64);
        case 3: return AttrValue(true);
        case 4: return AttrValue(std::vector<int64_t>{0});
        default: return AttrValue();
      }
    }
    if (const int64_t* v = old.get_if<int64_t>()) {
      if (OneIn(3)) return AttrValue(*v + (OneIn(2) ? 1 : -1));
      return AttrValue(kInts[Uniform(sizeof(kInts) / sizeof(kInts[0]))]);
    }
    if (old.holds<double>()) return AttrValue(OneIn(2) ? 0.0 : -1e308);
    if (const bool* b = old.get_if<bool>()) return AttrValue(!*b);
    if (const std::string* s = old.get_if<std::string>()) {
      std::vector<std::string> names = FunctionNames();
      switch (Uniform(4)) {
        case 0: return AttrValue("");
        case 1: return AttrValue(*s + "_x");
        default: return names.empty() ? AttrValue("nope") : AttrValue(names[Uniform(names.size())]);
      }
    }
    if (old.holds<DType>()) return AttrValue(static_cast<DType>(Uniform(6)));
    if (old.holds<Shape>()) return OneIn(2) ? AttrValue(Shape({2})) : AttrValue(Shape({-1}));
    if (old.holds<Tensor>()) return AttrValue(SomeTensor());
    if (const auto* l = old.get_if<std::vector<int64_t>>()) {
      std::vector<int64_t> v = *l;
      switch (Uniform(5)) {
        case 0: v.clear(); break;
        case 1: v.push_back(static_cast<int64_t>(Uniform(3))); break;
        case 2: if (!v.empty()) v[Uniform(v.size())] = kInts[Uniform(10)]; break;
        case 3: if (!v.empty()) v.pop_back(); break;
        default: if (v.size() > 1) std::swap(v[0], v[1]); break;
      }
      return AttrValue(std::move(v));
    }
    return AttrValue(kInts[Uniform(10)]);
  }

  std::string MutateOnce() {
    std::vector<Body> bodies = Bodies();
    // Function bodies hold most of the interesting structure.
    Body body = bodies[bodies.size() > 1 && !OneIn(3) ? 1 + Uniform(bodies.size() - 1) : 0];
    std::vector<NodeDef>& nodes = *body.nodes;
    if (nodes.empty()) return "(empty body)";
    NodeDef& n = nodes[Uniform(nodes.size())];
    const std::string at = absl::StrCat(body.where, " node '", n.name, "' (", n.op, ")");
    switch (Uniform(17)) {
      case 0: {  // rewire an input
        if (n.input.empty()) break;
        const size_t i = Uniform(n.input.size());
        std::string old = n.input[i];
        n.input[i] = SomeInput(body);
        return absl::StrCat(at, ": input ", i, " '", old, "' -> '", n.input[i], "'");
      }
      case 1: {  // add an input (data or control), anywhere
        std::string in = SomeInput(body);
        const size_t i = Uniform(n.input.size() + 1);
        n.input.insert(n.input.begin() + i, in);
        return absl::StrCat(at, ": insert input ", i, " '", in, "'");
      }
      case 2: {  // drop an input
        if (n.input.empty()) break;
        const size_t i = Uniform(n.input.size());
        std::string old = n.input[i];
        n.input.erase(n.input.begin() + i);
        return absl::StrCat(at, ": drop input ", i, " '", old, "'");
      }
      case 3: {  // duplicate an input
        if (n.input.empty()) break;
        const size_t i = Uniform(n.input.size());
        n.input.insert(n.input.begin() + i, n.input[i]);
        return absl::StrCat(at, ": duplicate input ", i, " '", n.input[i], "'");
      }
      case 4: {  // change the op
        std::string old = n.op;
        n.op = ops_[Uniform(ops_.size())];
        return absl::StrCat(at, ": op ", old, " -> ", n.op);
      }
      case 5: {  // remove an attr
        if (n.attr.empty()) break;
        auto it = n.attr.begin();
        std::advance(it, Uniform(n.attr.size()));
        std::string key = it->first;
        n.attr.erase(it);
        return absl::StrCat(at, ": remove attr ", key);
      }
      case 6:
      case 7: {  // change an attr
        if (n.attr.empty()) break;
        auto it = n.attr.begin();
        std::advance(it, Uniform(n.attr.size()));
        std::string old = it->second.DebugString();
        it->second = SomeAttr(it->second);
        return absl::StrCat(at, ": attr ", it->first, " ", old, " -> ", it->second.DebugString());
      }
      case 8: {  // add an attr the executor reads somewhere
        static const char* kKeys[] = {"partial_results", "partial_args", "site_group", "T", "dtype", "function",
                                      "call_site", "arg_index", "result_index", "index", "frame_name",
                                      "parallel_iterations", "is_constant", "value"};
        const char* key = kKeys[Uniform(sizeof(kKeys) / sizeof(kKeys[0]))];
        AttrValue v;
        const std::string k = key;
        if (k == "partial_results" || k == "partial_args") v = std::vector<int64_t>{static_cast<int64_t>(Uniform(3))};
        else if (k == "T" || k == "dtype") v = static_cast<DType>(Uniform(6));
        else if (k == "function" || k == "frame_name") v = SomeAttr(AttrValue(""));
        else if (k == "is_constant") v = OneIn(2);
        else if (k == "value") v = SomeTensor();
        else v = SomeAttr(AttrValue(int64_t{0}));
        n.attr[k] = v;
        return absl::StrCat(at, ": set attr ", k, " = ", v.DebugString());
      }
      case 9: {  // delete the node
        std::string name = n.name;
        nodes.erase(nodes.begin() + (&n - nodes.data()));
        return absl::StrCat(body.where, ": delete node '", name, "'");
      }
      case 10: {  // rename the node (sometimes onto an existing name)
        std::string old = n.name;
        n.name = OneIn(3) ? SomeNodeName(body) : (OneIn(5) ? std::string() : old + "_renamed");
        return absl::StrCat(at, ": rename to '", n.name, "'");
      }
      case 11: {  // swap two nodes' inputs
        NodeDef& m = nodes[Uniform(nodes.size())];
        std::swap(n.input, m.input);
        return absl::StrCat(at, ": swap inputs with '", m.name, "'");
      }
      case 12: {  // reorder a node's inputs
        if (n.input.size() < 2) break;
        std::swap(n.input[0], n.input[n.input.size() - 1]);
        return absl::StrCat(at, ": swap first and last input");
      }
      case 13:
      case 14: {  // change a Const's value: a zero divisor, a huge or negative depth
        std::vector<NodeDef*> consts;
        for (NodeDef& c : nodes)
          if (c.op == "Const") consts.push_back(&c);
        if (consts.empty()) break;
        NodeDef& c = *consts[Uniform(consts.size())];
        Tensor t = SomeTensor();
        c.attr["value"] = t;
        if (!OneIn(4) && t.valid()) c.attr["dtype"] = t.dtype();
        return absl::StrCat(body.where, " node '", c.name, "' (Const): value -> ",
                            AttrValue(t).DebugString());
      }
      case 15: {  // change the library: signatures, definitions
        std::vector<std::string> names = FunctionNames();
        if (names.empty()) break;
        FunctionDef* f = g_->library.FindMutable(names[Uniform(names.size())]);
        switch (Uniform(6)) {
          case 0:
            f->defined = false;
            return absl::StrCat("function '", f->signature.name, "': undefine");
          case 1:
            f->signature.inputs.push_back({"extra", DType::kInt64});
            return absl::StrCat("function '", f->signature.name, "': add an input");
          case 2:
            if (f->signature.outputs.empty()) break;
            f->signature.outputs.pop_back();
            return absl::StrCat("function '", f->signature.name, "': drop an output");
          case 3:
            if (f->signature.inputs.empty()) break;
            f->signature.inputs[0].type = static_cast<DType>(Uniform(6));
            return absl::StrCat("function '", f->signature.name, "': input 0 type -> ",
                                DTypeName(f->signature.inputs[0].type));
          case 4:
            f->signature.outputs.push_back({"extra", DType::kFloat64});
            return absl::StrCat("function '", f->signature.name, "': add an output");
          default: {
            FunctionDef copy = *f;
            std::string old = copy.signature.name;
            copy.signature.name += "_copy";
            g_->library.Put(std::move(copy));
            return absl::StrCat("function '", old, "': copied as '", old, "_copy'");
          }
        }
        break;
      }
      default: {  // duplicate the node under a new name, or give it a device
        if (OneIn(2)) {
          n.device = OneIn(2) ? "cuda:0" : "tpu:7";
          return absl::StrCat(at, ": device '", n.device, "'");
        }
        NodeDef copy = n;
        copy.name += "_dup";
        nodes.push_back(std::move(copy));
        return absl::StrCat(at, ": duplicated as '", nodes.back().name, "'");
      }
    }
    return absl::StrCat(at, ": (no-op)");
  }

  std::mt19937_64 rng_;
  Graph* g_;
  std::vector<std::string> ops_;
};

// ---------------------------------------------------------------------------
// A crash names its mutant: the description of what runs now is kept in a
// static buffer that a fatal signal handler (or, under a sanitizer, its
// death callback) writes out.

char g_current[16384];

void SetCurrent(const std::string& what) {
  const size_t n = std::min(what.size(), sizeof(g_current) - 2);
  std::memcpy(g_current, what.data(), n);
  g_current[n] = '\n';
  g_current[n + 1] = '\0';
}

void WriteCurrent() {
  static const char kPrefix[] = "\nMUTANT RUNNING WHEN THE PROCESS DIED: ";
  (void)!write(2, kPrefix, sizeof(kPrefix) - 1);
  (void)!write(2, g_current, std::strlen(g_current));
}

void InstallCrashReporter() {
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

Mutant MakeMutant(uint64_t seed) {
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

bool Verbose() { return std::getenv("TDF_MUTATED_GRAPHS_SEED") != nullptr; }

// Is this failure one whose message need not name a node?
bool ExemptFromNodeName(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kDeadlineExceeded || s.code() == absl::StatusCode::kCancelled) return true;
  // Feeds, fetches and targets are the caller's mistake, not a node's.
  if (s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kNotFound) {
    for (const char* word : {"feed", "fetch", "target", "placeholder", "Placeholder"})
      if (absl::StrContains(s.message(), word)) return true;
  }
  return false;
}

void RecordRun(Summary& sum, const std::string& where, const absl::StatusOr<std::vector<Tensor>>& out,
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

void RunMutantOrThrow(Summary& sum, Watchdog& watchdog, const Mutant& m);

// The library reports errors as Status; an exception escaping it is a bug
// (outside a gtest body it terminates the process), named with its mutant.
void RunMutant(Summary& sum, Watchdog& watchdog, uint64_t seed) {
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

void RunMutantOrThrow(Summary& sum, Watchdog& watchdog, const Mutant& m) {
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

std::string Counts(const std::map<std::string, int>& m) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : m) parts.push_back(absl::StrCat(k, " ", v));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

void PrintSummary(const Summary& sum, absl::Duration took) {
  std::printf(
      "mutants %d: Create failed %d (%s), created %d\n"
      "runs %d: OK %d, failed %s; deadline hits %d, max overrun %lld ms\n"
      "frames reclaimed after failed runs: %lld\n"
      "run errors naming no node: %s\nrun errors naming a node but no tag: %s\n"
      "Create errors naming no node or function: %s\ntook %s\n",
      sum.mutants, sum.create_failed, Counts(sum.create_codes).c_str(), sum.created, sum.runs, sum.runs_ok,
      Counts(sum.run_codes).c_str(), sum.deadline_hits, static_cast<long long>(sum.max_overrun_ms),
      static_cast<long long>(sum.frames_reclaimed_after_failures), Counts(sum.run_errors_without_node).c_str(),
      Counts(sum.run_errors_without_tag).c_str(), Counts(sum.create_errors_without_node).c_str(),
      absl::FormatDuration(took).c_str());
  for (const std::string& e : sum.examples_without_node) std::printf("  no node: %s\n", e.c_str());
  for (const std::string& e : sum.examples_without_tag) std::printf("  no tag: %s\n", e.c_str());
  std::fflush(stdout);
}

TEST(MutatedGraphsTest, EveryMutantEndsInAStatus) {
  InstallCrashReporter();
  Watchdog watchdog;
  Summary sum;
  const absl::Time start = absl::Now();
  uint64_t first = 0, end = kNumMutants;
  bool chosen = false;  // a seed or range named by hand runs known crashers too
  if (const char* one = std::getenv("TDF_MUTATED_GRAPHS_SEED")) {
    first = std::strtoull(one, nullptr, 10);
    end = first + 1;
    chosen = true;
  } else if (const char* range = std::getenv("TDF_MUTATED_GRAPHS_RANGE")) {
    std::vector<std::string> bounds = absl::StrSplit(range, '-');
    first = std::strtoull(bounds[0].c_str(), nullptr, 10);
    end = bounds.size() > 1 ? std::strtoull(bounds[1].c_str(), nullptr, 10) : first + 1;
    chosen = true;
  }
  std::set<uint64_t> skip;
  if (const char* list = std::getenv("TDF_MUTATED_GRAPHS_SKIP"))
    for (absl::string_view s : absl::StrSplit(list, ',', absl::SkipEmpty()))
      skip.insert(std::strtoull(std::string(s).c_str(), nullptr, 10));
  for (uint64_t seed = first; seed < end; ++seed) {
    if (skip.count(seed) != 0) continue;
    const KnownBug* bug = FindKnownBug(seed);
    if (bug != nullptr && bug->crashes && !chosen) continue;  // KnownCrashers runs it
    RunMutant(sum, watchdog, seed);
  }
  PrintSummary(sum, absl::Now() - start);
  for (const std::string& b : sum.bad) ADD_FAILURE() << b;
}

// The known crashers, each alone in a child process (a memory error ends
// the child, not the other mutants' runs). Each must end like any other
// mutant: they fail today, and the failure shows the child's report.
// The runs left TBB threads behind: a child must start afresh ("threadsafe").
class ThreadsafeDeathTests {
 public:
  ThreadsafeDeathTests() : saved_(GTEST_FLAG_GET(death_test_style)) { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  ~ThreadsafeDeathTests() { GTEST_FLAG_SET(death_test_style, saved_); }

 private:
  std::string saved_;
};

TEST(MutatedGraphsTest, KnownCrashers) {
  ThreadsafeDeathTests style;
  for (const KnownBug& bug : kKnownBugs) {
    if (!bug.crashes) continue;
    SCOPED_TRACE(absl::StrCat("seed ", bug.seed, ": ", bug.note));
    EXPECT_EXIT(
        {
          InstallCrashReporter();
          Summary sum;
          {
            Watchdog watchdog;
            RunMutant(sum, watchdog, bug.seed);
          }
          for (const std::string& b : sum.bad) std::fprintf(stderr, "FAILURE: %s\n", b.c_str());
          std::fflush(stderr);
          std::_Exit(sum.bad.empty() ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
  }
}

// ---------------------------------------------------------------------------
// The smallest form of each bug the mutants found, independent of seeds.
// Each must end like any mutant (a Status; OK leaves no frame live); each
// runs in a child process, since each crashed (or, F, left frames live)
// before the fixes: a failure shows the child's sanitizer report or signal.

struct Repro {
  std::string name;
  Graph graph;
  SessionOptions options;
  Feeds feeds;
  std::vector<std::string> fetches;
  std::vector<std::string> targets;
};

NodeDef* FindIn(std::vector<NodeDef>& nodes, const std::string& name) {
  for (NodeDef& n : nodes)
    if (n.name == name) return &n;
  ADD_FAILURE() << "no node " << name;
  static NodeDef dummy;
  return &dummy;
}

Graph TransformedGraph(Graph g) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(std::move(g));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? (*s)->executable_graph() : Graph{};
}

std::vector<Repro> Repros() {
  using namespace reference;  // NOLINT
  std::vector<Repro> out;
  SessionOptions o;
  o.deadline = kDeadline;
  {
    // Bug A: a lone Enter (nothing reads it), run as a target.
    GraphBuilder b;
    Output n = b.Placeholder("n", DType::kInt64);
    b.Op("Enter", {n}, {{"T", DType::kInt64}, {"frame_name", "loop"}}, "lonely_enter");
    absl::StatusOr<Graph> g = b.Build();
    EXPECT_TRUE(g.ok()) << g.status();
    out.push_back({"A: a lone Enter, targeted", g.ok() ? *g : Graph{}, o, {{"n", I64(1)}}, {}, {"lonely_enter"}});
  }
  {
    // Bug A: loopsum's loop gets a copy of its invariant Enter that nothing reads.
    Graph g = WhileInFunction();
    std::vector<NodeDef>& body = g.library.FindMutable("loopsum")->node;
    NodeDef copy = *FindIn(body, "Enter_4");
    copy.name = "unused_enter";
    body.push_back(copy);
    out.push_back({"A: an unused Enter in a function's loop", g, o, {{"n", I64(4)}}, {"result"}, {}});
  }
  {
    // Bug B: fib's main-graph Call given call site 1, that of fib's own
    // recursive calls (transformed graph).
    Graph g = TransformedGraph(Fib());
    FindIn(g.node, "Invoke_1/call_0")->attr["call_site"] = int64_t{1};
    out.push_back({"B: a main-graph Call with the recursive calls' call_site", g, o, {{"n", I64(6)}}, {"result"}, {}});
  }
  {
    // Bug C: fetching the gradient part's Call of a split call site.
    Graph g = Exp();
    absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, {"x"});
    EXPECT_TRUE(grads.ok()) << grads.status();
    out.push_back({"C: fetching a gradient Call of a transformed graph", TransformedGraph(g), o,
                   {{"x", F64(1.1)}, {"n", I64(4)}}, {"Invoke_1/call_2"}, {}});
  }
  {
    // Bug D: loopsum's argument Merge lists its Call input twice.
    Graph g = TransformedGraph(WhileInFunction());
    NodeDef* merge = FindIn(g.node, "loopsum/n");
    if (!merge->input.empty()) merge->input.insert(merge->input.begin(), merge->input[0]);
    out.push_back({"D: an argument Merge listing its Call input twice", g, o, {{"n", I64(4)}}, {"result"}, {}});
  }
  {
    // Bug E: dynamic mode, a Retval that reads a node inside the body's loop.
    Graph g = WhileInFunction();
    FindIn(g.library.FindMutable("loopsum")->node, "r_retval")->input[0] = "while_3/Add_7";
    SessionOptions dynamic = o;
    dynamic.mode = ExecutionMode::kDynamic;
    out.push_back({"E: dynamic mode, a Retval reading a node of the body's loop", g, dynamic, {{"n", I64(4)}},
                   {"result"}, {}});
  }
  {
    // Bug F: fetching a main-graph Enter: OK, with a frame left live.
    out.push_back({"F: fetching a main-graph Enter", WhileLoop(), o, {{"n", I64(5)}}, {"while_2/enter_0"}, {}});
  }
  {
    // Bug G: call_site INT64_MAX is truncated to int32 (-1) by Compile:
    // heap-buffer-overflow in FinishUnit during Session::Create.
    Graph g = TransformedGraph(Fib());
    FindIn(g.node, "fib/cond_3/else/Invoke_8/return_0")->attr["call_site"] = std::numeric_limits<int64_t>::max();
    out.push_back({"G: a Return with call_site INT64_MAX", g, o, {{"n", I64(6)}}, {"result"}, {}});
  }
  {
    // Bug G: call_site 2^31 - 1: return_edges_by_label.assign(max_label + 1)
    // overflows int32; std::length_error escapes Session::Create.
    Graph g = TransformedGraph(Fib());
    FindIn(g.node, "fib/cond_3/else/Invoke_8/return_0")->attr["call_site"] =
        int64_t{std::numeric_limits<int32_t>::max()};
    out.push_back({"G: a Return with call_site 2^31 - 1", g, o, {{"n", I64(6)}}, {"result"}, {}});
  }
  {
    // Bug I: a function body's node reads a main-graph node (transformed
    // graph): the value is delivered into the wrong frame.
    Graph g = TransformedGraph(WhileInFunction());
    FindIn(g.node, "loopsum/r_retval")->input[0] = "Invoke_1/call_0";
    out.push_back({"I: a function body reading a main-graph Call", g, o, {{"n", I64(4)}}, {"result"}, {}});
  }
  // Bug J: an empty graph: Layout memcpy's from a null pending_template
  // (UBSan: null pointer passed as argument 2).
  out.push_back({"J: an empty graph", Graph{}, o, {}, {}, {}});
  {
    // Bug K: the gradient argument Merge of exp_ext loses the main site's
    // Call: the Call feeds nothing, and a run that evaluates `result` alone
    // (the gradient part deferred dead) ended OK with 6 frames live.
    Graph g = Exp();
    absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, {"x"});
    EXPECT_TRUE(grads.ok()) << grads.status();
    Graph t = TransformedGraph(g);
    NodeDef* merge = FindIn(t.node, "exp_ext/d_r");
    std::vector<std::string>& in = merge->input;
    in.erase(std::remove(in.begin(), in.end(), "Invoke_1/call_2"), in.end());
    out.push_back({"K: a Call of an argument that feeds no argument Merge", t, o, {{"x", F64(1.1)}, {"n", I64(4)}},
                   {}, {"result"}});
  }
  return out;
}

// 0 when `r` ends as every mutant must; otherwise prints why.
int RunRepro(const Repro& r) {
  try {
    absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(r.graph, r.options);
    if (!s.ok()) {
      std::fprintf(stderr, "Create: %s\n", s.status().ToString().c_str());
      return s.status().message().empty() ? 1 : 0;
    }
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(r.feeds, r.fetches, r.targets, &stats);
    std::fprintf(stderr, "Run: %s, live frames after the run %lld\n",
                 out.ok() ? "OK" : out.status().ToString().c_str(),
                 static_cast<long long>(stats.live_frames_after_run));
    if (out.ok() ? stats.live_frames_after_run != 0 : out.status().message().empty()) return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Found by the mutants under TSan: a transformed graph whose Calls disagree
// on which argument feeds an argument Merge made the executor send that
// argument dead as well as live, two deliveries racing into one slot.
TEST(MutatedGraphsTest, CallsThatDisagreeOnAnArgumentIndexAreRejected) {
  const Graph fib = TransformedGraph(reference::Fib());
  // The main graph's Call supplies fib's argument 0, as fib's own calls do.
  Graph g = fib;
  FindIn(g.node, "Invoke_1/call_0")->attr["arg_index"] = int64_t{1000};
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(s.status().message());
  EXPECT_NE(message.find("Invoke_1/call_0"), std::string::npos) << message;
  EXPECT_NE(message.find("1000"), std::string::npos) << message;
  // Unchanged, it compiles and runs.
  absl::StatusOr<std::unique_ptr<Session>> ok = Session::Create(fib);
  ASSERT_TRUE(ok.ok()) << ok.status();
  absl::StatusOr<std::vector<Tensor>> out = (*ok)->Run({{"n", I64(10)}}, {"result"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), reference::NativeFib(10));
}

TEST(MutatedGraphsTest, MinimalRepros) {
  ThreadsafeDeathTests style;
  for (const Repro& r : Repros()) {
    SCOPED_TRACE(r.name);
    EXPECT_EXIT(std::_Exit(RunRepro(r)), ::testing::ExitedWithCode(0), "");
  }
}

}  // namespace
}  // namespace tdf
