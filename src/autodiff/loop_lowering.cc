#include "autodiff/loop_lowering.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/frames.h"
#include "tdf/status.h"

namespace tdf {
namespace autodiff {
namespace {

std::string Port(const std::string& node, int port) {
  return port == 0 ? node : absl::StrCat(node, ":", port);
}

absl::Status Unsupported(const NodeDef& node, absl::string_view why) {
  return NodeError(node, absl::StatusCode::kUnimplemented,
                   absl::StrCat("cannot differentiate this While loop: ", why));
}

// One outermost loop of the scope and what lowering it produces.
class LoopLowering {
 public:
  LoopLowering(const std::vector<NodeDef>& nodes, const FrameInfo& info, int block,
               const std::vector<int>& top_block, FunctionLibrary& library)
      : nodes_(nodes), info_(info), block_(block), top_block_(top_block), library_(library) {}

  absl::Status Run();

  // Parent-scope nodes replaced by the call (the loop's Enters and every node
  // of the loop, nested loops included) ...
  const std::vector<char>& removed() const { return removed_; }
  // ... and what takes their place, keyed by the index of the removed node it
  // stands in for (the first Enter: the call; each Exit: its Identity).
  const std::map<int, NodeDef>& replacements() const { return replacements_; }

 private:
  const std::vector<NodeDef>& nodes_;
  const FrameInfo& info_;
  const int block_;
  const std::vector<int>& top_block_;
  FunctionLibrary& library_;
  std::vector<char> removed_;
  std::map<int, NodeDef> replacements_;
};

absl::Status LoopLowering::Run() {
  const int n = static_cast<int>(nodes_.size());
  const std::string& frame = info_.blocks[block_].name;
  std::map<std::string, int> index;
  for (int i = 0; i < n; ++i) index[nodes_[i].name] = i;
  // Data consumers of every output: (consumer, input position) by "node:port".
  std::map<std::pair<int, int>, std::vector<int>> consumers;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < nodes_[i].num_data_inputs(); ++k) {
      TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(nodes_[i].input[k]));
      auto it = index.find(ref.node);
      if (it != index.end()) consumers[{it->second, ref.port}].push_back(i);
    }
  }
  auto users = [&](int node, int port) -> const std::vector<int>& {
    static const std::vector<int> kNone;
    auto it = consumers.find({node, port});
    return it == consumers.end() ? kNone : it->second;
  };

  removed_.assign(n, 0);
  std::vector<int> members, var_enters, invariant_enters;
  int loop_cond = -1;
  for (int i = 0; i < n; ++i) {
    const NodeDef& node = nodes_[i];
    if (top_block_[i] == block_) {
      members.push_back(i);
      removed_[i] = 1;
      if (node.op == "LoopCond" && info_.block_of_node[i] == block_) {
        if (loop_cond >= 0) return Unsupported(node, "a second LoopCond in one loop");
        loop_cond = i;
      }
    } else if (node.op == "Enter" && info_.block_of_node[i] == info_.blocks[block_].parent &&
               node.GetString("frame_name").value_or("") == frame) {
      removed_[i] = 1;
      (node.GetBoolOr("is_constant", false) ? invariant_enters : var_enters).push_back(i);
    }
  }
  if (loop_cond < 0) return absl::UnimplementedError(absl::StrCat("loop '", frame, "' has no LoopCond"));
  if (var_enters.empty()) return Unsupported(nodes_[loop_cond], "no loop variables");
  const std::string& pred = nodes_[loop_cond].name;

  // Per loop variable: Enter -> Merge (<- NextIteration) -> Switch -> Exit.
  struct Var {
    int enter, merge, next, sw, exit;
    DType type;
  };
  std::vector<Var> vars;
  for (int e : var_enters) {
    Var v{e, -1, -1, -1, -1, DType::kInvalid};
    TDF_ASSIGN_OR_RETURN(v.type, nodes_[e].GetType("T"));
    const std::vector<int>& into = users(e, 0);
    if (into.size() != 1 || nodes_[into[0]].op != "Merge" || nodes_[into[0]].num_data_inputs() != 2)
      return Unsupported(nodes_[e], "a loop variable's Enter must feed exactly one two-input Merge");
    v.merge = into[0];
    if (!users(v.merge, 1).empty()) return Unsupported(nodes_[v.merge], "the Merge's value_index output is used");
    for (int k = 0; k < 2; ++k) {
      TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(nodes_[v.merge].input[k]));
      const int src = index[ref.node];
      if (src != e && nodes_[src].op == "NextIteration") v.next = src;
    }
    if (v.next < 0) return Unsupported(nodes_[v.merge], "the loop variable's Merge has no NextIteration input");
    for (int c : users(v.merge, 0)) {
      if (nodes_[c].op == "Switch" && nodes_[c].num_data_inputs() == 2 && nodes_[c].input[1] == pred) v.sw = c;
    }
    if (v.sw < 0) return Unsupported(nodes_[v.merge], "the loop variable is not switched on the LoopCond");
    for (int c : users(v.sw, 0)) {
      if (nodes_[c].op != "Exit") return Unsupported(nodes_[c], "a loop Switch's false output feeds a non-Exit");
      if (v.exit >= 0) return Unsupported(nodes_[c], "a loop variable with two Exits");
      v.exit = c;
    }
    if (v.exit < 0) return Unsupported(nodes_[v.sw], "a loop variable without an Exit");
    vars.push_back(v);
  }
  for (int m : members) {
    if (info_.block_of_node[m] != block_) continue;
    if (nodes_[m].op == "Exit" && std::none_of(vars.begin(), vars.end(), [&](const Var& v) { return v.exit == m; }))
      return Unsupported(nodes_[m], "an Exit that is not a loop variable's");
    if (nodes_[m].op == "NextIteration" &&
        std::none_of(vars.begin(), vars.end(), [&](const Var& v) { return v.next == m; }))
      return Unsupported(nodes_[m], "a NextIteration that feeds no loop variable's Merge");
  }

  // The function: L(v..., inv...) -> v...
  std::string fname = absl::StrCat(frame, "_loop");
  while (library_.Find(fname) != nullptr) fname += "_";
  FunctionSignature sig;
  sig.name = fname;
  for (size_t k = 0; k < vars.size(); ++k) sig.inputs.push_back({absl::StrCat("v", k), vars[k].type});
  std::vector<DType> inv_types;
  for (size_t j = 0; j < invariant_enters.size(); ++j) {
    TDF_ASSIGN_OR_RETURN(DType t, nodes_[invariant_enters[j]].GetType("T"));
    inv_types.push_back(t);
    sig.inputs.push_back({absl::StrCat("inv", j), t});
  }
  for (size_t k = 0; k < vars.size(); ++k) sig.outputs.push_back({absl::StrCat("v", k), vars[k].type});

  // The new nodes' prefix: the builder's Cond naming ("<p>/merge_<k>" next to
  // "<p>/pivot_switch"), which is how the Merge gradient finds the predicate.
  std::string prefix = absl::StrCat(frame, "/tail");
  auto prefix_taken = [&] {
    for (const NodeDef& node : nodes_)
      if (absl::StartsWith(node.name, prefix + "/")) return true;
    return false;
  };
  while (prefix_taken()) prefix += "_";

  // The condition's side of the body: the ancestors of the LoopCond, which
  // run in every invocation. Everything else runs only while the loop goes
  // on, and reads the invariants through their gates (below), as a Cond's
  // branches read captured values through Switches: then each invariant's
  // gradient is live in every invocation, zero where the branch did not run.
  std::vector<char> cond_side(n, 0);
  {
    std::vector<int> work{loop_cond};
    cond_side[loop_cond] = 1;
    while (!work.empty()) {
      const NodeDef& node = nodes_[work.back()];
      work.pop_back();
      for (const std::string& in : node.input) {
        TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(in));
        auto it = index.find(ref.node);
        if (it != index.end() && top_block_[it->second] == block_ && !cond_side[it->second])
          cond_side[it->second] = 1, work.push_back(it->second);
      }
    }
  }
  std::map<std::string, std::string> gated;  // invariant Enter name -> its gate's true output
  for (size_t j = 0; j < invariant_enters.size(); ++j)
    gated[nodes_[invariant_enters[j]].name] = Port(absl::StrCat(prefix, "/invariant_switch_", j), 1);

  std::vector<NodeDef> body;
  std::vector<std::string> call_args(vars.size());
  std::vector<std::string> call_control;
  for (int m : members) {
    NodeDef node = nodes_[m];
    auto var = std::find_if(vars.begin(), vars.end(), [&](const Var& v) { return v.merge == m || v.next == m; });
    if (var != vars.end() && var->next == m) {
      // The next iteration's value becomes the recursive call's argument.
      call_args[var - vars.begin()] = node.input[0];
      for (size_t k = node.num_data_inputs(); k < node.input.size(); ++k) call_control.push_back(node.input[k].substr(1));
      continue;
    }
    if (var != vars.end()) {
      node.op = "Arg";
      node.input.clear();
      node.attr = {{"T", var->type}, {"index", static_cast<int64_t>(var - vars.begin())}};
    } else if (m == loop_cond) {
      node.op = "Identity";
      node.attr.clear();
    } else if (info_.block_of_node[m] == block_ && node.op == "Exit") {
      node.op = "Identity";  // the value when the loop ends here
      node.attr.clear();
    }
    if (!cond_side[m] && var == vars.end()) {
      for (std::string& in : node.input) {
        const bool control = !in.empty() && in[0] == '^';
        auto it = gated.find(control ? in.substr(1) : in);
        if (it != gated.end()) in = control ? "^" + it->second.substr(0, it->second.rfind(':')) : it->second;
      }
    }
    body.push_back(std::move(node));
  }
  for (size_t j = 0; j < invariant_enters.size(); ++j) {
    NodeDef arg;
    arg.name = nodes_[invariant_enters[j]].name;
    arg.op = "Arg";
    arg.attr = {{"T", inv_types[j]}, {"index", static_cast<int64_t>(vars.size() + j)}};
    body.push_back(std::move(arg));
  }
  NodeDef pivot;
  pivot.name = prefix + "/pivot_switch";
  pivot.op = "Switch";
  pivot.input = {pred, pred};
  pivot.attr = {{"T", DType::kBool}};
  body.push_back(std::move(pivot));
  // Invariants go to the next invocation only while the loop goes on, so the
  // last iteration's recursive call gets no live argument and never starts.
  for (size_t j = 0; j < invariant_enters.size(); ++j) {
    NodeDef gate;
    gate.name = absl::StrCat(prefix, "/invariant_switch_", j);
    gate.op = "Switch";
    gate.input = {nodes_[invariant_enters[j]].name, pred};
    gate.attr = {{"T", inv_types[j]}};
    call_args.push_back(Port(gate.name, 1));
    body.push_back(std::move(gate));
  }
  NodeDef call;
  call.name = prefix + "/call";
  call.op = "Invoke";
  call.input = call_args;
  for (const std::string& c : call_control) call.input.push_back("^" + c);
  call.attr = {{"function", fname}};
  body.push_back(call);
  for (size_t k = 0; k < vars.size(); ++k) {
    NodeDef merge;
    merge.name = absl::StrCat(prefix, "/merge_", k);
    merge.op = "Merge";
    merge.input = {nodes_[vars[k].exit].name, Port(call.name, static_cast<int>(k))};
    merge.attr = {{"T", vars[k].type}};
    NodeDef ret;
    ret.name = absl::StrCat(prefix, "/retval_", k);
    ret.op = "Retval";
    ret.input = {merge.name};
    ret.attr = {{"T", vars[k].type}, {"index", static_cast<int64_t>(k)}};
    body.push_back(std::move(merge));
    body.push_back(std::move(ret));
  }
  TDF_RETURN_IF_ERROR(library_.Declare(sig));
  TDF_RETURN_IF_ERROR(library_.Define(sig, std::move(body)));

  // In the scope: one call where the loop was, and the Exits' names on its
  // results.
  NodeDef outer;
  outer.name = absl::StrCat(frame, "/call");
  for (int suffix = 1; index.count(outer.name) != 0; ++suffix) outer.name = absl::StrCat(frame, "/call_", suffix);
  outer.op = "Invoke";
  outer.attr = {{"function", fname}};
  std::vector<std::string> outer_control;
  for (const std::vector<int>* enters : {&var_enters, &invariant_enters}) {
    for (int e : *enters) {
      const NodeDef& enter = nodes_[e];
      outer.input.push_back(enter.input[0]);
      for (size_t k = enter.num_data_inputs(); k < enter.input.size(); ++k) outer_control.push_back(enter.input[k]);
    }
  }
  for (const std::string& c : outer_control)
    if (std::find(outer.input.begin(), outer.input.end(), c) == outer.input.end()) outer.input.push_back(c);
  const std::string outer_name = outer.name;
  replacements_[std::min(var_enters.front(), invariant_enters.empty() ? n : invariant_enters.front())] =
      std::move(outer);
  for (size_t k = 0; k < vars.size(); ++k) {
    NodeDef exit;
    exit.name = nodes_[vars[k].exit].name;
    exit.op = "Identity";
    exit.input = {Port(outer_name, static_cast<int>(k))};
    replacements_[vars[k].exit] = std::move(exit);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LowerLoopsToRecursion(std::vector<NodeDef>& nodes, FunctionLibrary& library, bool function_body,
                                   const std::set<std::string>& wanted) {
  TDF_ASSIGN_OR_RETURN(FrameInfo info, InferFrames(nodes, function_body ? "<differentiated body>" : ""));
  const int n = static_cast<int>(nodes.size());
  // The outermost loop block (parent: the scope, block 0) of every node; 0
  // for the scope's own nodes.
  std::vector<int> top_block(n, 0);
  for (int i = 0; i < n; ++i) {
    int b = info.block_of_node[i];
    while (b > 0 && info.blocks[b].kind == BlockInfo::Kind::kLoop && info.blocks[b].parent != 0)
      b = info.blocks[b].parent;
    top_block[i] = (b > 0 && info.blocks[b].kind == BlockInfo::Kind::kLoop) ? b : 0;
  }
  std::set<int> loops;
  for (int i = 0; i < n; ++i) {
    if (!wanted.count(nodes[i].name)) continue;
    if (top_block[i] != 0) {
      loops.insert(top_block[i]);
    } else if (nodes[i].op == "Enter") {
      const std::string frame = nodes[i].GetString("frame_name").value_or("");
      for (size_t b = 1; b < info.blocks.size(); ++b)
        if (info.blocks[b].kind == BlockInfo::Kind::kLoop && info.blocks[b].parent == 0 && info.blocks[b].name == frame)
          loops.insert(static_cast<int>(b));
    }
  }
  if (loops.empty()) return absl::InternalError("LowerLoopsToRecursion: no loop holds the nodes to lower");
  std::vector<char> removed(n, 0);
  std::map<int, NodeDef> replacements;
  for (int block : loops) {
    LoopLowering lowering(nodes, info, block, top_block, library);
    TDF_RETURN_IF_ERROR(lowering.Run());
    for (int i = 0; i < n; ++i) removed[i] |= lowering.removed()[i];
    for (const auto& [at, node] : lowering.replacements()) replacements[at] = node;
  }
  std::vector<NodeDef> out;
  for (int i = 0; i < n; ++i) {
    if (auto it = replacements.find(i); it != replacements.end()) out.push_back(std::move(it->second));
    if (!removed[i]) out.push_back(std::move(nodes[i]));
  }
  nodes = std::move(out);
  return absl::OkStatus();
}

}  // namespace autodiff
}  // namespace tdf
