#include "runtime/executable.h"

#include <algorithm>
#include <limits>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "cuda/device_backend.h"
#include "graph/frames.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

int32_t ExecutableGraph::FindMainNode(absl::string_view name) const {
  // The main unit comes first: its list positions are the node ids.
  const int32_t id = main_index.Find(name);
  return id >= 0 && nodes[id].block == 0 ? id : -1;
}

int32_t ExecutableGraph::FindMainLoopExit(absl::string_view name) const {
  const int32_t id = main_index.Find(name);
  if (id < 0 || nodes[id].kind != NodeKind::kExit) return -1;
  const ExecBlock& loop = blocks[nodes[id].block];
  return loop.kind == ExecBlock::Kind::kLoop && loop.parent == 0 ? id : -1;
}

const std::vector<int32_t>* ExecutableGraph::FindInvokeResults(absl::string_view name) const {
  auto it = invoke_results.find(name);
  return it == invoke_results.end() ? nullptr : &it->second;
}

namespace {

NodeKind KindOf(const NodeDef& def, OpKind op_kind) {
  switch (op_kind) {
    case OpKind::kSwitch: return NodeKind::kSwitch;
    case OpKind::kMerge: return NodeKind::kMerge;
    case OpKind::kEnter: return NodeKind::kEnter;
    case OpKind::kExit: return NodeKind::kExit;
    case OpKind::kNextIteration: return NodeKind::kNextIteration;
    case OpKind::kCall: return NodeKind::kCall;
    case OpKind::kReturn: return NodeKind::kReturn;
    case OpKind::kInvoke: return NodeKind::kInvoke;
    case OpKind::kArg: return NodeKind::kArg;
    case OpKind::kRetval: return NodeKind::kRetval;
    default: break;
  }
  if (def.op == "Placeholder") return NodeKind::kPlaceholder;
  if (def.op == "NoOp") return NodeKind::kNoOutput;
  return NodeKind::kKernel;
}

ExecBlock::Kind BlockKind(BlockInfo::Kind k) {
  switch (k) {
    case BlockInfo::Kind::kLoop: return ExecBlock::Kind::kLoop;
    case BlockInfo::Kind::kFunction: return ExecBlock::Kind::kFunction;
    default: return ExecBlock::Kind::kMain;
  }
}

size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Room for `more` elements, doubling the capacity when it must grow.
template <typename T>
void GrowFor(std::vector<T>& v, size_t more) {
  if (v.size() + more > v.capacity()) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
}

// A node while compiling: its ExecNode half, and its out edges before they
// move to the edge pool. Its NodeInfo half is built in place in the
// executable (Compiler::Info): a combined record copied out at the end cost
// 320 bytes a node while compiling (chain(10^6): 190 MB more peak memory)
// and the copy.
struct NodeBuild : ExecNode {
  std::vector<OutEdge> edges;
};

class Compiler {
 public:
  Compiler(ExecutableGraph* exe, const SessionOptions& options) : exe_(exe), options_(options) {}

  // A node's NodeInfo half (see NodeBuild).
  NodeInfo& Info(int32_t id) { return exe_->info[id]; }
  const NodeInfo& Info(int32_t id) const { return exe_->info[id]; }
  NodeInfo& Info(const NodeBuild& n) { return exe_->info[n.id]; }
  const NodeInfo& Info(const NodeBuild& n) const { return exe_->info[n.id]; }

  // Adds the nodes of one unit (the main graph, or one function body in
  // dynamic mode) with its blocks.
  absl::Status AddUnit(const std::vector<NodeDef>& nodes, const std::string& body_name) {
    Unit unit;
    TDF_ASSIGN_OR_RETURN(unit.index, NodeIndex::Build(nodes));
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
    // Geometric growth: dynamic mode adds one unit per function, and
    // reserving exactly what each needs reallocated both vectors per unit,
    // quadratic in time and in the memory the freed copies left behind
    // (10^4 functions: gigabytes).
    GrowFor(nodes_, nodes.size());
    GrowFor(exe_->info, nodes.size());
    unit.ids.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeDef& def = nodes[i];
      const OpSchema* schema = OpRegistry::Global()->Find(def.op);
      if (schema == nullptr) return NodeError(def, absl::StatusCode::kInvalidArgument, "unknown op");
      NodeBuild n;
      n.id = static_cast<int32_t>(nodes_.size());
      exe_->info.emplace_back().def = &def;
      n.kind = KindOf(def, schema->kind());
      n.block = block_map[fi.block_of_node[i]];
      ExecBlock& blk = exe_->blocks[n.block];
      n.index = static_cast<int32_t>(blk.nodes.size());
      blk.nodes.push_back(n.id);
      n.num_inputs = static_cast<int32_t>(def.input.size());
      n.num_data_inputs = def.num_data_inputs();
      n.slot_base = blk.num_slots;
      blk.num_slots += n.num_inputs;
      std::vector<DType> unknown(n.num_data_inputs, DType::kInvalid);
      InferenceContext ictx{def, unknown, &exe_->graph.library};
      TDF_ASSIGN_OR_RETURN(std::vector<DType> out_types, schema->InferTypes(ictx));
      n.num_outputs = static_cast<int32_t>(out_types.size());
      auto [it, inserted] = op_ids_.emplace(def.op, static_cast<int32_t>(exe_->op_names.size()));
      if (inserted) exe_->op_names.push_back(def.op);
      n.op_id = it->second;
      unit.ids.push_back(n.id);
      nodes_.push_back(std::move(n));
    }
    units_.push_back(std::move(unit));
    return absl::OkStatus();
  }

  absl::Status Link() {
    // A call site's label indexes per-site tables: no more sites than Calls
    // and Returns, or a hostile call_site would size them.
    for (const NodeBuild& n : nodes_) num_call_return_nodes_ += n.kind == NodeKind::kCall || n.kind == NodeKind::kReturn;
    for (const Unit& unit : units_) TDF_RETURN_IF_ERROR(LinkUnit(unit));
    // A Call of an argument delivers into exactly one argument Merge of its
    // callee; one that feeds none would start invocations whose argument
    // never arrives (and whose frames the run could not reclaim).
    for (const NodeBuild& call : nodes_) {
      if (call.kind != NodeKind::kCall || Info(call).def->GetIntOr("arg_index", -1) < 0) continue;
      int calls = 0;
      for (const OutEdge& e : call.edges) calls += e.kind == EdgeKind::kCall;
      if (calls != 1)
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
      absl::flat_hash_map<int32_t, std::pair<int64_t, const NodeBuild*>> merge_index;  // merge -> (index, a Call)
      absl::flat_hash_map<std::string, std::vector<int32_t>> merges_of;                // function -> its merges
      for (const NodeBuild& call : nodes_) {
        const int64_t arg = Info(call).def->GetIntOr("arg_index", -1);
        if (call.kind != NodeKind::kCall || arg < 0) continue;
        for (const OutEdge& e : call.edges) {
          if (e.kind != EdgeKind::kCall) continue;
          auto [it, first] = merge_index.try_emplace(e.dst, arg, &call);
          if (first) {
            merges_of[Info(call).def->GetString("function").value_or("")].push_back(e.dst);
          } else if (it->second.first != arg) {
            return NodeError(*Info(call).def, absl::StatusCode::kInvalidArgument,
                             absl::StrCat("arg_index ", arg, " feeds the argument Merge '", Info(nodes_[e.dst]).def->name,
                                          "', which Call '", Info(*it->second.second).def->name, "' feeds as argument ",
                                          it->second.first));
          }
        }
      }
      for (const auto& [fn, merges] : merges_of) {
        absl::flat_hash_map<int64_t, int32_t> merge_of_index;
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
    absl::flat_hash_map<std::pair<std::string, int32_t>, int32_t> site_block;
    for (const NodeBuild& n : nodes_) {
      if (n.kind != NodeKind::kCall && n.kind != NodeKind::kReturn) continue;
      const std::pair<std::string, int32_t> key{Info(n).def->GetString("function").value_or(""), Info(n).label};
      auto [it, inserted] = site_block.try_emplace(key, n.block);
      if (!inserted && it->second != n.block)
        return NodeError(*Info(n).def, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("call_site ", Info(n).label, " of '", key.first,
                                      "' is used in two frames (another site's Calls or Returns have it)"));
    }
    // An Enter leads into the loop frame of the nodes that read it: without
    // any, it has no loop to enter.
    for (const NodeBuild& n : nodes_) {
      if (n.kind == NodeKind::kEnter && Info(n).target_block < 0)
        return NodeError(*Info(n).def, absl::StatusCode::kInvalidArgument,
                         "no node of its loop frame reads this Enter: it enters no loop");
    }
    for (const Unit& unit : units_) TDF_RETURN_IF_ERROR(FoldConstants(unit));
    for (const Unit& unit : units_) TDF_RETURN_IF_ERROR(FinishUnit(unit));
    for (NodeBuild& n : nodes_) {
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
    return absl::OkStatus();
  }

  std::vector<NodeBuild> TakeNodes() { return std::move(nodes_); }
  NodeIndex TakeMainIndex() { return std::move(units_.front().index); }

 private:
  struct Unit {
    std::vector<int32_t> ids;  // by position in the unit's node list
    NodeIndex index;           // inputs by position in the list
  };

  int32_t ChildSlot(int32_t block, const std::string& key, bool is_loop) {
    auto& slots = child_slots_[block];
    auto it = slots.find(key);
    if (it != slots.end()) return it->second;
    ExecBlock& blk = exe_->blocks[block];
    int32_t slot = blk.num_child_slots++;
    blk.child_is_loop.push_back(is_loop ? 1 : 0);
    blk.child_fed_by_several.push_back(is_loop ? 1 : 0);
    blk.child_site_calls.push_back(0);
    slots[key] = slot;
    return slot;
  }

  absl::Status LinkUnit(const Unit& unit) {
    std::vector<NodeBuild>& nodes = nodes_;
    // Node attributes that decide edge kinds.
    for (int32_t id : unit.ids) {
      NodeBuild& n = nodes[id];
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
          TDF_ASSIGN_OR_RETURN(int64_t site, def.GetInt("call_site"));
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
    for (size_t k = 0; k < unit.ids.size(); ++k) {
      NodeBuild& c = nodes[unit.ids[k]];
      const NodeDef& def = *Info(c).def;
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
        if (!ref.is_control && ref.port >= p.num_outputs)
          return NodeError(def, absl::StatusCode::kInvalidArgument,
                           absl::StrCat("input '", def.input[j], "': node has ", p.num_outputs, " outputs"));
        bool counts = true;
        if (p.kind == NodeKind::kEnter) {
          e.kind = EdgeKind::kEnter;
          ExecBlock& loop = exe_->blocks[c.block];
          if (loop.kind != ExecBlock::Kind::kLoop)
            return NodeError(*Info(p).def, absl::StatusCode::kInvalidArgument, "Enter does not lead into a loop frame");
          if (Info(p).target_block < 0) {
            Info(p).target_block = c.block;
            Info(p).child_slot = ChildSlot(p.block, absl::StrCat("loop:", c.block), true);
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

  // A function body's sourceless scalar Consts would fire once per
  // invocation; instead their values are written into their consumers' slots
  // when the frame is created, and the consumers wait for one input less.
  absl::Status FoldConstants(const Unit& unit) {
    std::vector<NodeBuild>& nodes = nodes_;
    for (int32_t id : unit.ids) {
      NodeBuild& n = nodes[id];
      if (Info(n).def->op != "Const" || n.num_inputs != 0) continue;
      ExecBlock& blk = exe_->blocks[n.block];
      if (blk.kind != ExecBlock::Kind::kFunction || n.edges.empty()) continue;
      // A GPU Const's consumers read its device copy, which its kernel makes.
      absl::StatusOr<Device> device = Device::Parse(Info(n).def->device);
      if (!device.ok() || !device->is_cpu()) continue;
      TDF_ASSIGN_OR_RETURN(Tensor value, Info(n).def->GetTensor("value"));
      if (!value.is_inline_scalar()) continue;
      bool foldable = true;
      for (const OutEdge& e : n.edges) {
        const NodeBuild& c = nodes[e.dst];
        foldable &= e.src_port == 0 && e.kind == EdgeKind::kLocal && c.kind == NodeKind::kKernel && c.block == n.block;
      }
      if (!foldable) continue;
      for (const OutEdge& e : n.edges) {
        nodes[e.dst].pending_init -= 1;
        blk.prefilled.push_back({e.dst_slot, value});
      }
      n.edges.clear();
      Info(n).folded = true;
    }
    return absl::OkStatus();
  }

  absl::Status FinishUnit(const Unit& unit) {
    std::vector<NodeBuild>& nodes = nodes_;
    for (int32_t id : unit.ids) {
      NodeBuild& n = nodes[id];
      ExecBlock& blk = exe_->blocks[n.block];
      const NodeDef& def = *Info(n).def;
      // Sources fire when a frame of the block is created; in a loop body that
      // includes nodes whose only inputs are loop invariants.
      if (!Info(n).folded && (n.num_inputs == 0 || (n.pending_init == 0 && n.kind != NodeKind::kMerge)))
        blk.sources.push_back(id);
      switch (n.kind) {
        case NodeKind::kPlaceholder:
          if (blk.kind != ExecBlock::Kind::kMain)
            return NodeError(def, absl::StatusCode::kInvalidArgument, "a Placeholder must be in the main graph");
          Info(n).io_index = static_cast<int32_t>(exe_->placeholders.size());
          exe_->placeholders.push_back(id);
          break;
        case NodeKind::kExit:
          if (blk.kind != ExecBlock::Kind::kLoop)
            return NodeError(def, absl::StatusCode::kInvalidArgument, "Exit outside a loop frame");
          Info(n).io_index = static_cast<int32_t>(blk.exits.size());
          blk.exits.push_back(id);
          break;
        case NodeKind::kCall: {
          TDF_ASSIGN_OR_RETURN(std::string fn, def.GetString("function"));
          auto fit = function_blocks_.find(fn);
          if (fit == function_blocks_.end())
            return NodeError(def, absl::StatusCode::kInvalidArgument,
                             absl::StrCat("calls function '", fn, "' whose body is not in the graph"));
          Info(n).target_block = fit->second;
          Info(n).child_slot = ChildSlot(n.block, absl::StrCat("call:", fn, ":", Info(n).label), false);
          const SiteNodes& site = Site(n.block, Info(n).label, fn);
          const int32_t calls = static_cast<int32_t>(site.calls.size());
          for (int32_t ret : site.returns) Info(n).mutable_lists().site_returns.push_back({ret, nodes[ret].slot_base});
          Info(n).site_num_calls = calls;
          if (calls > 1) blk.child_fed_by_several[Info(n).child_slot] = 1;
          for (int32_t other : site.calls) {
            if (other == id) Info(n).site_call_index = static_cast<int32_t>(Info(n).site_calls().size());
            Info(n).site_call_nodes.push_back(other);
          }
          if (Info(n).site_calls().size() > 64)
            return NodeError(def, absl::StatusCode::kUnimplemented, "a call site with more than 64 arguments");
          // A split site (autodiff's paired forward/backward calls of f_ext)
          // has parts: the Calls that control a common Return. A part whose
          // arguments are all dead gives its Returns dead on its own, since
          // the other part may be waiting for exactly those results.
          {
            std::set<std::string> part{def.name};
            std::vector<int32_t> part_returns;
            for (const auto& [ret, slot] : Info(n).site_returns()) {
              const NodeDef& rdef = *Info(nodes[ret]).def;
              bool mine = false;
              for (size_t k = rdef.num_data_inputs(); k < rdef.input.size(); ++k) mine |= rdef.input[k] == "^" + def.name;
              if (!mine) continue;
              part_returns.push_back(ret);
              for (size_t k = rdef.num_data_inputs(); k < rdef.input.size(); ++k) part.insert(rdef.input[k].substr(1));
            }
            Info(n).part_mask = 0;
            for (size_t i = 0; i < Info(n).site_calls().size(); ++i)
              if (part.count(Info(nodes[Info(n).site_calls()[i]]).def->name)) Info(n).part_mask |= uint64_t{1} << i;
            Info(n).split_site = static_cast<size_t>(__builtin_popcountll(Info(n).part_mask)) < Info(n).site_calls().size();
            blk.child_site_calls[Info(n).child_slot] =
                Info(n).split_site ? std::numeric_limits<int32_t>::max()
                             : std::max(blk.child_site_calls[Info(n).child_slot], Info(n).site_num_calls);
            if (Info(n).split_site) {
              std::vector<std::pair<int32_t, int32_t>> mine;
              for (const auto& rs : Info(n).site_returns())
                if (std::find(part_returns.begin(), part_returns.end(), rs.first) != part_returns.end()) mine.push_back(rs);
              Info(n).mutable_lists().site_returns = std::move(mine);
            }
          }
          // Arguments of the callee that no Call of this site supplies.
          std::set<int64_t> supplied;
          for (int32_t other : site.calls) supplied.insert(Info(other).def->GetIntOr("arg_index", -1));
          for (const auto& [merge, arg] : ArgMerges(fn)) {
            if (supplied.count(arg) == 0) Info(n).mutable_lists().missing_arg_merges.push_back({merge, nodes[merge].slot_base});
          }
          break;
        }
        case NodeKind::kInvoke: {
          TDF_ASSIGN_OR_RETURN(std::string fn, def.GetString("function"));
          auto fit = function_blocks_.find(fn);
          if (fit == function_blocks_.end())
            return NodeError(def, absl::StatusCode::kInvalidArgument,
                             absl::StrCat("calls function '", fn, "' which has no definition"));
          Info(n).target_block = fit->second;
          Info(n).child_slot = ChildSlot(n.block, absl::StrCat("invoke:", id), false);
          Info(n).label = invoke_sites_[fn]++;
          break;
        }
        case NodeKind::kArg:
        case NodeKind::kRetval:
          // Frames are inferred from inputs: a Retval that reads a node of a
          // loop lands in that loop's frame, where no caller waits for it.
          if (blk.kind != ExecBlock::Kind::kFunction)
            return NodeError(def, absl::StatusCode::kInvalidArgument,
                             absl::StrCat("a function's ", def.op,
                                          " must be in the function's own frame, not in a loop's (a loop's values "
                                          "leave it through Exit)"));
          ++(n.kind == NodeKind::kArg ? blk.num_args : blk.num_results);
          break;
        case NodeKind::kKernel: {
          if (def.op == "Variable") {
            if (blk.kind != ExecBlock::Kind::kMain)
              return NodeError(def, absl::StatusCode::kInvalidArgument, "a Variable must be in the main graph");
            Info(n).variable = static_cast<int32_t>(exe_->variables.size());
            exe_->variables.push_back(id);
            exe_->kernels.push_back(MakeVariableHandleKernel(Info(n).variable));
          } else if (IsStateOp(def.op)) {
            TDF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeStateKernel(def));
            exe_->kernels.push_back(std::move(k));
          } else {
            absl::StatusOr<Device> parsed = Device::Parse(def.device);
            if (!parsed.ok()) return NodeError(def, parsed.status().code(), parsed.status().message());
            const Device device = *parsed;
            TDF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, KernelRegistry::Global()->Create(def, device.type));
            exe_->kernels.push_back(std::move(k));
            Info(n).device = device;
            if (device.is_cpu()) {
              n.scalar_op = ScalarOpFor(def.op);
            } else {
              Info(n).device_context = DeviceBackend::Stream(device);
            }
            if (def.op == "Const") {
              TDF_ASSIGN_OR_RETURN(Info(n).const_value, def.GetTensor("value"));
              // A GPU Const emits its device copy, made by its kernel.
              n.is_const = Info(n).const_value.device().is_cpu() && device.is_cpu();
            }
          }
          Info(n).kernel = exe_->kernels.back().get();
          break;
        }
        default:
          break;
      }
      // Group a retval identity's Return edges by label (static mode).
      bool has_return_edges = false;
      for (const OutEdge& e : n.edges) has_return_edges |= e.kind == EdgeKind::kReturn;
      if (has_return_edges) {
        std::stable_sort(n.edges.begin(), n.edges.end(), [&](const OutEdge& a, const OutEdge& b) {
          auto key = [&](const OutEdge& e) { return e.kind == EdgeKind::kReturn ? Info(nodes[e.dst]).label : -1; };
          return key(a) < key(b);
        });
        int32_t max_label = -1;
        for (const OutEdge& e : n.edges)
          if (e.kind == EdgeKind::kReturn) max_label = std::max(max_label, Info(nodes[e.dst]).label);
        Info(n).return_edges_by_label.assign(max_label + 1, {0, 0});
        for (int32_t k = 0; k < static_cast<int32_t>(n.edges.size()); ++k) {
          const OutEdge& e = n.edges[k];
          if (e.kind != EdgeKind::kReturn) continue;
          Info(n).result_index = static_cast<int32_t>(Info(nodes[e.dst]).def->GetIntOr("result_index", -1));
          auto& range = Info(n).return_edges_by_label[Info(nodes[e.dst]).label];
          if (range.first == range.second) range.first = k;
          range.second = k + 1;
        }
      }
    }
    // A split site of two parts (AddGradients' forward call and its
    // gradient call): the part that supplies the callee's first argument is
    // the forward part; the other's arguments (dy) are computed from it.
    for (int32_t id : unit.ids) {
      NodeBuild& n = nodes[id];
      if (n.kind != NodeKind::kCall || !Info(n).split_site) continue;
      const std::vector<int32_t>& calls = Info(n).site_calls();
      int32_t first = -1;
      int64_t first_arg = std::numeric_limits<int64_t>::max();
      uint64_t other = 0;
      for (int32_t c : calls) {
        const int64_t arg = Info(nodes[c]).def->GetIntOr("arg_index", -1);
        if (arg < first_arg) {
          first_arg = arg;
          first = c;
        }
        if (Info(nodes[c]).part_mask != Info(n).part_mask) other |= Info(nodes[c]).part_mask;
      }
      const uint64_t all = calls.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << calls.size()) - 1;
      bool two_parts = (other | Info(n).part_mask) == all && (other & Info(n).part_mask) == 0;
      for (int32_t c : calls) two_parts &= Info(nodes[c]).part_mask == Info(n).part_mask || Info(nodes[c]).part_mask == other;
      if (!two_parts || first < 0) continue;
      Info(n).split_role = Info(nodes[first]).part_mask == Info(n).part_mask ? SplitRole::kForward : SplitRole::kGradient;
      Info(n).other_part_mask = other;
    }
    return absl::OkStatus();
  }

  // Each kind of edge crosses frames one way only; a transformed graph
  // edited by hand (or a corrupt one) can wire a value where the executor
  // cannot route it, into another frame's slots.
  absl::Status CheckCrossing(const NodeBuild& c, const NodeBuild& p, EdgeKind kind, int32_t j) {
    const NodeDef& def = *Info(c).def;
    auto fail = [&](absl::string_view why) {
      return NodeError(def, absl::StatusCode::kInvalidArgument,
                       absl::StrCat("input '", def.input[j], "' (node '", Info(p).def->name, "', ", Info(p).def->op,
                                    "): ", why));
    };
    auto callee = [&](const NodeBuild& n) {
      auto it = function_blocks_.find(Info(n).def->GetString("function").value_or(""));
      return it == function_blocks_.end() ? -1 : it->second;
    };
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

  // A function's argument Merge receives exactly one token per invocation
  // (from the Call of the site that created it) and passes it on unchanged:
  // the Calls can deliver to its consumers directly, one firing less per
  // argument per call (fib 11 -> 10 per call, tak 15.7 -> 12.7). The Merge
  // keeps its edges for the dead token of an argument a site does not
  // supply (FireCall), but never fires. Only Merges whose every input is a
  // Call, whose value_index output is unused and whose consumers are in the
  // function's own frame.
  void ForwardCallArguments() {
    std::vector<NodeBuild>& nodes = nodes_;
    std::vector<int32_t> call_inputs(nodes.size(), 0);
    for (const NodeBuild& c : nodes) {
      if (c.kind != NodeKind::kCall) continue;
      for (const OutEdge& e : c.edges)
        if (e.kind == EdgeKind::kCall) ++call_inputs[e.dst];
    }
    for (NodeBuild& m : nodes) {
      if (m.kind != NodeKind::kMerge || exe_->blocks[m.block].kind != ExecBlock::Kind::kFunction) continue;
      bool ok = m.num_inputs > 0 && call_inputs[m.id] == m.num_inputs && Info(m).merge_expected[0] == 1 &&
                Info(m).merge_expected[1] == 1 && !m.edges.empty();
      for (const OutEdge& e : m.edges) ok &= e.kind == EdgeKind::kLocal && e.src_port <= 0;
      Info(m).forwarded = ok;
    }
    for (NodeBuild& c : nodes) {
      if (c.kind != NodeKind::kCall) continue;
      bool any = false;
      for (const OutEdge& e : c.edges) any |= e.kind == EdgeKind::kCall && Info(nodes[e.dst]).forwarded;
      if (!any) continue;
      std::vector<OutEdge> edges;
      for (const OutEdge& e : c.edges) {
        if (e.kind != EdgeKind::kCall || !Info(nodes[e.dst]).forwarded) {
          edges.push_back(e);
          continue;
        }
        for (OutEdge f : nodes[e.dst].edges) {
          f.kind = EdgeKind::kCall;
          f.src_port = e.src_port;
          edges.push_back(f);
        }
      }
      c.edges = std::move(edges);
    }
  }

  // The one node of `blk` with an edge into `dst` (and that edge's index in
  // its edges), or -1 when there are none or several.
  int32_t SoleProducer(const ExecBlock& blk, int32_t dst, int32_t* edge_index) const {
    int32_t producer = -1, found = 0;
    for (int32_t id : blk.nodes) {
      const std::vector<OutEdge>& edges = nodes_[id].edges;
      for (int32_t k = 0; k < static_cast<int32_t>(edges.size()); ++k) {
        if (edges[k].dst != dst) continue;
        producer = id;
        *edge_index = k;
        ++found;
      }
    }
    return found == 1 ? producer : -1;
  }

  // `p` also sends, from its output `port`, everything result node `r`
  // sends (r's local edges, then its Returns): r's label ranges, shifted
  // past p's own edges, become p's.
  void TakeOverEdges(NodeBuild& p, const NodeBuild& r, int16_t port) {
    const int32_t shift = static_cast<int32_t>(p.edges.size());
    for (OutEdge e : r.edges) {
      e.src_port = port;
      p.edges.push_back(e);
    }
    Info(p).return_edges_by_label = Info(r).return_edges_by_label;
    Info(p).result_index = Info(r).result_index;
    for (auto& range : Info(p).return_edges_by_label) {
      if (range.first == range.second) continue;
      range.first += shift;
      range.second += shift;
    }
  }

  // A function's result Identity (the node with Return edges by label) only
  // passes its input on: the node that computes the result takes over its
  // edges, local ones and the Returns of every call site, and the Identity
  // never fires (unless a dead region's frontier feeds it, when it still
  // passes the dead token on). Only a kernel or Merge producer in the same
  // frame that is not itself a result, feeding the Identity's only input.
  void ForwardResults() {
    std::vector<NodeBuild>& nodes = nodes_;
    for (NodeBuild& r : nodes) {
      if (Info(r).return_edges_by_label.empty() || r.kind != NodeKind::kKernel || Info(r).def->op != "Identity" ||
          r.num_inputs != 1 || exe_->blocks[r.block].kind != ExecBlock::Kind::kFunction)
        continue;
      int32_t edge_index = -1;
      const int32_t producer = SoleProducer(exe_->blocks[r.block], r.id, &edge_index);
      if (producer < 0) continue;
      NodeBuild& p = nodes[producer];
      const OutEdge into = p.edges[edge_index];
      if ((p.kind != NodeKind::kKernel && p.kind != NodeKind::kMerge) || !Info(p).return_edges_by_label.empty() ||
          into.kind != EdgeKind::kLocal || into.src_port < 0 || p.block != r.block)
        continue;
      p.edges.erase(p.edges.begin() + edge_index);
      TakeOverEdges(p, r, into.src_port);
      Info(r).forwarded = true;
    }
  }

  // Identities in a function body (a Cond's pivots: one fires per call) only
  // pass their input on: their producer delivers to their consumers itself,
  // from the same output port (a control consumer reads that port's
  // deadness), and they never fire. Only Identities with one data input from
  // a kernel, Switch or Merge of the same frame that is not a result.
  void ForwardIdentities() {
    std::vector<NodeBuild>& nodes = nodes_;
    for (const ExecBlock& blk : exe_->blocks) {
      if (blk.kind != ExecBlock::Kind::kFunction) continue;
      for (int32_t id : blk.nodes) {
        NodeBuild& x = nodes[id];
        if (x.kind != NodeKind::kKernel || Info(x).def->op != "Identity" || x.num_inputs != 1 || Info(x).forwarded ||
            !Info(x).return_edges_by_label.empty())
          continue;
        bool local = true;
        for (const OutEdge& e : x.edges) local &= e.kind == EdgeKind::kLocal;
        if (!local) continue;
        int32_t edge_index = -1;
        const int32_t producer = SoleProducer(blk, x.id, &edge_index);
        if (producer < 0) continue;
        NodeBuild& p = nodes[producer];
        const OutEdge into = p.edges[edge_index];
        const bool kind_ok =
            p.kind == NodeKind::kKernel || p.kind == NodeKind::kSwitch || p.kind == NodeKind::kMerge;
        if (!kind_ok || !Info(p).return_edges_by_label.empty() || into.kind != EdgeKind::kLocal || into.src_port < 0)
          continue;
        p.edges.erase(p.edges.begin() + edge_index);
        for (OutEdge e : x.edges) {
          e.src_port = into.src_port;
          p.edges.push_back(e);
        }
        Info(x).forwarded = true;
      }
    }
  }

  // A Cond's pivot Switch (data and predicate both the predicate) exists to
  // trigger its branches' control inputs: one live token on the taken
  // port. When another Switch of the frame routes a value on the same
  // predicate (fib's Cond on n <= 1 routes n), that Switch sends those
  // triggers itself, live exactly when the predicate is live and selects
  // their port (OutEdge::kPivot; its own data may be dead), and the pivot
  // never fires: fib, one firing fewer per call. Only a pivot outside any
  // dead region whose every consumer is a control input in the frame, and a
  // taker outside any region that is skipped.
  void ForwardPivotSwitches() {
    std::vector<NodeBuild>& nodes = nodes_;
    for (ExecBlock& blk : exe_->blocks) {
      if (blk.kind != ExecBlock::Kind::kFunction) continue;
      // The edges feeding each Switch of the block: (producer, edge index).
      absl::flat_hash_map<int32_t, std::vector<std::pair<int32_t, int32_t>>> feeds;
      auto collect_feeds = [&] {
        feeds.clear();
        for (int32_t id : blk.nodes) {
          const std::vector<OutEdge>& edges = nodes[id].edges;
          for (int32_t k = 0; k < static_cast<int32_t>(edges.size()); ++k) {
            const NodeBuild& d = nodes[edges[k].dst];
            if (d.kind == NodeKind::kSwitch && d.block == blk.id) feeds[d.id].push_back({id, k});
          }
        }
      };
      collect_feeds();
      auto simple = [&](const NodeBuild& w) {
        return w.kind == NodeKind::kSwitch && w.num_inputs == 2 && w.num_data_inputs == 2 && !w.has_invariants &&
               Info(w).return_edges_by_label.empty() && !Info(w).forwarded;
      };
      // The (producer, port) feeding input `input` of Switch `w`, or {-1, -1}.
      auto source = [&](const NodeBuild& w, int32_t input) -> std::pair<int32_t, int32_t> {
        for (const auto& [id, k] : feeds[w.id]) {
          const OutEdge& e = nodes[id].edges[k];
          if (e.dst_slot - w.slot_base == input && e.kind == EdgeKind::kLocal && e.src_port >= 0)
            return {id, e.src_port};
        }
        return {-1, -1};
      };
      for (int32_t sid : blk.nodes) {
        NodeBuild& pivot = nodes[sid];
        if (!simple(pivot) || feeds[sid].size() != 2 || dead_with_.count(sid) > 0) continue;
        const auto pred = source(pivot, 1);
        if (pred.first < 0 || source(pivot, 0) != pred) continue;
        bool controls = true;
        for (const OutEdge& e : pivot.edges) {
          const NodeBuild& d = nodes[e.dst];
          controls &= e.kind == EdgeKind::kLocal && e.src_port >= 0 && d.block == blk.id &&
                      e.dst_slot - d.slot_base >= d.num_data_inputs;
        }
        if (!controls) continue;
        int32_t taker = -1;
        for (int32_t tid : blk.nodes) {
          const NodeBuild& t = nodes[tid];
          // Nor a taker that a dead region skips: the region's frontier,
          // made before this pass, does not hold the edges it would take
          // over, and the pivot (outside every region) must send them
          // whenever its predicate arrives. (A Cond whose data comes through
          // an untaken outer branch: its branches never started, and loops
          // in them never ended.)
          if (tid != sid && simple(t) && t.switch_group == pivot.switch_group && source(t, 1) == pred &&
              source(t, 0) != pred && !(options_.skip_dead_branches && dead_with_.count(tid) > 0)) {
            taker = tid;
            break;
          }
        }
        if (taker < 0) continue;
        NodeBuild& t = nodes[taker];
        for (OutEdge e : pivot.edges) {
          e.SetFlag(OutEdge::kPivot, true);
          t.edges.push_back(e);
        }
        Info(t).has_pivot_edges = true;
        pivot.edges.clear();
        Info(pivot).forwarded = true;
        // Its predicate no longer reaches it: it never becomes ready.
        std::vector<OutEdge>& from = nodes[pred.first].edges;
        from.erase(std::remove_if(from.begin(), from.end(), [&](const OutEdge& e) { return e.dst == sid; }),
                   from.end());
        if (pivot.switch_group >= 0) {
          --blk.dead_regions[pivot.switch_group].members;
          pivot.switch_group = -1;
        }
        collect_feeds();  // the producer's edge indices shifted
      }
    }
  }

  // A function's result Merge of two kernels that no predicate value lets
  // both be live (the branches of one Cond: each is in the other's dead
  // region) passes the live one on, once per call. The kernels deliver their
  // live value to the caller's Returns themselves and send the Merge only
  // dead tokens, which it counts: it fires, dead, only when all its inputs
  // are (a dead invocation). fib: one firing fewer per call. When only one
  // input is such a kernel (ack's n + 1 against its tail calls), that one
  // delivers itself and the Merge fires only when the other input is live.
  void ForwardExclusiveResultMerges() {
    std::vector<NodeBuild>& nodes = nodes_;
    for (NodeBuild& r : nodes) {
      if (r.kind != NodeKind::kMerge || Info(r).return_edges_by_label.empty() || r.num_inputs != 2 || r.has_invariants ||
          exe_->blocks[r.block].kind != ExecBlock::Kind::kFunction)
        continue;
      bool returns_only = true;  // a local consumer would get a dead token from each producer
      for (const OutEdge& e : r.edges) returns_only &= e.kind == EdgeKind::kReturn && e.src_port == 0;
      if (!returns_only) continue;
      // The producer of each input: one edge of a kernel of this frame.
      int32_t producer[2] = {-1, -1}, edge_of[2] = {-1, -1};
      int found = 0;
      bool ok = true;
      for (int32_t id : exe_->blocks[r.block].nodes) {
        const std::vector<OutEdge>& edges = nodes[id].edges;
        for (int32_t k = 0; k < static_cast<int32_t>(edges.size()); ++k) {
          if (edges[k].dst != r.id) continue;
          const int32_t input = edges[k].dst_slot - r.slot_base;
          if (input < 0 || input > 1 || producer[input] >= 0 || id == producer[1 - input]) {
            ok = false;
            continue;
          }
          producer[input] = id;
          edge_of[input] = k;
          ++found;
        }
      }
      if (!ok || found != 2) continue;
      // A producer that is not such a kernel (a Merge of tail calls, a
      // Return) keeps its edge: the Merge passes its live value on as before.
      bool forward[2];
      for (int i = 0; i < 2; ++i) {
        const NodeBuild& p = nodes[producer[i]];
        const OutEdge& into = p.edges[edge_of[i]];
        forward[i] = p.kind == NodeKind::kKernel && !Info(p).folded && Info(p).return_edges_by_label.empty() &&
                     !p.has_invariants && p.block == r.block && into.kind == EdgeKind::kLocal && into.src_port >= 0;
      }
      if (!(forward[0] || forward[1]) || !Exclusive(producer[0], producer[1])) continue;
      for (int i = 0; i < 2; ++i) {
        if (!forward[i]) continue;
        NodeBuild& p = nodes[producer[i]];
        OutEdge& into = p.edges[edge_of[i]];
        into.dst_mode = DstMode::kMergeMark;
        TakeOverEdges(p, r, into.src_port);
        Info(p).returns_only_live = true;
      }
    }
  }

  // Whether one predicate group's opposite ports make `a` and `b` dead:
  // then no frame has both live.
  bool Exclusive(int32_t a, int32_t b) const {
    auto ia = dead_with_.find(a), ib = dead_with_.find(b);
    if (ia == dead_with_.end() || ib == dead_with_.end()) return false;
    for (const DeadWith& x : ia->second)
      for (const DeadWith& y : ib->second)
        if (x.block == y.block && x.group == y.group && x.port != y.port) return true;
    return false;
  }

  // A Return inside a function body only pops the tag: it passes the
  // callee's result on, into the frame that holds it. The callee's result
  // node delivers to the Return's consumers in that frame itself (its Return
  // edges for the label become the Return's out edges), the site's Calls
  // drop their control edges to it, and a dead site sends its dead token
  // along the Return's edges (FireCall): one firing and one delivery less
  // per call (fib 8 -> 7 firings per call). Main-graph Returns still fire:
  // a run may fetch them or name them as targets.
  void ForwardReturns() {
    std::vector<NodeBuild>& nodes = nodes_;
    std::vector<uint8_t> forwardable(nodes.size(), 0);
    for (NodeBuild& r : nodes) {
      if (r.kind != NodeKind::kReturn || exe_->blocks[r.block].kind != ExecBlock::Kind::kFunction ||
          !Info(r).return_edges_by_label.empty() || r.has_invariants || r.edges.empty())
        continue;
      bool local = true;
      for (const OutEdge& e : r.edges) local &= e.kind == EdgeKind::kLocal;
      forwardable[r.id] = local;
    }
    // A Return that a dead region's frontier feeds must fire to pass the
    // dead token on.
    for (const ExecBlock& blk : exe_->blocks)
      for (const DeadRegionGroup& group : blk.dead_regions)
        for (const auto& frontier : group.frontier)
          for (const OutEdge& e : frontier) forwardable[e.dst] = 0;
    // Only the callee's result and the site's Calls may feed it: every
    // result node's edge into it is replaced below (a forwarded result
    // Identity's too: a frontier may still fire it), the Calls' edges dropped.
    for (const NodeBuild& p : nodes)
      for (const OutEdge& e : p.edges)
        if (e.kind != EdgeKind::kReturn && p.kind != NodeKind::kCall) forwardable[e.dst] = 0;
    for (NodeBuild& p : nodes) {
      if (Info(p).return_edges_by_label.empty()) continue;
      bool any = false;
      for (const OutEdge& e : p.edges) any |= e.kind == EdgeKind::kReturn && forwardable[e.dst];
      if (!any) continue;
      // Rebuild p's edges, each label's range replaced in place.
      std::vector<OutEdge> edges;
      std::vector<std::pair<int32_t, int32_t>> ranges(Info(p).return_edges_by_label.size(), {0, 0});
      std::vector<int32_t> label_of(p.edges.size(), -1);
      for (size_t label = 0; label < Info(p).return_edges_by_label.size(); ++label)
        for (int32_t k = Info(p).return_edges_by_label[label].first; k < Info(p).return_edges_by_label[label].second; ++k)
          label_of[k] = static_cast<int32_t>(label);
      for (size_t k = 0; k < p.edges.size(); ++k) {
        const OutEdge& e = p.edges[k];
        const int32_t label = label_of[k];
        const int32_t begin = static_cast<int32_t>(edges.size());
        if (label >= 0 && e.kind == EdgeKind::kReturn && forwardable[e.dst]) {
          for (OutEdge f : nodes[e.dst].edges) {
            f.kind = EdgeKind::kReturn;
            f.src_port = e.src_port;
            edges.push_back(f);
          }
          Info(nodes[e.dst]).forwarded = true;
        } else {
          edges.push_back(e);
        }
        if (label < 0) continue;
        auto& range = ranges[label];
        if (range.first == range.second) range.first = begin;
        range.second = static_cast<int32_t>(edges.size());
      }
      p.edges = std::move(edges);
      Info(p).return_edges_by_label = std::move(ranges);
    }
    // The site's Calls no longer signal their forwarded Returns.
    for (NodeBuild& c : nodes) {
      if (c.kind != NodeKind::kCall) continue;
      c.edges.erase(std::remove_if(c.edges.begin(), c.edges.end(),
                                   [&](const OutEdge& e) {
                                     return e.kind == EdgeKind::kLocal && nodes[e.dst].kind == NodeKind::kReturn &&
                                            Info(nodes[e.dst]).forwarded;
                                   }),
                    c.edges.end());
    }
  }

  // A tail call's result (ack's ack(m - 1, ...), isprime's and nth's
  // recursive calls, tak's outer call) or a base case's value (tak's z)
  // reaches the function's result through Merges that only pass it on, each
  // of which would fire once per call. Instead a live value goes on to the
  // frame's caller (OutEdge::kReturnTail, Worker::ForwardTailResult), and up
  // the frame chain while that caller's result is a tail call's as well.
  // The Merges it skips never fire live: no other input of theirs can be
  // live in that frame (the branches of Conds), so they never complete and
  // fire dead either. Only edges into a Merge of a function body where each
  // Merge on the way has one local edge onward and the result Merge returns
  // its value only (no local consumer, no value_index).
  void ForwardTailResults() {
    if (exe_->mode != ExecutionMode::kStatic) return;
    std::vector<NodeBuild>& nodes = nodes_;
    // The producer of each Merge input of a function body: the node and its
    // port, or -2 for several. A forwarded node is passed over (its producer
    // has an edge of its own), except a forwarded Return: the callee's
    // result delivers in its place.
    struct Producer {
      int32_t node = -1;
      int16_t port = -1;
    };
    absl::flat_hash_map<int64_t, Producer> producers;
    auto key = [](int32_t merge, int32_t input) { return (static_cast<int64_t>(merge) << 32) | input; };
    for (const NodeBuild& p : nodes) {
      if (exe_->blocks[p.block].kind != ExecBlock::Kind::kFunction) continue;
      if (Info(p).forwarded && p.kind != NodeKind::kReturn) continue;
      for (const OutEdge& e : p.edges) {
        const NodeBuild& d = nodes[e.dst];
        if (e.kind != EdgeKind::kLocal || d.kind != NodeKind::kMerge || d.block != p.block) continue;
        auto [it, inserted] =
            producers.try_emplace(key(d.id, e.dst_slot - d.slot_base), Producer{p.id, e.pivot() ? int16_t{-1} : e.src_port});
        if (!inserted) it->second.node = -2;
      }
    }
    // When a producer's value is dead for sure: its dead regions, and for a
    // Switch's port the predicate value that selects the other port.
    auto dead_with = [&](const Producer& p) {
      std::vector<DeadWith> out;
      if (p.node < 0) return out;
      if (auto it = dead_with_.find(p.node); it != dead_with_.end()) out.insert(out.end(), it->second.begin(), it->second.end());
      if (auto it = predicate_group_of_.find(p.node); it != predicate_group_of_.end() && p.port >= 0)
        out.push_back({nodes[p.node].block, it->second, p.port});
      return out;
    };
    auto exclusive = [](const std::vector<DeadWith>& a, const std::vector<DeadWith>& b) {
      for (const DeadWith& x : a)
        for (const DeadWith& y : b)
          if (x.block == y.block && x.group == y.group && x.port != y.port) return true;
      return false;
    };
    // The result Merge that input `input` of Merge `merge` only passes on
    // to, or -1.
    auto tail_result = [&](int32_t merge, int32_t input) -> int32_t {
      for (size_t hops = 0; hops < nodes.size(); ++hops) {
        const NodeBuild& m = nodes[merge];
        if (m.kind != NodeKind::kMerge || m.has_invariants || Info(m).forwarded ||
            exe_->blocks[m.block].kind != ExecBlock::Kind::kFunction)
          return -1;
        auto mine = producers.find(key(merge, input));
        if (mine == producers.end()) return -1;
        const std::vector<DeadWith> dead = dead_with(mine->second);
        for (int32_t other = 0; other < m.num_inputs; ++other) {
          if (other == input) continue;
          auto it = producers.find(key(merge, other));
          if (it == producers.end() || !exclusive(dead, dead_with(it->second))) return -1;
        }
        if (!Info(m).return_edges_by_label.empty()) {
          for (const OutEdge& e : m.edges) {
            const bool returns_value = e.kind == EdgeKind::kReturn && e.src_port == 0;
            const bool counts_dead_only = e.kind == EdgeKind::kLocal && e.dst_mode == DstMode::kMergeMark;
            if (!returns_value && !counts_dead_only) return -1;
          }
          return merge;
        }
        if (m.edges.size() != 1) return -1;
        const OutEdge& onward = m.edges[0];
        if (onward.kind != EdgeKind::kLocal || onward.src_port != 0 || onward.dst_mode != DstMode::kMerge) return -1;
        input = onward.dst_slot - nodes[onward.dst].slot_base;
        merge = onward.dst;
      }
      return -1;
    };
    // A result node of one input whose firing would only return its value
    // (no local consumer but Merge marks): the caller's result Identity or
    // forwarded Return that an unconditional tail call's result reaches.
    auto returns_only = [&](const NodeBuild& d) {
      if (d.num_inputs != 1 || d.has_invariants || Info(d).forwarded || Info(d).result_index < 0 ||
          Info(d).return_edges_by_label.empty() || exe_->blocks[d.block].kind != ExecBlock::Kind::kFunction)
        return false;
      if (!(d.kind == NodeKind::kReturn || (d.kind == NodeKind::kKernel && d.scalar_op == ScalarOp::kIdentity)))
        return false;
      for (const OutEdge& e : d.edges) {
        const bool returns_value = e.kind == EdgeKind::kReturn && e.src_port == 0;
        const bool counts_dead_only = e.kind == EdgeKind::kLocal && e.dst_mode == DstMode::kMergeMark;
        if (!returns_value && !counts_dead_only) return false;
      }
      return true;
    };
    auto mark = [&](OutEdge& e) {
      NodeBuild& d = nodes[e.dst];
      if (e.src_port < 0 || e.pivot()) return;
      if (e.kind == EdgeKind::kReturn && e.dst_mode == DstMode::kSingle && returns_only(d)) {
        Info(d).tail_result = d.id;
        e.SetFlag(OutEdge::kReturnTail, true);
        e.dst_mode = DstMode::kSingleTail;
        return;
      }
      if (d.kind != NodeKind::kMerge || e.dst_mode != DstMode::kMerge) return;
      const int32_t result = tail_result(d.id, e.dst_slot - d.slot_base);
      if (result < 0) return;
      Info(d).tail_result = result;
      e.SetFlag(OutEdge::kReturnTail, true);
    };
    for (NodeBuild& p : nodes) {
      // A callee's result into the caller: only a label's one edge, so that
      // the delivery that ends a chain (ForwardTailResult) meets no second.
      for (const auto& range : Info(p).return_edges_by_label) {
        if (range.second - range.first == 1 && p.edges[range.first].kind == EdgeKind::kReturn)
          mark(p.edges[range.first]);
      }
      // A value of the frame itself: tak's base case z through its Switch,
      // isprime's false, nth's c.
      if (exe_->blocks[p.block].kind != ExecBlock::Kind::kFunction) continue;
      for (OutEdge& e : p.edges)
        if (e.kind == EdgeKind::kLocal && nodes[e.dst].block == p.block) mark(e);
    }
  }

  // Call sites whose invocation's results are all the caller's own results,
  // unchanged and of the same index (ExecBlock::tail_child_slots): every
  // node of the callee that delivers a result has, for the site's label,
  // one OutEdge::kReturnTail edge, and the Merges it skips lead to the
  // caller's result of that index. The caller may then hand the invocation
  // over to its own caller (Worker::HandOverTailChild).
  void MarkTailSites() {
    if (exe_->mode != ExecutionMode::kStatic) return;
    std::vector<NodeBuild>& nodes = nodes_;
    for (ExecBlock& blk : exe_->blocks) {
      if (blk.kind != ExecBlock::Kind::kFunction) continue;
      for (int32_t id : blk.nodes) {
        const int32_t index = Info(id).result_index;
        if (Info(id).return_edges_by_label.empty() || index < 0) continue;
        if (index >= static_cast<int32_t>(blk.result_nodes.size())) blk.result_nodes.resize(index + 1, -1);
        // Any such node delivers to the same places; one that fires is
        // preferred (a forwarded one keeps its edges too).
        int32_t& chosen = blk.result_nodes[index];
        if (chosen < 0 || (Info(chosen).forwarded && !Info(id).forwarded)) chosen = id;
      }
    }
    for (NodeBuild& c : nodes) {
      if (c.kind != NodeKind::kCall || Info(c).split_site || Info(c).target_block < 0) continue;
      ExecBlock& caller = exe_->blocks[c.block];
      const ExecBlock& callee = exe_->blocks[Info(c).target_block];
      if (caller.kind != ExecBlock::Kind::kFunction || callee.kind != ExecBlock::Kind::kFunction) continue;
      const int32_t label = Info(c).label;
      bool tail = false;
      for (int32_t id : callee.nodes) {
        const NodeInfo& x = Info(id);
        if (x.return_edges_by_label.empty()) continue;
        tail = x.result_index >= 0 && label < static_cast<int32_t>(x.return_edges_by_label.size());
        if (!tail) break;
        const auto [first, last] = x.return_edges_by_label[label];
        tail = last - first == 1 && nodes[id].edges[first].return_tail();
        if (!tail) break;
        const int32_t result = Info(nodes[id].edges[first].dst).tail_result;
        tail = result >= 0 && nodes[result].block == caller.id && Info(result).result_index == x.result_index &&
               x.result_index < static_cast<int32_t>(caller.result_nodes.size()) &&
               caller.result_nodes[x.result_index] >= 0;
        if (!tail) break;
      }
      Info(c).tail_site = tail;
      std::vector<int32_t>& slots = caller.tail_child_slots;
      if (tail && std::find(slots.begin(), slots.end(), Info(c).child_slot) == slots.end())
        slots.push_back(Info(c).child_slot);
    }
  }

  // A forwarded node never fires (its producers deliver past it), so slots
  // laid out for its inputs would be copied into every frame and never read:
  // it gets none unless some edge still targets it (a dead region's frontier
  // may fire a forwarded result Identity). fib's frame: 27 slots -> 17.
  // site_returns and missing_arg_merges name forwarded nodes too, but
  // DeliverDead follows a forwarded node's edges and never reads its slot.
  void CompactSlots() {
    std::vector<NodeBuild>& nodes = nodes_;
    std::vector<uint8_t> targeted(nodes.size(), 0);
    for (const NodeBuild& p : nodes)
      for (const OutEdge& e : p.edges) targeted[e.dst] = 1;
    for (const ExecBlock& blk : exe_->blocks)
      for (const DeadRegionGroup& group : blk.dead_regions)
        for (const auto& frontier : group.frontier)
          for (const OutEdge& e : frontier) targeted[e.dst] = 1;
    for (const NodeBuild& n : nodes)
      if (Info(n).dead_data_ports != 0)
        for (const auto& frontier : Info(n).lists->dead_data_frontier)
          for (const OutEdge& e : frontier) targeted[e.dst] = 1;
    std::vector<std::vector<int32_t>> new_slot(exe_->blocks.size());
    for (ExecBlock& blk : exe_->blocks) {
      std::vector<int32_t>& map = new_slot[blk.id];
      map.assign(blk.num_slots, -1);
      std::vector<uint8_t> is_prefilled(blk.num_slots, 0);
      for (const auto& [slot, value] : blk.prefilled) is_prefilled[slot] = 1;
      std::vector<uint8_t> has_prefilled(blk.nodes.size(), 0);
      for (size_t i = 0; i < blk.nodes.size(); ++i) {
        const NodeBuild& n = nodes[blk.nodes[i]];
        for (int32_t j = 0; j < n.num_inputs; ++j) has_prefilled[i] |= is_prefilled[n.slot_base + j];
      }
      // Nodes with a folded constant first: a reused frame restores its
      // constants with the counters, in one copy (Worker::NewFrame).
      int32_t next = 0;
      for (int pass = 0; pass < 2; ++pass) {
        for (size_t i = 0; i < blk.nodes.size(); ++i) {
          const int32_t id = blk.nodes[i];
          NodeBuild& n = nodes[id];
          if ((Info(n).forwarded && !targeted[id]) || (has_prefilled[i] != 0) != (pass == 0)) continue;
          for (int32_t j = 0; j < n.num_inputs; ++j) map[n.slot_base + j] = next + j;
          n.slot_base = next;
          next += n.num_inputs;
        }
        if (pass == 0) blk.prefilled_slots_end = next;
      }
      blk.num_slots = next;
      std::vector<std::pair<int32_t, Tensor>> prefilled;
      for (auto& [slot, value] : blk.prefilled)
        if (map[slot] >= 0) prefilled.push_back({map[slot], std::move(value)});
      blk.prefilled = std::move(prefilled);
    }
    auto remap = [&](int32_t node, int32_t slot) { return new_slot[nodes[node].block][slot]; };
    for (NodeBuild& n : nodes) {
      for (OutEdge& e : n.edges) e.dst_slot = remap(e.dst, e.dst_slot);
      if (Info(n).lists != nullptr) {
        for (auto& [ret, slot] : Info(n).lists->site_returns) slot = remap(ret, slot);
        for (auto& [merge, slot] : Info(n).lists->missing_arg_merges) slot = remap(merge, slot);
      }
    }
    for (ExecBlock& blk : exe_->blocks)
      for (DeadRegionGroup& group : blk.dead_regions)
        for (auto& frontier : group.frontier)
          for (OutEdge& e : frontier) e.dst_slot = remap(e.dst, e.dst_slot);
    for (NodeBuild& n : nodes)
      if (Info(n).dead_data_ports != 0)
        for (auto& frontier : Info(n).lists->dead_data_frontier)
          for (OutEdge& e : frontier) e.dst_slot = remap(e.dst, e.dst_slot);
  }

  // NodeLists::dead_data_frontier of each grouped Switch of a function body
  // (no pivot edges), on the final edges. What a taken port's dead token
  // makes dead, as BuildDeadRegions finds a branch's: an op with an input
  // from the port or from the region, a Merge whose every input comes from
  // there. Kept out, so that they fire as before: Calls, function
  // results, Switches of a group, nodes with edges out of the block, and
  // nodes of a branch region (whose own frontier may carry the same edge).
  void BuildDeadDataFrontiers() {
    std::vector<NodeBuild>& nodes = nodes_;
    // A Merge fires on its first live input: it is skipped only when every
    // edge into it comes from the region.
    std::vector<int32_t> in_edges(nodes.size(), 0);
    for (const NodeBuild& n : nodes)
      for (const OutEdge& e : n.edges) ++in_edges[e.dst];
    // Switches whose data is a gradient argument (the gradient part of a
    // split site delivers straight to it).
    std::vector<uint8_t> gradient_fed(nodes.size(), 0);
    for (const NodeBuild& n : nodes) {
      if (n.kind != NodeKind::kCall || Info(n).split_role != SplitRole::kGradient) continue;
      for (const OutEdge& e : n.edges)
        if (e.kind == EdgeKind::kCall && nodes[e.dst].kind == NodeKind::kSwitch && e.dst_slot == nodes[e.dst].slot_base)
          gradient_fed[e.dst] = 1;
    }
    for (ExecBlock& blk : exe_->blocks) {
      if (blk.kind != ExecBlock::Kind::kFunction) continue;
      const int32_t size = static_cast<int32_t>(blk.nodes.size());
      // `group`, `port`: the Switch's predicate group (BuildDeadRegions'
      // numbering) and the taken port. A node that a branch region skips
      // stays out, unless that region is the taken port's own (skipped only
      // when the port is not taken): the branch's frontier could carry one
      // of its edges too.
      auto eligible = [&](const NodeBuild& v, int32_t group, int port) {
        if (Info(v).folded || v.has_invariants || Info(v).forwarded || !Info(v).return_edges_by_label.empty())
          return false;
        if (auto it = dead_with_.find(v.id); it != dead_with_.end())
          for (const DeadWith& d : it->second)
            if (d.block != blk.id || d.group != group || d.port != port) return false;
        if (v.kind == NodeKind::kSwitch && (v.switch_group >= 0 || Info(v).has_pivot_edges)) return false;
        if (v.kind != NodeKind::kKernel && v.kind != NodeKind::kSwitch && v.kind != NodeKind::kMerge &&
            v.kind != NodeKind::kNoOutput)
          return false;
        for (const OutEdge& e : v.edges)
          if (e.kind != EdgeKind::kLocal || nodes[e.dst].block != blk.id) return false;
        return true;
      };
      // The candidates: (Switch, port) whose port edges stay in the block.
      struct Candidate {
        int32_t sw;
        int port;
        int32_t group;
        std::vector<uint8_t> in;
      };
      std::vector<Candidate> candidates;
      for (int32_t s = 0; s < size; ++s) {
        const NodeBuild& sw = nodes[blk.nodes[s]];
        if (sw.kind != NodeKind::kSwitch || sw.switch_group < 0 || Info(sw).has_pivot_edges || Info(sw).folded)
          continue;
        auto group_of = predicate_group_of_.find(sw.id);
        if (group_of == predicate_group_of_.end()) continue;
        for (int port = 0; port < 2; ++port) {
          bool local = true, some = false;
          for (const OutEdge& e : sw.edges) {
            if (e.src_port != port) continue;
            local &= e.kind == EdgeKind::kLocal && nodes[e.dst].block == blk.id;
            some = true;
          }
          if (local && some) candidates.push_back({sw.id, port, group_of->second, {}});
        }
      }
      // Regions of several Switches may all be skipped in one invocation
      // (two gradients of one Cond meeting in an AddN), and an edge must
      // leave through one frontier only: a node belongs to the first region
      // that reaches it, and the later ones stop at it (its edges are then
      // the first region's to deliver, or its own when it fires). Switches
      // of a gradient argument come first: theirs are the regions a run
      // that leaves the gradient out skips.
      std::stable_partition(candidates.begin(), candidates.end(),
                            [&](const Candidate& c) { return gradient_fed[c.sw]; });
      std::vector<uint8_t> owned(size, 0);
      for (Candidate& c : candidates) {
        std::vector<int32_t> dead_inputs(size, 0);
        for (const OutEdge& e : nodes[c.sw].edges)
          if (e.src_port == c.port) ++dead_inputs[nodes[e.dst].index];
        c.in.assign(size, 0);
        for (bool changed = true; changed;) {
          changed = false;
          for (int32_t i = 0; i < size; ++i) {
            const NodeBuild& v = nodes[blk.nodes[i]];
            if (c.in[i] || owned[i] || !eligible(v, c.group, c.port)) continue;
            const int32_t need = v.kind == NodeKind::kMerge ? std::max(1, in_edges[v.id]) : 1;
            if (dead_inputs[i] < need) continue;
            c.in[i] = 1;
            changed = true;
            for (const OutEdge& e : v.edges) ++dead_inputs[nodes[e.dst].index];
          }
        }
        for (int32_t i = 0; i < size; ++i) owned[i] |= c.in[i];
      }
      for (const Candidate& c : candidates) {
        if (std::find(c.in.begin(), c.in.end(), 1) == c.in.end()) continue;  // nothing to skip
        NodeBuild& sw = nodes[c.sw];
        std::vector<OutEdge> frontier;
        for (const OutEdge& e : sw.edges)
          if (e.src_port == c.port && !c.in[nodes[e.dst].index]) frontier.push_back(e);
        for (int32_t i = 0; i < size; ++i) {
          if (!c.in[i]) continue;
          for (const OutEdge& e : nodes[blk.nodes[i]].edges)
            if (!c.in[nodes[e.dst].index]) frontier.push_back(e);
        }
        Info(sw).mutable_lists().dead_data_frontier[c.port] = std::move(frontier);
        Info(sw).dead_data_ports |= static_cast<uint8_t>(1 << c.port);
      }
    }
  }

  // The argument Merges of function `fn` (fed by its Call nodes) with their
  // argument index.
  // Built for every function in one pass on first use (Calls' argument
  // edges are final after LinkUnit): one pass per function read every
  // node's attributes once per function (10^4 functions: 10^9 lookups).
  // An argument Merge is fed by Calls of its own function only
  // (CheckCrossing), so one `seen` serves all functions.
  const std::vector<std::pair<int32_t, int64_t>>& ArgMerges(const std::string& fn) {
    if (!arg_merges_built_) {
      arg_merges_built_ = true;
      std::vector<uint8_t> seen(nodes_.size(), 0);
      for (const NodeBuild& c : nodes_) {
        if (c.kind != NodeKind::kCall) continue;
        std::vector<std::pair<int32_t, int64_t>>& out = arg_merges_[Info(c).def->GetString("function").value_or("")];
        for (const OutEdge& e : c.edges) {
          if (e.kind != EdgeKind::kCall || nodes_[e.dst].kind != NodeKind::kMerge || seen[e.dst]) continue;
          seen[e.dst] = 1;
          out.push_back({e.dst, Info(c).def->GetIntOr("arg_index", -1)});
        }
      }
    }
    static const std::vector<std::pair<int32_t, int64_t>> kNone;
    auto it = arg_merges_.find(fn);
    return it == arg_merges_.end() ? kNone : it->second;
  }

  // The Calls and Returns of call site (block, label, function), each in
  // block order: a Call finds its site's without scanning its block (a main
  // graph of 10^4 sites read every main node's attributes 10^4 times).
  struct SiteNodes {
    std::vector<int32_t> calls, returns;
  };
  const SiteNodes& Site(int32_t block, int32_t label, const std::string& fn) {
    if (!sites_built_) {
      sites_built_ = true;
      for (const NodeBuild& o : nodes_) {  // by id: block order within each block
        if (o.kind != NodeKind::kCall && o.kind != NodeKind::kReturn) continue;
        SiteNodes& site = sites_[{o.block, Info(o).label, Info(o).def->GetString("function").value_or("")}];
        (o.kind == NodeKind::kCall ? site.calls : site.returns).push_back(o.id);
      }
    }
    return sites_.at({block, label, fn});
  }

  // See DeadRegionGroup (executable.h). Only function bodies: recursion is
  // where dead branches are fired over and over (one per call), and loop
  // bodies keep TensorFlow's dead exiting iteration, which tests observe.
  // `skip`: install the groups (SessionOptions::skip_dead_branches); else
  // only record which nodes each group's ports make dead.
  void BuildDeadRegions(ExecBlock& blk, bool skip) {
    std::vector<NodeBuild>& nodes = nodes_;
    const int32_t size = static_cast<int32_t>(blk.nodes.size());
    struct In {
      int32_t src;   // block index
      int16_t port;  // -1: control
      int32_t input; // input index at the destination
    };
    // Local inputs of every node (by block index) and how many inputs came
    // from elsewhere (arguments, results of calls).
    std::vector<std::vector<In>> ins(size);
    for (int32_t i = 0; i < size; ++i) {
      const NodeBuild& u = nodes[blk.nodes[i]];
      for (const OutEdge& e : u.edges) {
        if (e.kind != EdgeKind::kLocal) continue;
        const NodeBuild& d = nodes[e.dst];
        if (d.block != blk.id) continue;
        ins[d.index].push_back({i, e.src_port, e.dst_slot - d.slot_base});
      }
    }
    auto eligible = [&](const NodeBuild& n) {
      if (Info(n).folded || n.has_invariants || !Info(n).return_edges_by_label.empty()) return false;
      switch (n.kind) {
        case NodeKind::kKernel:
        case NodeKind::kSwitch:
        case NodeKind::kNoOutput:
        case NodeKind::kMerge:
        case NodeKind::kReturn:
        case NodeKind::kInvoke:  // dynamic mode: a dead Invoke only passes dead on
          return true;
        case NodeKind::kCall:  // a site joins whole, both parts of a split site included (joins())
          return true;
        default:
          return false;
      }
    };
    // Calls and Returns of each call site (by a Call of the site).
    std::map<int32_t, std::vector<int32_t>> site_of_return;  // Return index -> the site's Call indices
    for (int32_t i = 0; i < size; ++i) {
      const NodeBuild& n = nodes[blk.nodes[i]];
      if (n.kind != NodeKind::kCall) continue;
      std::vector<int32_t> calls;
      for (int32_t c : Info(n).site_calls()) calls.push_back(nodes[c].index);
      if (calls.empty()) calls.push_back(i);
      for (const auto& [ret, slot] : Info(n).site_returns()) site_of_return[nodes[ret].index] = calls;
    }
    // Groups: Switches by predicate producer (block index, port).
    std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> by_pred;
    for (int32_t i = 0; i < size; ++i) {
      const NodeBuild& n = nodes[blk.nodes[i]];
      if (n.kind != NodeKind::kSwitch || n.has_invariants || n.num_data_inputs != 2) continue;
      for (const In& in : ins[i]) {
        if (in.input == 1 && in.port >= 0) by_pred[{in.src, in.port}].push_back(i);  // the predicate's producer
      }
    }
    struct Region {
      int32_t group;
      int32_t port;
      std::vector<uint8_t> in;
    };
    std::vector<std::vector<int32_t>> groups;
    for (auto& [key, members] : by_pred) groups.push_back(members);
    std::vector<uint8_t> enabled(groups.size(), 1);
    std::vector<Region> regions;
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<uint8_t> member(size, 0);
      for (int32_t m : groups[g]) member[m] = 1;
      for (int32_t port = 0; port < 2; ++port) {
        Region r{static_cast<int32_t>(g), port, std::vector<uint8_t>(size, 0)};
        auto dead_input = [&](const In& in) { return r.in[in.src] || (member[in.src] && in.port == port); };
        auto joins = [&](int32_t v) {
          const NodeBuild& n = nodes[blk.nodes[v]];
          if (!eligible(n)) return false;
          if (n.kind == NodeKind::kMerge) {
            if (static_cast<int32_t>(ins[v].size()) != n.num_inputs) return false;
            for (const In& in : ins[v])
              if (!dead_input(in)) return false;
            return true;
          }
          if (n.kind == NodeKind::kReturn) {
            auto it = site_of_return.find(v);
            if (it == site_of_return.end()) return false;
            for (int32_t c : it->second)
              if (!r.in[c]) return false;
            return true;
          }
          bool any = false;
          for (const In& in : ins[v]) any |= dead_input(in);
          if (!any || n.kind != NodeKind::kCall) return any;
          // A call site joins whole: every argument's Call is dead.
          for (int32_t c : Info(n).site_calls()) {
            const int32_t ci = nodes[c].index;
            if (ci == v) continue;
            bool dead = false;
            for (const In& in : ins[ci]) dead |= dead_input(in);
            if (!dead || !eligible(nodes[c])) return false;
          }
          return true;
        };
        // Fixpoint: bodies are small and regions nest, so a few passes do.
        for (bool changed = true; changed;) {
          changed = false;
          for (int32_t v = 0; v < size; ++v) {
            if (r.in[v] || !joins(v)) continue;
            r.in[v] = 1;
            changed = true;
            const NodeBuild& n = nodes[blk.nodes[v]];
            if (n.kind == NodeKind::kCall) {
              for (int32_t c : Info(n).site_calls()) r.in[nodes[c].index] = 1;
            }
          }
        }
        // A member inside its own region would never fire: no jump for it.
        for (int32_t m : groups[g]) enabled[g] &= !r.in[m];
        // Which nodes a predicate value makes dead is a fact of the graph,
        // whether the group jumps or not (ForwardExclusiveResultMerges).
        for (int32_t v = 0; v < size; ++v)
          if (r.in[v]) dead_with_[blk.nodes[v]].push_back({blk.id, static_cast<int32_t>(g), port});
        regions.push_back(std::move(r));
      }
      for (int32_t m : groups[g]) predicate_group_of_[blk.nodes[m]] = static_cast<int32_t>(g);
    }
    if (!skip) return;
    // Overlapping regions must nest group-wise: a group partly inside
    // another group's region could wait forever for a member that never
    // fires, and two unrelated regions could both deliver one frontier edge.
    for (bool changed = true; changed;) {
      changed = false;
      for (const Region& a : regions) {
        if (!enabled[a.group]) continue;
        for (size_t g = 0; g < groups.size(); ++g) {
          if (!enabled[g] || static_cast<int32_t>(g) == a.group) continue;
          int32_t inside = 0;
          for (int32_t m : groups[g]) inside += a.in[m];
          bool nested = inside == static_cast<int32_t>(groups[g].size());
          if (inside > 0 && !nested) {
            enabled[g] = 0;
            changed = true;
            continue;
          }
          if (nested) continue;
          // Unrelated groups: their regions must not share a node unless
          // a's group lies inside g's region.
          for (const Region& b : regions) {
            if (b.group != static_cast<int32_t>(g)) continue;
            bool a_inside_b = true;
            for (int32_t m : groups[a.group]) a_inside_b &= b.in[m] != 0;
            if (a_inside_b) continue;
            for (int32_t v = 0; v < size; ++v) {
              if (a.in[v] && b.in[v]) {
                enabled[g] = 0;
                changed = true;
                break;
              }
            }
            if (!enabled[g]) break;
          }
        }
      }
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!enabled[g]) continue;
      bool any = false;
      for (const Region& r : regions) any |= r.group == static_cast<int32_t>(g) && std::count(r.in.begin(), r.in.end(), 1) > 0;
      if (!any) continue;  // nothing to skip
      DeadRegionGroup drg;
      drg.members = static_cast<int32_t>(groups[g].size());
      drg.counter_index = size + static_cast<int32_t>(blk.dead_regions.size());
      std::vector<uint8_t> member(size, 0);
      for (int32_t m : groups[g]) member[m] = 1;
      bool local = true;  // every frontier edge stays in the frame (else: no skipping)
      for (const Region& r : regions) {
        if (r.group != static_cast<int32_t>(g)) continue;
        for (int32_t u = 0; u < size; ++u) {
          if (!r.in[u] && !member[u]) continue;
          for (const OutEdge& e : nodes[blk.nodes[u]].edges) {
            if (e.kind == EdgeKind::kCall && r.in[u]) continue;  // a skipped call site has no invocation
            if (!r.in[u] && e.src_port != r.port) continue;  // a member's other port and control edges
            local &= e.kind == EdgeKind::kLocal && nodes[e.dst].block == blk.id;
            if (nodes[e.dst].block == blk.id && r.in[nodes[e.dst].index]) continue;
            drg.frontier[r.port].push_back(e);
          }
        }
      }
      if (!local) continue;
      for (int32_t m : groups[g]) nodes[blk.nodes[m]].switch_group = static_cast<int32_t>(blk.dead_regions.size());
      blk.dead_regions.push_back(std::move(drg));
    }
  }

  void Layout(ExecBlock& blk) {
    blk.pending_template.assign(blk.nodes.size() + blk.dead_regions.size(), 0);
    for (size_t i = 0; i < blk.nodes.size(); ++i) blk.pending_template[i] = nodes_[blk.nodes[i]].pending_init;
    for (const DeadRegionGroup& g : blk.dead_regions) blk.pending_template[g.counter_index] = g.members;
    size_t off = AlignUp(sizeof(Frame), 16);
    blk.pending_offset = off;
    off = AlignUp(off + sizeof(std::atomic<int32_t>) * blk.pending_template.size(), 16);
    blk.children_offset = off;
    off = AlignUp(off + sizeof(runtime::ChildSlot) * blk.num_child_slots, 16);
    blk.slots_offset = off;
    off = AlignUp(off + sizeof(Token) * blk.num_slots, 16);
    blk.args_offset = off;
    off = AlignUp(off + sizeof(Token) * blk.num_args, 64);
    blk.frame_bytes = off;
    // A small frame whose folded constants are inline scalars starts as a
    // copy of one image (pending counts, empty child slots and tokens, the
    // constants): one memcpy per invocation or iteration.
    constexpr size_t kMaxImageBytes = 8192;
    bool inline_constants = true;
    for (const auto& [slot, value] : blk.prefilled) inline_constants &= value.is_inline_scalar();
    blk.image.clear();
    if (inline_constants && blk.frame_bytes <= kMaxImageBytes) {
      blk.image.assign(blk.frame_bytes - blk.pending_offset, 0);
      if (!blk.pending_template.empty())  // an empty block's is null: no memcpy from it
        std::memcpy(blk.image.data(), blk.pending_template.data(), sizeof(int32_t) * blk.pending_template.size());
      for (const auto& [slot, value] : blk.prefilled) {
        char* at = blk.image.data() + (blk.slots_offset - blk.pending_offset) + sizeof(Token) * slot;
        std::memcpy(at, static_cast<const void*>(&value), sizeof(Tensor));  // an inline scalar owns nothing
      }
    }
  }

  ExecutableGraph* exe_;
  const SessionOptions& options_;
  std::vector<NodeBuild> nodes_;  // by global id
  // Node id -> the (block, predicate group, Switch port) whose dead port
  // makes the node dead (BuildDeadRegions).
  struct DeadWith {
    int32_t block, group, port;
  };
  absl::flat_hash_map<int32_t, std::vector<DeadWith>> dead_with_;
  // Switch id -> its predicate group in its block (BuildDeadRegions).
  absl::flat_hash_map<int32_t, int32_t> predicate_group_of_;
  int64_t num_call_return_nodes_ = 0;
  std::vector<Unit> units_;
  absl::flat_hash_map<std::string, int32_t> op_ids_;
  std::map<std::string, int32_t> function_blocks_;
  std::map<std::string, int32_t> invoke_sites_;
  std::map<int32_t, std::map<std::string, int32_t>> child_slots_;
  std::map<std::string, std::vector<std::pair<int32_t, int64_t>>> arg_merges_;
  bool arg_merges_built_ = false;
  absl::flat_hash_map<std::tuple<int32_t, int32_t, std::string>, SiteNodes> sites_;
  bool sites_built_ = false;
  std::vector<int32_t> call_read_by_;  // Call id -> the last Merge that read it (CheckCrossing)
};

// Dynamic mode: a part of a split call site (an Invoke with partial_args or
// partial_results: AddGradients pairs the forward and backward calls of
// f_ext this way) shares one invocation with its other parts, which the
// dynamic baseline, instantiating a whole call per Invoke, cannot do.
absl::Status CheckWholeCalls(const std::vector<NodeDef>& nodes) {
  for (const NodeDef& def : nodes) {
    if (def.op != "Invoke") continue;
    for (absl::string_view attr : {"partial_args", "partial_results"}) {
      if (def.FindAttr(attr) == nullptr) continue;
      return NodeError(def, absl::StatusCode::kUnimplemented,
                       absl::StrCat("calls '", def.GetString("function").value_or("?"),
                                    "' as one part of a split call site (", attr,
                                    "), as AddGradients pairs a call's forward and backward parts; "
                                    "ExecutionMode::kDynamic does not support split call sites, use "
                                    "ExecutionMode::kStatic"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutableGraph>> Compile(Graph graph, ExecutionMode mode,
                                                         const SessionOptions& options) {
  auto exe = std::make_unique<ExecutableGraph>();
  exe->graph = std::move(graph);
  exe->mode = mode;
  Compiler compiler(exe.get(), options);
  if (mode == ExecutionMode::kDynamic) TDF_RETURN_IF_ERROR(CheckWholeCalls(exe->graph.node));
  TDF_RETURN_IF_ERROR(compiler.AddUnit(exe->graph.node, ""));
  if (mode == ExecutionMode::kDynamic) {
    for (const auto& [name, fn] : exe->graph.library.functions()) {
      if (!fn.defined) continue;
      absl::Status s = CheckWholeCalls(fn.node);
      if (s.ok()) s = compiler.AddUnit(fn.node, name);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat("in function '", name, "': ", s.message()));
    }
  }
  TDF_RETURN_IF_ERROR(compiler.Link());
  exe->main_index = compiler.TakeMainIndex();
  std::vector<NodeBuild> nodes = compiler.TakeNodes();
  size_t total_edges = 0;
  for (const NodeBuild& n : nodes) total_edges += n.edges.size();
  exe->edge_pool.reserve(total_edges);
  exe->nodes.reserve(nodes.size());
  for (NodeBuild& n : nodes) {
    n.out_begin = exe->edge_pool.data() + exe->edge_pool.size();
    n.num_out = static_cast<int32_t>(n.edges.size());
    exe->edge_pool.insert(exe->edge_pool.end(), n.edges.begin(), n.edges.end());
    std::vector<OutEdge>().swap(n.edges);  // the pool has them: peak memory
    exe->nodes.push_back(static_cast<const ExecNode&>(n));
  }
  for (const NodeInfo& info : exe->info) {
    if (info.def == nullptr) continue;
    std::vector<std::string> names = {info.def->device};
    if (info.def->op == "CopyToDevice") names.push_back(info.def->GetString("device").value_or(""));
    for (const std::string& name : names) {
      absl::StatusOr<Device> d = Device::Parse(name);
      if (d.ok() && !d->is_cpu() && std::find(exe->gpu_devices.begin(), exe->gpu_devices.end(), *d) == exe->gpu_devices.end())
        exe->gpu_devices.push_back(*d);
    }
  }
  return exe;
}

}  // namespace runtime
}  // namespace tdf
