// Compiler step 1: units, blocks and edges.
// Requires: a validated graph (static mode: after StaticizeRecursion).
// Ensures: every node in one code block (main, a loop body, a function
// body) with a dense index and input slots; every input an OutEdge of its
// producer with its kind (local, Enter, Exit, NextIteration, Call, Return)
// and destination mode; child slots for each loop and call site of a block.
// Link, in this file, runs every step in order (docs/architecture.md).
// Always on. Pinned by tests/runtime/control_flow_test.cc and session_create_test.cc.
#include "base/hash_tables.h"
#include "runtime/compiler/compiler.h"

#include <string.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

// Adds the nodes of one unit (the main graph, or one function body in
// dynamic mode) with its blocks.
absl::Status Compiler::AddUnit(const std::vector<NodeDef>& nodes, const std::string& body_name, NodeIndex* index) {
  Unit unit;
  if (index != nullptr) {
    unit.index = std::move(*index);
  } else {
    TDF_ASSIGN_OR_RETURN(unit.index, NodeIndex::Build(nodes));
  }
  TDF_ASSIGN_OR_RETURN(FrameInfo fi, InferFrames(nodes, unit.index, body_name));
  std::vector<int32_t> block_map(fi.blocks.size());
  for (size_t b = 0; b < fi.blocks.size(); ++b) {
    const BlockInfo& info = fi.blocks[b];
    // Function blocks are global: one per function name.
    if (info.kind == BlockInfo::Kind::kFunction) {
      auto it = function_blocks_.find(info.name);
      if (it != function_blocks_.end()) {
        block_map[b] = it->second;
        continue;
      }
    }
    ExecBlock blk;
    blk.id = static_cast<int32_t>(exe_->blocks.size());
    blk.kind = BlockKind(info.kind);
    blk.name = info.name;
    blk.parallel_iterations = options_.default_parallel_iterations;
    if (!body_name.empty() && b == 0) blk.kind = ExecBlock::Kind::kFunction;
    block_map[b] = blk.id;
    if (blk.kind == ExecBlock::Kind::kFunction) function_blocks_[blk.name] = blk.id;
    exe_->blocks.push_back(std::move(blk));
  }
  for (size_t b = 0; b < fi.blocks.size(); ++b) {
    if (fi.blocks[b].parent >= 0) exe_->blocks[block_map[b]].parent = block_map[fi.blocks[b].parent];
  }
  {
    // Each block's node list sized once (a static graph has a block per
    // function: grown node by node, each reallocated several times).
    std::vector<int32_t> block_size(fi.blocks.size(), 0);
    for (int b : fi.block_of_node) ++block_size[b];
    for (size_t b = 0; b < fi.blocks.size(); ++b) {
      std::vector<int32_t>& list = exe_->blocks[block_map[b]].nodes;
      list.reserve(list.size() + block_size[b]);
    }
  }
  // Geometric growth: dynamic mode adds one unit per function, and
  // reserving exactly what each needs reallocated both vectors per unit,
  // quadratic in time and in the memory the freed copies left behind
  // (10^4 functions: gigabytes).
  GrowFor(nodes_, nodes.size());
  GrowFor(exe_->info, nodes.size());
  if (!call_attrs_of_.empty()) GrowFor(call_attrs_of_, nodes.size());
  unit.ids.reserve(nodes.size());
  std::vector<DType> unknown;  // the input types of each node: not known here
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeDef& def = nodes[i];
    const OpEntry* op = FindOp(def);
    if (op == nullptr) return NodeError(def, absl::StatusCode::kInvalidArgument, "unknown op");
    const OpSchema* schema = op->schema;
    NodeBuild n;
    n.id = static_cast<int32_t>(nodes_.size());
    exe_->info.emplace_back().def = &def;
    n.kind = op->kind;
    NoteCallAttrs(n, def);
    // Compile's device scan reads only such nodes' NodeDefs.
    may_name_devices_ |= !def.device.empty() || absl::string_view(def.op) == "CopyToDevice";
    n.block = block_map[fi.block_of_node[i]];
    ExecBlock& blk = exe_->blocks[n.block];
    n.index = static_cast<int32_t>(blk.nodes.size());
    blk.nodes.push_back(n.id);
    n.num_inputs = static_cast<int32_t>(def.input.size());
    n.num_data_inputs = def.num_data_inputs();
    n.slot_base = blk.num_slots;
    blk.num_slots += n.num_inputs;
    unknown.assign(n.num_data_inputs, DType::kInvalid);
    InferenceContext ictx{def, unknown, &exe_->graph.library};
    TDF_ASSIGN_OR_RETURN(std::vector<DType> out_types, schema->InferTypes(ictx));
    n.num_outputs = static_cast<int32_t>(out_types.size());
    n.op_id = op->op_id;
    unit.ids.push_back(n.id);
    nodes_.push_back(std::move(n));
  }
  units_.push_back(std::move(unit));
  return absl::OkStatus();
}

const Compiler::OpEntry* Compiler::FindOp(const NodeDef& def) {
  const absl::string_view name = def.op;
  for (int k = 0; k < num_recent_ops_; ++k) {
    const RecentOp& r = recent_ops_[k];
    if (r.name.size() == name.size() && memcmp(r.name.data(), name.data(), name.size()) == 0) return &r.entry;
  }
  auto it = ops_.find(name);
  if (it == ops_.end()) {
    const OpSchema* schema = op_schemas_.Find(name);
    if (schema == nullptr) return nullptr;
    OpEntry entry;
    entry.schema = schema;
    entry.op_id = static_cast<int32_t>(exe_->op_names.size());
    entry.kind = KindOf(def, schema->kind());  // the op's alone
    exe_->op_names.push_back(def.op);
    it = ops_.emplace(name, entry).first;
  }
  if (num_recent_ops_ < kRecentOps) {
    RecentOp& r = recent_ops_[num_recent_ops_++];
    r.name = name;  // views a NodeDef of the graph, which exe_ owns
    r.entry = it->second;
    return &r.entry;
  }
  return &it->second;
}

void Compiler::NoteCallAttrs(const NodeBuild& n, const NodeDef& def) {
  // Made at the first Call or Return: a graph without calls (the large
  // unrolled ones) gets no table, and the lookups' fallback serves.
  if (n.kind != NodeKind::kCall && n.kind != NodeKind::kReturn) {
    if (!call_attrs_of_.empty()) call_attrs_of_.push_back(-1);
    return;
  }
  if (call_attrs_of_.empty()) {
    call_attrs_of_.reserve(nodes_.capacity());
    call_attrs_of_.assign(n.id, -1);
  }
  CallAttrs a;
  a.callee = CalleeOf(def);
  auto it = function_blocks_.find(a.callee);
  a.callee_block = it == function_blocks_.end() ? kUnresolved : it->second;
  a.index = def.GetIntOr(n.kind == NodeKind::kCall ? "arg_index" : "result_index", -1);
  const AttrValue* site = def.FindAttr("call_site");
  if (const int64_t* v = site != nullptr ? site->get_if<int64_t>() : nullptr) {
    a.call_site = *v;
    a.has_call_site = true;
  }
  call_attrs_of_.push_back(static_cast<int32_t>(call_attrs_.size()));
  call_attrs_.push_back(a);
}

void Compiler::ResolveCallees() {
  // Dynamic mode adds a unit per function: a body's Calls may name
  // functions whose blocks came later.
  for (CallAttrs& a : call_attrs_) {
    if (a.callee_block != kUnresolved) continue;
    auto it = function_blocks_.find(a.callee);
    a.callee_block = it == function_blocks_.end() ? -1 : it->second;
  }
}

int32_t Compiler::CalleeBlock(int32_t id) const {
  if (const CallAttrs* a = CallAttrsOf(id)) return a->callee_block;
  auto it = function_blocks_.find(CalleeOf(*Info(id).def));
  return it == function_blocks_.end() ? -1 : it->second;
}

absl::Status Compiler::Link() {
  ResolveCallees();
  // A call site's label indexes per-site tables: no more sites than Calls
  // and Returns, or a hostile call_site would size them.
  for (const NodeBuild& n : nodes_) num_call_return_nodes_ += n.kind == NodeKind::kCall || n.kind == NodeKind::kReturn;
  for (const Unit& unit : units_) TDF_RETURN_IF_ERROR(LinkUnit(unit));
  // A partition of a distributed graph (tdf/partition.h) has Sends or Recvs.
  const bool partition = std::any_of(nodes_.begin(), nodes_.end(), [](const NodeBuild& n) {
    return n.kind == NodeKind::kSend || n.kind == NodeKind::kRecv;
  });
  // A Call of an argument delivers into exactly one argument Merge of its
  // callee; one that feeds none would start invocations whose argument
  // never arrives (and whose frames the run could not reclaim).
  for (const NodeBuild& call : nodes_) {
    if (call.kind != NodeKind::kCall || ArgIndex(call.id) < 0) continue;
    int calls = 0;
    for (const OutEdge& e : call.edges) calls += e.kind == EdgeKind::kCall;
    // In a partition, a Call (or its replica) whose argument's consumers
    // are on other ranks only says here whether the invocation starts
    // (tdf/partition.h).
    if (calls != 1 && !(calls == 0 && partition))
      return NodeError(*Info(call).def, absl::StatusCode::kInvalidArgument,
                       absl::StrCat("a Call of an argument must feed one argument Merge of its callee; it feeds ",
                                    calls));
  }
  // arg_index names the argument a Call supplies: every Call that feeds an
  // argument Merge must give that Merge's one index, and each of a
  // function's argument Merges its own. Otherwise the
  // executor's bookkeeping of which arguments a site supplies (and so
  // which it must send dead) would deliver twice into one slot.
  {
    base::FlatHashMap<int32_t, std::pair<int64_t, const NodeBuild*>> merge_index;  // merge -> (index, a Call)
    base::FlatHashMap<absl::string_view, std::vector<int32_t>> merges_of;          // function -> its merges
    for (const NodeBuild& call : nodes_) {
      if (call.kind != NodeKind::kCall) continue;  // before the attribute lookup: most nodes are not Calls
      const int64_t arg = ArgIndex(call.id);
      if (arg < 0) continue;
      for (const OutEdge& e : call.edges) {
        if (e.kind != EdgeKind::kCall) continue;
        auto [it, first] = merge_index.try_emplace(e.dst, arg, &call);
        if (first) {
          merges_of[Callee(call.id)].push_back(e.dst);
        } else if (it->second.first != arg) {
          return NodeError(*Info(call).def, absl::StatusCode::kInvalidArgument,
                           absl::StrCat("arg_index ", arg, " feeds the argument Merge '", Info(nodes_[e.dst]).def->name,
                                        "', which Call '", Info(*it->second.second).def->name, "' feeds as argument ",
                                        it->second.first));
        }
      }
    }
    for (const auto& [fn, merges] : merges_of) {
      base::FlatHashMap<int64_t, int32_t> merge_of_index;
      for (int32_t m : merges) {
        const auto& [arg, call] = merge_index.at(m);
        auto [it, first] = merge_of_index.try_emplace(arg, m);
        if (!first)
          return NodeError(*Info(*call).def, absl::StatusCode::kInvalidArgument,
                           absl::StrCat("arg_index ", arg, " of '", fn, "' feeds the argument Merge '",
                                        Info(nodes_[m]).def->name, "', and another Call's feeds '",
                                        Info(nodes_[it->second]).def->name, "'"));
      }
    }
  }
  // A call site (function, call_site) lives in one frame: its Calls and
  // Returns are that frame's nodes, and results are routed there by label.
  // Keys view the nodes' attributes: no string built per Call and Return.
  base::FlatHashMap<std::pair<absl::string_view, int32_t>, int32_t> site_block;
  for (const NodeBuild& n : nodes_) {
    if (n.kind != NodeKind::kCall && n.kind != NodeKind::kReturn) continue;
    const std::pair<absl::string_view, int32_t> key{Callee(n.id), Info(n).label};
    auto [it, inserted] = site_block.try_emplace(key, n.block);
    if (!inserted && it->second != n.block)
      return NodeError(*Info(n).def, absl::StatusCode::kInvalidArgument,
                       absl::StrCat("call_site ", Info(n).label, " of '", key.first,
                                    "' is used in two frames (another site's Calls or Returns have it)"));
  }
  // An Enter leads into the loop frame of the nodes that read it: without
  // any, it has no loop to enter.
  // In a partition of a distributed graph (it has Sends or Recvs), an
  // Enter whose readers are all on other ranks stays on its rank unread
  // (they read its replica there): it fires and passes nothing on.
  for (NodeBuild& n : nodes_) {
    if (n.kind != NodeKind::kEnter || Info(n).target_block >= 0) continue;
    if (partition && n.edges.empty()) {
      n.kind = NodeKind::kNoOutput;
      continue;
    }
    return NodeError(*Info(n).def, absl::StatusCode::kInvalidArgument,
                     "no node of its loop frame reads this Enter: it enters no loop");
  }
  for (const Unit& unit : units_) TDF_RETURN_IF_ERROR(FoldConstants(unit));
  for (const Unit& unit : units_) TDF_RETURN_IF_ERROR(FinishUnit(unit));
  TDF_RETURN_IF_ERROR(LinkRemoteLoops());
  for (NodeBuild& n : nodes_) {
    // Only LinkUnit makes the list: without a constant Enter, no node's
    // NodeInfo (a cache miss per node of a large graph) is read for it.
    if (any_invariant_input_)
      for (int16_t inv : Info(n).invariant_input()) n.has_invariants |= inv >= 0;
    for (OutEdge& e : n.edges) {
      const NodeBuild& d = nodes_[e.dst];
      e.dst_index = d.index;
      e.dst_mode = DstModeOf(d.kind, d.pending_init, d.block);
    }
  }
  for (ExecBlock& blk : exe_->blocks) {
    // The regions also tell which results are exclusive (ForwardExclusiveResultMerges).
    if (blk.kind == ExecBlock::Kind::kFunction) BuildDeadRegions(blk, options_.skip_dead_branches);
  }
  if (options_.forward_call_values) {
    ForwardCallArguments();
    ForwardResults();
    ForwardIdentities();
    ForwardPivotSwitches();
    ForwardExclusiveResultMerges();
    ForwardReturns();
    ForwardTailResults();
    if (options_.release_tail_callers) MarkTailSites();
  }
  BuildDeadDataFrontiers();
  CompactSlots();
  for (ExecBlock& blk : exe_->blocks) Layout(blk);
  for (NodeBuild& n : nodes_) {
    const bool kernel = n.kind == NodeKind::kKernel && (n.is_const || n.scalar_op != ScalarOp::kNone);
    const bool kind_ok = kernel || n.kind == NodeKind::kSwitch || n.kind == NodeKind::kMerge ||
                         n.kind == NodeKind::kReturn || n.kind == NodeKind::kCall ||
                         n.kind == NodeKind::kNextIteration || n.kind == NodeKind::kExit;
    if (n.kind == NodeKind::kCall) {
      // Argument edges first, then the control edges to the site's
      // Returns in the caller's frame (FireCall walks each part alone).
      auto control = std::stable_partition(n.edges.begin(), n.edges.end(),
                                           [](const OutEdge& e) { return e.kind == EdgeKind::kCall; });
      Info(n).num_call_edges = static_cast<int32_t>(control - n.edges.begin());
    }
    n.is_result = !Info(n).return_edges_by_label.empty();
    Info(n).first_return_edge = static_cast<int32_t>(n.edges.size());
    for (const auto& range : Info(n).return_edges_by_label)
      if (range.first != range.second) Info(n).first_return_edge = std::min(Info(n).first_return_edge, range.first);
    Info(n).local_edges_only_merge_marks = n.is_result;
    for (int32_t k = 0; k < Info(n).first_return_edge; ++k)
      Info(n).local_edges_only_merge_marks &= n.edges[k].dst_mode == DstMode::kMergeMark;
    // A Merge reads only the input that fired it, however many it has
    // (a function's argument Merge has one per call site). Kernels read
    // loop invariants in place; control-flow nodes copy them (Fire).
    // Main-block nodes too: the executor sends the run's fetched and target
    // nodes down the recording path (RunState::root_watch).
    if (exe_->mode == ExecutionMode::kStatic && !n.has_invariants && !n.is_result && !Info(n).folded) {
      if (n.kind == NodeKind::kKernel && !n.is_const && n.scalar_op != ScalarOp::kNone && n.num_inputs == 2 &&
          n.num_data_inputs == 2) {
        n.lean = LeanKind::kScalarBinary;
      } else if (n.kind == NodeKind::kSwitch && n.num_inputs == 2 && n.num_data_inputs == 2) {
        n.lean = LeanKind::kSwitch;
      } else if (n.kind == NodeKind::kKernel && n.scalar_op == ScalarOp::kIdentity && n.num_inputs == 1 &&
                 n.num_data_inputs == 1 && Info(n).device.is_cpu()) {
        n.lean = LeanKind::kPassThrough;
      } else if (n.kind == NodeKind::kKernel && n.is_const && n.num_data_inputs == 0 && n.num_inputs > 0) {
        n.lean = LeanKind::kConst;
      }
    }
    n.fast = kind_ok && (kernel || !n.has_invariants) && (kernel || n.kind == NodeKind::kMerge || !n.is_result) &&
             n.num_outputs <= 2 && (n.num_data_inputs <= 2 || n.kind == NodeKind::kMerge) && !Info(n).folded;
  }
  // Edges whose destination the source's firing fires itself, the value
  // skipping the destination's slot and the ready stack (OutEdge flags,
  // Worker::Emit and its callers): a result into the caller's scalar op
  // or one-input Call, a lean Switch into a scalar op of one live input, a
  // branch's Const or a one-input Call (tak's and ack's arguments passed
  // on as they are), a lean scalar op into a one-input Call (fib's n - 1,
  // ack's m - 1, tak's arguments) or a Switch's predicate.
  for (NodeBuild& n : nodes_) {
    for (OutEdge& e : n.edges) {
      if (e.kind != EdgeKind::kReturn) continue;
      const NodeBuild& d = nodes_[e.dst];
      const bool scalar = d.kind == NodeKind::kKernel && !d.is_const && d.scalar_op != ScalarOp::kNone &&
                          d.num_inputs == 2 && d.num_data_inputs == 2;
      const bool call = d.kind == NodeKind::kCall && d.num_inputs == 1 && d.num_data_inputs == 1;
      e.SetFlag(OutEdge::kReturnInline, (scalar || call) && d.fast && !d.has_invariants && !Info(d).folded &&
                                            exe_->mode == ExecutionMode::kStatic &&
                                            exe_->blocks[d.block].kind == ExecBlock::Kind::kFunction);
    }
    if (n.lean == LeanKind::kSwitch && exe_->blocks[n.block].kind == ExecBlock::Kind::kFunction) {
      for (OutEdge& e : n.edges) {
        const NodeBuild& d = nodes_[e.dst];
        e.SetFlag(OutEdge::kValueInline, e.kind == EdgeKind::kLocal && e.src_port >= 0 && !e.pivot() &&
                                             d.lean == LeanKind::kScalarBinary && d.block == n.block &&
                                             e.dst_mode == DstMode::kSingle);
        e.SetFlag(OutEdge::kConstInline, e.kind == EdgeKind::kLocal && d.kind == NodeKind::kKernel && d.is_const &&
                                             d.fast && !Info(d).folded && d.num_data_inputs == 0 && d.num_inputs == 1 &&
                                             d.block == n.block && e.dst_mode == DstMode::kSingle);
        e.SetFlag(OutEdge::kCallInline, e.kind == EdgeKind::kLocal && e.src_port >= 0 && !e.pivot() &&
                                            d.kind == NodeKind::kCall && d.fast && d.block == n.block &&
                                            d.num_inputs == 1 && d.num_data_inputs == 1 && !d.has_invariants);
      }
    }
    if (n.lean != LeanKind::kScalarBinary || exe_->blocks[n.block].kind != ExecBlock::Kind::kFunction) continue;
    for (OutEdge& e : n.edges) {
      const NodeBuild& d = nodes_[e.dst];
      e.SetFlag(OutEdge::kCallInline, e.kind == EdgeKind::kLocal && e.src_port == 0 && d.kind == NodeKind::kCall &&
                                          d.fast && d.block == n.block && d.num_inputs == 1 &&
                                          d.num_data_inputs == 1 && !d.has_invariants);
      e.SetFlag(OutEdge::kSwitchInline, e.kind == EdgeKind::kLocal && e.src_port == 0 &&
                                            d.lean == LeanKind::kSwitch && d.block == n.block &&
                                            e.dst_slot == d.slot_base + 1 && e.dst_mode == DstMode::kCounted);
    }
  }
  // Read by the steps above only: not held at Compile's peak that follows.
  std::vector<int32_t>().swap(call_attrs_of_);
  std::vector<CallAttrs>().swap(call_attrs_);
  return absl::OkStatus();
}

int32_t Compiler::ChildSlot(int32_t block, ChildKind kind, int32_t a, int32_t b) {
  const bool is_loop = kind == ChildKind::kLoop;
  const std::tuple<int32_t, int32_t, int32_t, int32_t> key{block, static_cast<int32_t>(kind), a, b};
  auto [it, inserted] = child_slots_.try_emplace(key, 0);
  if (!inserted) return it->second;
  ExecBlock& blk = exe_->blocks[block];
  int32_t slot = blk.num_child_slots++;
  blk.child_is_loop.push_back(is_loop ? 1 : 0);
  blk.child_fed_by_several.push_back(is_loop ? 1 : 0);
  blk.child_site_calls.push_back(0);
  it->second = slot;
  return slot;
}

absl::Status Compiler::LinkUnit(const Unit& unit) {
  std::vector<NodeBuild>& nodes = nodes_;
  // Node attributes that decide edge kinds.
  for (int32_t id : unit.ids) {
    NodeBuild& n = nodes[id];
    // Most nodes have none: their NodeInfo (a cache miss each in a large
    // graph) is not read.
    if (n.kind != NodeKind::kEnter && n.kind != NodeKind::kCall && n.kind != NodeKind::kReturn &&
        n.kind != NodeKind::kArg && n.kind != NodeKind::kRetval)
      continue;
    const NodeDef& def = *Info(n).def;
    switch (n.kind) {
      case NodeKind::kEnter: {
        Info(n).is_constant_enter = def.GetBoolOr("is_constant", false);
        Info(n).parallel_iterations =
            static_cast<int32_t>(def.GetIntOr("parallel_iterations", options_.default_parallel_iterations));
        if (Info(n).parallel_iterations < 1) Info(n).parallel_iterations = 1;
        break;
      }
      case NodeKind::kCall:
      case NodeKind::kReturn: {
        const CallAttrs* attrs = CallAttrsOf(n.id);
        int64_t site = attrs != nullptr && attrs->has_call_site ? attrs->call_site : -1;
        if (attrs == nullptr || !attrs->has_call_site) {
          TDF_ASSIGN_OR_RETURN(site, def.GetInt("call_site"));
        }
        if (site < 0 || site >= num_call_return_nodes_)
          return NodeError(def, absl::StatusCode::kInvalidArgument,
                           absl::StrCat("call_site ", site, " out of range: the graph has ", num_call_return_nodes_,
                                        " Call and Return nodes"));
        Info(n).label = static_cast<int32_t>(site);
        break;
      }
      case NodeKind::kArg:
      case NodeKind::kRetval: {
        TDF_ASSIGN_OR_RETURN(int64_t index, def.GetInt("index"));
        Info(n).io_index = static_cast<int32_t>(index);
        break;
      }
      default:
        break;
    }
  }
  // Each producer's out edges sized once: grown edge by edge, they were a
  // third of this step's allocations.
  {
    std::vector<int32_t> out_degree(unit.ids.size(), 0);
    for (size_t k = 0; k < unit.ids.size(); ++k)
      for (const ResolvedInput& ref : unit.index.inputs(k)) ++out_degree[ref.src];
    for (size_t k = 0; k < unit.ids.size(); ++k) nodes[unit.ids[k]].edges.reserve(nodes[unit.ids[k]].edges.size() + out_degree[k]);
  }
  for (size_t k = 0; k < unit.ids.size(); ++k) {
    NodeBuild& c = nodes[unit.ids[k]];
    absl::Span<const ResolvedInput> inputs = unit.index.inputs(k);
    int32_t pending = 0;
    int32_t from_next = 0, from_call = 0;
    for (int32_t j = 0; j < c.num_inputs; ++j) {
      const ResolvedInput& ref = inputs[j];
      NodeBuild& p = nodes[unit.ids[ref.src]];
      OutEdge e;
      e.dst = c.id;
      e.dst_slot = c.slot_base + j;
      e.src_port = ref.is_control ? -1 : static_cast<int16_t>(ref.port);
      e.invariant = -1;
      if (!ref.is_control && ref.port >= p.num_outputs) {
        const NodeDef& def = *Info(c).def;  // only here: NodeInfo is a cache miss per node of a large graph
        return NodeError(def, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("input '", def.input[j], "': node has ", p.num_outputs, " outputs"));
      }
      bool counts = true;
      if (p.kind == NodeKind::kEnter) {
        e.kind = EdgeKind::kEnter;
        ExecBlock& loop = exe_->blocks[c.block];
        if (loop.kind != ExecBlock::Kind::kLoop)
          return NodeError(*Info(p).def, absl::StatusCode::kInvalidArgument, "Enter does not lead into a loop frame");
        if (Info(p).target_block < 0) {
          Info(p).target_block = c.block;
          Info(p).child_slot = ChildSlot(p.block, ChildKind::kLoop, c.block, 0);
          loop.parallel_iterations = Info(p).parallel_iterations;
          if (Info(p).is_constant_enter) {
            Info(p).io_index = loop.num_invariants++;
          } else {
            ++loop.num_enters;
          }
        }
        if (Info(p).is_constant_enter) {
          e.invariant = static_cast<int16_t>(Info(p).io_index);
          // Only nodes that read an invariant have the list (ExecNode::has_invariants).
          std::vector<int16_t>& invariant_input = Info(c).mutable_lists().invariant_input;
          if (invariant_input.empty()) invariant_input.assign(c.num_inputs, -1);
          any_invariant_input_ = true;
          invariant_input[j] = static_cast<int16_t>(Info(p).io_index);
          counts = false;
        }
      } else if (p.kind == NodeKind::kExit) {
        e.kind = EdgeKind::kExit;
      } else if (p.kind == NodeKind::kNextIteration) {
        e.kind = EdgeKind::kNextIter;
        ++from_next;
      } else if (p.kind == NodeKind::kCall && !ref.is_control) {
        e.kind = EdgeKind::kCall;
        ++from_call;
      } else if (c.kind == NodeKind::kReturn && !ref.is_control) {
        e.kind = EdgeKind::kReturn;
      } else {
        e.kind = EdgeKind::kLocal;
      }
      TDF_RETURN_IF_ERROR(CheckCrossing(c, p, e.kind, j));
      if (counts) ++pending;
      p.edges.push_back(e);
    }
    c.pending_init = pending;
    if (c.kind == NodeKind::kMerge) {
      if (from_call > 0) {
        Info(c).merge_expected[0] = Info(c).merge_expected[1] = 1;
      } else if (from_next > 0) {
        Info(c).merge_expected[0] = c.num_data_inputs - from_next;
        Info(c).merge_expected[1] = from_next;
      } else {
        Info(c).merge_expected[0] = Info(c).merge_expected[1] = c.num_data_inputs;
      }
      c.pending_init = 0;  // the merge state word starts empty
    }
  }
  return absl::OkStatus();
}

// Each kind of edge crosses frames one way only; a transformed graph
// edited by hand (or a corrupt one) can wire a value where the executor
// cannot route it, into another frame's slots.
absl::Status Compiler::CheckCrossing(const NodeBuild& c, const NodeBuild& p, EdgeKind kind, int32_t j) {
  const NodeDef& def = *Info(c).def;
  auto fail = [&](absl::string_view why) {
    return NodeError(def, absl::StatusCode::kInvalidArgument,
                     absl::StrCat("input '", def.input[j], "' (node '", Info(p).def->name, "', ", Info(p).def->op,
                                  "): ", why));
  };
  auto callee = [&](const NodeBuild& n) { return CalleeBlock(n.id); };
  switch (kind) {
    case EdgeKind::kLocal:
    case EdgeKind::kNextIter:
      if (p.block != c.block) return fail("comes from another frame (a loop's values leave it through Exit)");
      break;
    case EdgeKind::kExit:
      if (exe_->blocks[p.block].parent != c.block) return fail("an Exit leads only into its loop's enclosing frame");
      break;
    case EdgeKind::kCall:
      if (c.kind != NodeKind::kMerge || c.block != callee(p))
        return fail("only the callee's argument Merges read a Call");
      // An earlier data input from the same Call was checked here too and
      // marked it: a function's argument Merge has an input per call
      // site, and comparing each with every earlier one was quadratic.
      if (call_read_by_.empty()) call_read_by_.assign(nodes_.size(), -1);
      if (call_read_by_[p.id] == c.id) return fail("read twice");
      call_read_by_[p.id] = c.id;
      break;
    case EdgeKind::kReturn:
      if (p.block != callee(c)) return fail("a Return reads a result of the body of its own function only");
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

}  // namespace runtime
}  // namespace tdf
