// The mutator of tdf's seeded graph mutation test (mutated_graphs.h says
// what the test promises and checks): Mutator applies one to three
// structural mutations to a Graph -- inputs rewired, dropped, duplicated,
// ops and attrs changed, nodes deleted, renamed or duplicated, constants
// set to 0 or to a huge or negative recursion depth, signatures changed --
// and describes each. In its own header so that the harness
// (mutated_graphs.h) stays under the size limit.
#ifndef TDF_TESTS_RUNTIME_MUTATED_GRAPHS_MUTATOR_H_
#define TDF_TESTS_RUNTIME_MUTATED_GRAPHS_MUTATOR_H_

#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tdf/graph.h"
#include "tdf/op_registry.h"
#include "tdf/tensor.h"

namespace tdf {
namespace mutated_graphs {

// Scalar tensors: the mutator's constants, and the programs' feeds.
inline Tensor I64(int64_t v) { return Tensor::Scalar<int64_t>(v); }
inline Tensor F64(double v) { return Tensor::Scalar<double>(v); }

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

}  // namespace mutated_graphs
}  // namespace tdf

#endif  // TDF_TESTS_RUNTIME_MUTATED_GRAPHS_MUTATOR_H_
