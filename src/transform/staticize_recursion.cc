// The Yaghi transformation (design.md §2; seeds/002 §3): a main graph plus a
// function library becomes one static graph in which every reachable body
// appears once, calls become per-argument Call_i / per-result Return_i nodes
// sharing the call-site label i, Args become Merges over all sites and
// Retvals become Identities feeding all sites' Returns.
//
// The pass works in three sweeps over the same scope order (main graph, then
// reachable functions alphabetically): find reachable functions, number the
// call sites, emit the rewritten nodes. Numbering before emitting lets an Arg's
// Merge list every site of its function, including sites in bodies emitted
// later.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "transform/staticize_recursion.h"

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/hash_tables.h"
#include "graph/node_index.h"
#include "tdf/graph.h"
#include "tdf/status.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

constexpr absl::string_view kInvoke = "Invoke";
constexpr absl::string_view kArg = "Arg";
constexpr absl::string_view kRetval = "Retval";

// The pieces of an output name or input, joined with one allocation; the
// pass builds a few strings per node. Sized once and filled by memcpy:
// reserve and an append per piece were a call into libstdc++ each, which
// cost more than zero-filling a name's few dozen bytes first.
std::string Concat(std::initializer_list<absl::string_view> parts) {
  size_t size = 0;
  for (absl::string_view p : parts) size += p.size();
  std::string out(size, '\0');
  char* at = &out[0];
  for (absl::string_view p : parts) {
    if (!p.empty()) std::memcpy(at, p.data(), p.size());
    at += p.size();
  }
  return out;
}

// A number as Concat takes it (`Num(i).Piece()`).
using Num = absl::AlphaNum;

// A function's Arg and Retval nodes by index.
struct FunctionInfo {
  const FunctionDef* def = nullptr;
  int32_t scope = -1;  // its Scope in Staticizer::scopes_
  std::vector<const NodeDef*> args;     // null where the body has no Arg j
  std::vector<const NodeDef*> retvals;  // never null once analyzed
};

// A call site's argument or result indices.
using Indices = absl::InlinedVector<int, 4>;

struct Site {
  std::string name;  // the Invoke's name in the output ("f/S" in a body)
  const FunctionDef* callee = nullptr;
  int64_t index = 0;
  // The arguments this Invoke supplies and the results it receives: all of
  // them, unless the Invoke is one part of a split site (see SplitIndices).
  // Inline for a few: two vectors per call site were two allocations each.
  Indices args;
  Indices results;
};

// Split call sites (used by autodiff to pair a call of f_ext with its
// gradient call, design.md §5): an Invoke may carry
//   partial_args    list(int)  the callee arguments its data inputs supply
//   partial_results list(int)  the callee results its outputs are
//   site_group      string     Invokes of one callee in one scope with the
//                              same group share ONE call site (one label).
// Each part gets its own Call/Return nodes (and Call -> Return control edges
// only among its own nodes), so the parts may fire at different times and the
// invocation's frame lives until the site's last Call has arrived. Without
// these attrs an Invoke supplies every argument and receives every result.
absl::StatusOr<Indices> SplitIndices(const NodeDef& invoke, absl::string_view attr, int n) {
  Indices out;
  if (invoke.FindAttr(attr) == nullptr) {
    out.resize(n);
    for (int i = 0; i < n; ++i) out[i] = i;
    return out;
  }
  TDF_ASSIGN_OR_RETURN(std::vector<int64_t> list, invoke.GetIntList(attr));
  std::vector<bool> seen(n, false);
  for (int64_t i : list) {
    if (i < 0 || i >= n || seen[i])
      return NodeError(invoke, absl::StatusCode::kInvalidArgument,
                       absl::StrCat(attr, ": index ", i, " is out of range or repeated (the callee has ", n, ")"));
    seen[i] = true;
    out.push_back(static_cast<int>(i));
  }
  return out;
}

// The nodes of one graph being copied: the main graph or a function body.
struct Scope {
  const FunctionDef* function = nullptr;  // null: the main graph
  const std::vector<NodeDef>* nodes = nullptr;
  std::string prefix;  // "" or "f/"
  // Views into *nodes; only for bodies of more than kScanMax nodes: the
  // few nodes of most bodies are found by comparing names (FindNode).
  static constexpr size_t kScanMax = 16;
  base::FlatHashMap<absl::string_view, const NodeDef*> by_name;

  const NodeDef* FindNode(absl::string_view name) const {
    if (nodes->size() <= kScanMax) {
      for (const NodeDef& n : *nodes)
        if (absl::string_view(n.name) == name) return &n;
      return nullptr;
    }
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  }
  base::FlatHashMap<absl::string_view, Site> sites;  // by the Invoke's original name (views *nodes)
  size_t emitted_by_sites = 0;  // the nodes their Invokes become
  // Per node of *nodes: the output position of the node it becomes (an
  // Invoke: of its first Call; its Returns follow its Calls).
  std::vector<int32_t> out_pos;

  std::string Where() const {
    return function == nullptr ? "the main graph" : absl::StrCat("function '", function->signature.name, "'");
  }
};

// The library's functions by name, hashed: the library's std::map
// compared names about log2(N) times per lookup, and every Invoke is
// resolved in two sweeps (10^4 functions: a few percent of Session::Create).
class FunctionTable {
 public:
  explicit FunctionTable(const FunctionLibrary& library) : by_name_(base::BucketsFor(library.functions().size())) {
    for (const auto& [name, f] : library.functions()) by_name_.emplace(name, &f);
  }
  const FunctionDef* Find(absl::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

 private:
  base::FlatHashMap<absl::string_view, const FunctionDef*> by_name_;  // views the library's keys
};

// Resolves the callee of an Invoke, with the checks every sweep relies on.
absl::StatusOr<const FunctionDef*> Callee(const NodeDef& invoke, const FunctionTable& library) {
  // Read in place; GetString copies the name (and gives the error).
  const AttrValue* attr = invoke.FindAttr("function");
  const std::string* name = attr != nullptr ? attr->get_if<std::string>() : nullptr;
  if (name == nullptr) return invoke.GetString("function").status();
  const std::string& fname = *name;
  const FunctionDef* f = library.Find(fname);
  if (f == nullptr)
    return NodeError(invoke, absl::StatusCode::kNotFound, absl::StrCat("calls undefined function '", fname, "'"));
  if (!f->defined)
    return NodeError(invoke, absl::StatusCode::kFailedPrecondition,
                     absl::StrCat("calls function '", fname, "', which is declared but not defined"));
  const int x = invoke.num_data_inputs();
  const AttrValue* partial = invoke.FindAttr("partial_args");
  const std::vector<int64_t>* partial_list = partial ? partial->get_if<std::vector<int64_t>>() : nullptr;
  if (partial_list != nullptr ? x != static_cast<int>(partial_list->size())
                              : x != static_cast<int>(f->signature.inputs.size()))
    return NodeError(invoke, absl::StatusCode::kInvalidArgument,
                     absl::StrCat("calls '", fname, "' with ", x, " arguments; it takes ",
                                  f->signature.inputs.size()));
  if (f->signature.outputs.empty())
    // A Return needs a result to carry; a result-less call would need a
    // separate completion signal, which the executor does not have.
    return NodeError(invoke, absl::StatusCode::kUnimplemented,
                     absl::StrCat("calls '", fname, "': functions without results are not supported"));
  return f;
}

absl::StatusOr<FunctionInfo> Analyze(const FunctionDef& f) {
  const FunctionSignature& sig = f.signature;
  FunctionInfo info;
  info.def = &f;
  info.args.assign(sig.inputs.size(), nullptr);
  info.retvals.assign(sig.outputs.size(), nullptr);
  for (const NodeDef& node : f.node) {
    const bool is_arg = node.op == kArg;
    if (!is_arg && node.op != kRetval) continue;
    std::vector<const NodeDef*>& slots = is_arg ? info.args : info.retvals;
    const std::vector<ArgDef>& defs = is_arg ? sig.inputs : sig.outputs;
    TDF_ASSIGN_OR_RETURN(int64_t index, node.GetInt("index"));
    auto in_function = [&](absl::Status s) {
      return absl::Status(s.code(), absl::StrCat("in function '", sig.name, "': ", s.message()));
    };
    if (index < 0 || index >= static_cast<int64_t>(slots.size()))
      return in_function(NodeError(node, absl::StatusCode::kInvalidArgument,
                                   absl::StrCat("index ", index, " is out of range: the function has ",
                                                slots.size(), is_arg ? " arguments" : " results")));
    if (slots[index] != nullptr)
      return in_function(NodeError(node, absl::StatusCode::kInvalidArgument,
                                   absl::StrCat("index ", index, " is also taken by node '", slots[index]->name,
                                                "'")));
    if (const AttrValue* t = node.FindAttr("T"); t != nullptr && t->get_if<DType>() != nullptr &&
                                                 *t->get_if<DType>() != defs[index].type)
      return in_function(NodeError(node, absl::StatusCode::kInvalidArgument,
                                   absl::StrCat("T is ", DTypeName(*t->get_if<DType>()), "; the signature says ",
                                                DTypeName(defs[index].type))));
    slots[index] = &node;
  }
  for (size_t r = 0; r < info.retvals.size(); ++r) {
    if (info.retvals[r] == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat("function '", sig.name, "' has no Retval node for result ", r));
  }
  return info;
}

// Every function reachable from the main graph's Invoke nodes, in the
// alphabetical order of their names that the site numbering uses.
absl::StatusOr<std::vector<const FunctionDef*>> Reachable(const Graph& graph, const FunctionTable& library) {
  // Marked by pointer: a std::set of names compared names on every Invoke.
  base::FlatHashSet<const FunctionDef*> seen;
  std::vector<const FunctionDef*> work;
  auto visit = [&](const std::vector<NodeDef>& nodes) -> absl::Status {
    for (const NodeDef& node : nodes) {
      if (node.op != kInvoke) continue;
      TDF_ASSIGN_OR_RETURN(const FunctionDef* f, Callee(node, library));
      if (seen.insert(f).second) work.push_back(f);
    }
    return absl::OkStatus();
  };
  TDF_RETURN_IF_ERROR(visit(graph.node));
  while (!work.empty()) {
    const FunctionDef* f = work.back();
    work.pop_back();
    absl::Status s = visit(f->node);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("in function '", f->signature.name, "': ", s.message()));
  }
  // In the library's order, which is by name: sorting the reached ones
  // compared names ~17 times each (10^5 functions: 3% of Create's
  // instructions). A library stored under names other than its
  // signatures' (Validate rejects it; the pass does not) is sorted.
  std::vector<const FunctionDef*> reached;
  reached.reserve(seen.size());
  for (const auto& [name, f] : graph.library.functions())
    if (seen.contains(&f)) reached.push_back(&f);
  auto by_name = [](const FunctionDef* a, const FunctionDef* b) { return a->signature.name < b->signature.name; };
  if (!std::is_sorted(reached.begin(), reached.end(), by_name)) std::sort(reached.begin(), reached.end(), by_name);
  return reached;
}

class Staticizer {
 public:
  explicit Staticizer(const Graph& graph) : graph_(graph), library_(graph.library) {}

  absl::StatusOr<StaticizedGraph> Run() {
    TDF_ASSIGN_OR_RETURN(std::vector<const FunctionDef*> reachable, Reachable(graph_, library_));
    scopes_.reserve(reachable.size() + 1);
    scopes_.push_back(MakeScope(nullptr, graph_.node));
    for (const FunctionDef* f : reachable) {
      TDF_ASSIGN_OR_RETURN(FunctionInfo info, Analyze(*f));
      info.scope = static_cast<int32_t>(scopes_.size());
      functions_.emplace(f->signature.name, std::move(info));
      scopes_.push_back(MakeScope(f, f->node));
    }
    for (Scope& scope : scopes_) TDF_RETURN_IF_ERROR(WithScope(scope, NumberSites(scope)));
    // Exactly: a reserve that fell short (an Invoke becomes several nodes)
    // moved every node to a buffer of twice the size at the end, when the
    // output is largest (chain(10^5): hundreds of MB more peak memory).
    size_t emitted = 0;
    for (const Scope& scope : scopes_) emitted += scope.nodes->size() - scope.sites.size() + scope.emitted_by_sites;
    out_.node.reserve(emitted);
    offsets_.reserve(emitted + 1);
    offsets_.push_back(0);
    for (const Scope& scope : scopes_) TDF_RETURN_IF_ERROR(WithScope(scope, Emit(scope)));
    // Grown by doubling, and kept by the compiler to its end: its slack
    // was most of a Create's extra memory (plaincalls(10^5): 30 MB).
    inputs_.shrink_to_fit();
    TDF_ASSIGN_OR_RETURN(auto by_name, CheckUniqueNames());
    StaticizedGraph result;
    result.main_invoke_returns = std::move(main_invoke_returns_);
    result.graph = std::move(out_);
    // The vector's buffer moved with it: the names the index views stay put.
    result.index = NodeIndex::FromParts(result.graph.node, std::move(by_name), std::move(offsets_), std::move(inputs_));
    return result;
  }

 private:
  static Scope MakeScope(const FunctionDef* f, const std::vector<NodeDef>& nodes) {
    Scope s;
    s.function = f;
    s.nodes = &nodes;
    if (f != nullptr) s.prefix = absl::StrCat(f->signature.name, "/");
    if (nodes.size() > Scope::kScanMax) {
      s.by_name.reserve(nodes.size());
      for (const NodeDef& n : nodes) s.by_name.emplace(n.name, &n);
    }
    return s;
  }

  // Errors from a body say which function they are in.
  static absl::Status WithScope(const Scope& scope, absl::Status s) {
    if (s.ok() || scope.function == nullptr) return s;
    return absl::Status(s.code(), absl::StrCat("in function '", scope.function->signature.name, "': ", s.message()));
  }

  // Numbers the sites of `scope` and places its nodes in the output; called
  // on the scopes in Emit's order.
  absl::Status NumberSites(Scope& scope) {
    scope.out_pos.resize(scope.nodes->size());
    for (size_t k = 0; k < scope.nodes->size(); ++k) {
      const NodeDef& node = (*scope.nodes)[k];
      scope.out_pos[k] = next_pos_;
      if (node.op != kInvoke) {
        ++next_pos_;
        continue;
      }
      TDF_ASSIGN_OR_RETURN(const FunctionDef* f, Callee(node, library_));
      Site site;
      site.name = Concat({scope.prefix, node.name});  // one allocation; operator+ made two
      site.callee = f;
      TDF_ASSIGN_OR_RETURN(site.args,
                           SplitIndices(node, "partial_args", static_cast<int>(f->signature.inputs.size())));
      TDF_ASSIGN_OR_RETURN(site.results,
                           SplitIndices(node, "partial_results", static_cast<int>(f->signature.outputs.size())));
      std::vector<SiteRecord>& sites = sites_of_[absl::string_view(f->signature.name)];
      // Read in place: GetString(...).value_or builds an error status for
      // every Invoke without a group.
      const AttrValue* group_attr = node.FindAttr("site_group");
      const std::string* group_name = group_attr != nullptr ? group_attr->get_if<std::string>() : nullptr;
      const std::string group = group_name != nullptr ? *group_name : std::string();
      auto grouped = group.empty() ? groups_.end() : groups_.find({scope.prefix, f->signature.name, group});
      if (grouped != groups_.end()) {
        // Another part of an existing site: same label, same node-name stem.
        site.index = grouped->second.first;
        site.name = grouped->second.second;
      } else {
        site.index = static_cast<int64_t>(sites.size());
        SiteRecord record;
        record.name = site.name;
        record.supplied.assign(f->signature.inputs.size(), 0);
        record.call_pos.assign(f->signature.inputs.size(), -1);
        sites.push_back(std::move(record));
        if (!group.empty()) groups_[{scope.prefix, f->signature.name, group}] = {site.index, site.name};
      }
      auto& supplied = sites[site.index].supplied;
      for (size_t a = 0; a < site.args.size(); ++a) {
        const int j = site.args[a];
        if (supplied[j] != 0)
          return NodeError(node, absl::StatusCode::kInvalidArgument,
                           absl::StrCat("argument ", j, " of site group '", group, "' is supplied twice"));
        supplied[j] = 1;
        sites[site.index].call_pos[j] = next_pos_ + static_cast<int32_t>(a);  // EmitInvoke's order
      }
      // EmitInvoke's Calls (one per argument, or one) and Returns.
      const size_t emitted = std::max<size_t>(site.args.size(), 1) + site.results.size();
      scope.emitted_by_sites += emitted;
      next_pos_ += static_cast<int32_t>(emitted);
      scope.sites.emplace(absl::string_view(node.name), std::move(site));
    }
    return absl::OkStatus();
  }

  // Appends the output form of `input` (an input of `consumer` in `scope`)
  // to `out`, and its producer's output position to `resolved`.
  absl::Status RewriteInput(const Scope& scope, const NodeDef& consumer, const std::string& input,
                            std::vector<std::string>& out, std::vector<ResolvedInput>& resolved) const {
    TDF_ASSIGN_OR_RETURN(InputView ref, ParseInputView(input));
    const NodeDef* producer = scope.FindNode(ref.node);
    if (producer == nullptr)
      return NodeError(consumer, absl::StatusCode::kInvalidArgument,
                       absl::StrCat("input '", input, "' names no node of ", scope.Where()));
    const int32_t pos = scope.out_pos[producer - scope.nodes->data()];
    if (producer->op != kInvoke) {
      if (ref.is_control) {
        out.push_back(Concat({"^", scope.prefix, ref.node}));
      } else if (ref.port == 0) {
        out.push_back(Concat({scope.prefix, ref.node}));
      } else {
        out.push_back(Concat({scope.prefix, ref.node, ":", Num(ref.port).Piece()}));
      }
      resolved.push_back({pos, ref.port, ref.is_control});
      return absl::OkStatus();
    }
    const Site& site = scope.sites.at(ref.node);
    const int y = static_cast<int>(site.results.size());
    // The site's Returns follow its Calls (EmitInvoke).
    const int32_t returns = pos + static_cast<int32_t>(std::max<size_t>(site.args.size(), 1));
    if (ref.is_control) {
      // "After S" means after every result of S.
      for (int k = 0; k < y; ++k) {
        out.push_back(Concat({"^", site.name, "/return_", Num(site.results[k]).Piece()}));
        resolved.push_back({returns + k, 0, true});
      }
      return absl::OkStatus();
    }
    if (ref.port >= y)
      return NodeError(consumer, absl::StatusCode::kInvalidArgument,
                       absl::StrCat("input '", input, "': '", site.callee->signature.name, "' has only ", y,
                                    " results"));
    out.push_back(Concat({site.name, "/return_", Num(site.results[ref.port]).Piece()}));
    resolved.push_back({returns + ref.port, 0, false});
    return absl::OkStatus();
  }

  absl::Status EmitInvoke(const Scope& scope, const NodeDef& invoke, int32_t pos) {
    const Site& site = scope.sites.at(invoke.name);
    const FunctionSignature& sig = site.callee->signature;
    const std::string& fname = sig.name;
    const int x = static_cast<int>(site.args.size());
    std::vector<std::string> data, control;
    std::vector<ResolvedInput> data_at, control_at;
    for (int k = 0; k < static_cast<int>(invoke.input.size()); ++k)
      TDF_RETURN_IF_ERROR(
          RewriteInput(scope, invoke, invoke.input[k], k < x ? data : control, k < x ? data_at : control_at));

    std::vector<std::string> calls;
    auto add_call = [&](std::string name, DType t, int64_t arg_index, std::vector<std::string> inputs,
                        const ResolvedInput* first) {
      NodeDef& call = out_.node.emplace_back();  // built in place: no move and destruction per node
      call.name = std::move(name);
      call.op = "Call";
      call.input = std::move(inputs);
      // In key order, each entry built in place (an initializer list
      // builds each one and then copies it into the map).
      call.attr.emplace_hint(call.attr.end(), "T", t);
      call.attr.emplace_hint(call.attr.end(), "arg_index", arg_index);
      call.attr.emplace_hint(call.attr.end(), "call_site", site.index);
      call.attr.emplace_hint(call.attr.end(), "function", fname);
      call.device = invoke.device;
      calls.push_back(call.name);
      if (first != nullptr) inputs_.push_back(*first);
      inputs_.insert(inputs_.end(), control_at.begin(), control_at.end());
      Finish(scope);
    };
    if (x == 0) {
      // The invocation still needs a Call to create its frame.
      add_call(Concat({site.name, "/call"}), DType::kBool, -1, control, nullptr);
    }
    for (int k = 0; k < x; ++k) {
      const int j = site.args[k];
      std::vector<std::string> inputs = {data[k]};
      inputs.insert(inputs.end(), control.begin(), control.end());
      add_call(Concat({site.name, "/call_", Num(j).Piece()}), sig.inputs[j].type, j, std::move(inputs), &data_at[k]);
    }
    const FunctionInfo& info = functions_.at(fname);
    const Scope& callee = scopes_[info.scope];
    std::vector<int32_t>* main_returns = nullptr;
    if (scope.function == nullptr) {
      main_returns = &main_invoke_returns_.emplace_back(invoke.name, std::vector<int32_t>()).second;
      main_returns->reserve(site.results.size());
    }
    for (int r : site.results) {
      if (main_returns != nullptr) main_returns->push_back(static_cast<int32_t>(out_.node.size()));
      NodeDef& ret = out_.node.emplace_back();
      ret.name = Concat({site.name, "/return_", Num(r).Piece()});
      ret.op = "Return";
      ret.input.push_back(Concat({fname, "/", info.retvals[r]->name}));
      inputs_.push_back({callee.out_pos[info.retvals[r] - callee.nodes->data()], 0, false});
      // Call_i -> Return_i: a dead argument skips the body and comes back
      // dead through the Return (design.md §2.5).
      for (const std::string& c : calls) ret.input.push_back(Concat({"^", c}));
      for (size_t c = 0; c < calls.size(); ++c) inputs_.push_back({pos + static_cast<int32_t>(c), 0, true});
      ret.attr.emplace_hint(ret.attr.end(), "T", sig.outputs[r].type);
      ret.attr.emplace_hint(ret.attr.end(), "call_site", site.index);
      ret.attr.emplace_hint(ret.attr.end(), "function", fname);
      ret.attr.emplace_hint(ret.attr.end(), "result_index", static_cast<int64_t>(r));
      ret.device = invoke.device;
      Finish(scope);
    }
    return absl::OkStatus();
  }

  absl::Status Emit(const Scope& scope) {
    const absl::string_view fname = scope.function ? absl::string_view(scope.function->signature.name) : "";
    for (size_t k = 0; k < scope.nodes->size(); ++k) {
      const NodeDef& node = (*scope.nodes)[k];
      if (node.op == kInvoke) {
        TDF_RETURN_IF_ERROR(EmitInvoke(scope, node, scope.out_pos[k]));
        continue;
      }
      NodeDef& copy = out_.node.emplace_back();
      copy.name = Concat({scope.prefix, node.name});
      copy.device = node.device;
      if (scope.function != nullptr && node.op == kArg) {
        // Argument j of every invocation arrives through S/call_j of its site.
        const int64_t j = *node.GetInt("index");  // checked by Analyze
        copy.op = "Merge";
        copy.attr = {{"T", scope.function->signature.inputs[j].type}};
        for (const SiteRecord& site : sites_of_.at(fname)) {
          if (site.supplied[j] == 0) continue;
          copy.input.push_back(Concat({site.name, "/call_", Num(j).Piece()}));
          inputs_.push_back({site.call_pos[j], 0, false});
        }
        if (copy.input.empty())
          return NodeError(node, absl::StatusCode::kUnimplemented,
                           absl::StrCat("no call site supplies argument ", j, " (every site is a partial Invoke)"));
        Finish(scope);
        continue;
      }
      copy.input.reserve(node.input.size());  // at least; grown from empty it reallocated per node
      for (const std::string& in : node.input)
        TDF_RETURN_IF_ERROR(RewriteInput(scope, node, in, copy.input, inputs_));
      if (scope.function != nullptr && node.op == kRetval) {
        copy.op = "Identity";
      } else {
        copy.op = node.op;
        copy.attr = node.attr;
        if (scope.function != nullptr && absl::string_view(node.op) == "Enter") {
          // One body holds the loops of every invocation; the prefix keeps
          // frame names unique across functions.
          TDF_ASSIGN_OR_RETURN(std::string frame, node.GetString("frame_name"));
          copy.attr["frame_name"] = scope.prefix + frame;
        }
      }
      Finish(scope);
    }
    return absl::OkStatus();
  }

  // Completes the last node of the output (built there in place), whose
  // resolved inputs are the last of inputs_. An error on the way leaves it
  // half built: the output is then dropped.
  void Finish(const Scope& scope) {
    NodeDef& node = out_.node.back();
    // Nothing feeds a sourceless body node; the executor fires it when an
    // invocation of its function starts.
    if (scope.function != nullptr && node.input.empty())
      node.attr[std::string(kFunctionAttr)] = scope.function->signature.name;
    offsets_.push_back(static_cast<uint32_t>(inputs_.size()));
  }

  // The output's nodes by name (the index's table, NodeIndex::FromParts).
  absl::StatusOr<base::FlatHashMap<absl::string_view, int32_t>> CheckUniqueNames() const {
    base::FlatHashMap<absl::string_view, int32_t> by_name(base::BucketsFor(out_.node.size()));
    for (size_t i = 0; i < out_.node.size(); ++i) {
      const NodeDef& node = out_.node[i];
      if (!by_name.emplace(node.name, static_cast<int32_t>(i)).second)
        return NodeError(node, absl::StatusCode::kInvalidArgument,
                         "the transformed graph has two nodes of this name; rename the original node that "
                         "clashes with a function's \"<function>/<node>\" or a call's \"<call>/call_<j>\" name");
    }
    return by_name;
  }

  const Graph& graph_;
  FunctionTable library_;
  std::vector<Scope> scopes_;
  base::FlatHashMap<std::string, FunctionInfo> functions_;
  // Per function, its call sites in site order: each one's output name and
  // the arguments its Invokes supply (by argument index; all of them unless
  // it is split). A vector per site, not a set per site name: those were a
  // fifth of the pass's allocations.
  struct SiteRecord {
    std::string name;
    // Inline for a few arguments: vectors were two allocations per site.
    absl::InlinedVector<uint8_t, 8> supplied;
    absl::InlinedVector<int32_t, 4> call_pos;  // per argument: the output position of the Call that supplies it
  };
  base::FlatHashMap<absl::string_view, std::vector<SiteRecord>> sites_of_;  // views the callees' names
  // Split sites: (scope prefix, callee, site_group) -> (index, site name).
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int64_t, std::string>> groups_;
  Graph out_;
  // The output's index as it is emitted (NodeIndex's parts): each node's
  // inputs by producer position, and where each node's start.
  std::vector<uint32_t> offsets_;
  std::vector<ResolvedInput> inputs_;
  std::vector<std::pair<std::string, std::vector<int32_t>>> main_invoke_returns_;  // StaticizedGraph's
  int32_t next_pos_ = 0;  // NumberSites: the next output position
};

}  // namespace

absl::StatusOr<Graph> StaticizeRecursion(const Graph& graph) {
  TDF_ASSIGN_OR_RETURN(StaticizedGraph out, Staticizer(graph).Run());
  return std::move(out.graph);
}

absl::StatusOr<StaticizedGraph> StaticizeRecursionIndexed(const Graph& graph) { return Staticizer(graph).Run(); }

absl::Status PruneUnreachableFunctions(Graph& graph) {
  // Unlike StaticizeRecursion this keeps calls of missing or declared-only
  // functions: pruning is not the place to reject a graph.
  std::set<std::string> reached;
  std::vector<const FunctionDef*> work;
  auto visit = [&](const std::vector<NodeDef>& nodes) {
    for (const NodeDef& node : nodes) {
      if (node.op != kInvoke) continue;
      absl::StatusOr<std::string> fname = node.GetString("function");
      if (!fname.ok() || !reached.insert(*fname).second) continue;
      if (const FunctionDef* f = graph.library.Find(*fname)) work.push_back(f);
    }
  };
  visit(graph.node);
  while (!work.empty()) {
    const FunctionDef* f = work.back();
    work.pop_back();
    visit(f->node);
  }
  FunctionLibrary kept;
  for (const auto& [name, f] : graph.library.functions())
    if (reached.count(name) != 0) kept.Put(f);
  graph.library = std::move(kept);
  return absl::OkStatus();
}

}  // namespace tdf
