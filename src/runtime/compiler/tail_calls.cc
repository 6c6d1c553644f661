// Compiler step: tail calls. Requires: forwarded values.
// Ensures: a live value that would only be passed on to a function's
// result (through Merges or into the result node itself) goes to the
// frame's caller (OutEdge::kReturnTail); call sites whose results are all
// the caller's are tail sites, whose caller's frame is handed over to its
// callee once its own work is done. Turned off by
// SessionOptions::release_tail_callers (the hand-over) and
// forward_call_values (both). Pinned by tests/runtime/tail_results_test.cc,
// acceptance_regressions_test.cc and many_functions_test.cc (nested Conds).
#include "base/hash_tables.h"
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

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
void Compiler::ForwardTailResults() {
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
  base::FlatHashMap<int64_t, Producer> producers;
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
    if (auto it = predicate_group_of_.find(p.node); it != predicate_group_of_.end() && p.port >= 0) {
      const int32_t block = nodes[p.node].block;
      out.push_back({block, it->second, p.port, RegionId(block, it->second, p.port)});
    }
    return out;
  };
  // What input `input` of Merge `merge` leads to, by its own checks: -1
  // (no tail result), the result Merge itself, or -2: on to `next`.
  struct Step {
    int32_t result;
    int32_t next_merge = -1, next_input = -1;
  };
  auto step = [&](int32_t merge, int32_t input) -> Step {
    const NodeBuild& m = nodes[merge];
    if (m.kind != NodeKind::kMerge || m.has_invariants || Info(m).forwarded ||
        exe_->blocks[m.block].kind != ExecBlock::Kind::kFunction)
      return {-1};
    auto mine = producers.find(key(merge, input));
    if (mine == producers.end()) return {-1};
    const std::vector<DeadWith> dead = dead_with(mine->second);
    for (int32_t other = 0; other < m.num_inputs; ++other) {
      if (other == input) continue;
      auto it = producers.find(key(merge, other));
      if (it == producers.end() || !ExclusiveDeadWith(dead, dead_with(it->second))) return {-1};
    }
    if (!Info(m).return_edges_by_label.empty()) {
      for (const OutEdge& e : m.edges) {
        const bool returns_value = e.kind == EdgeKind::kReturn && e.src_port == 0;
        const bool counts_dead_only = e.kind == EdgeKind::kLocal && e.dst_mode == DstMode::kMergeMark;
        if (!returns_value && !counts_dead_only) return {-1};
      }
      return {merge};
    }
    if (m.edges.size() != 1) return {-1};
    const OutEdge& onward = m.edges[0];
    if (onward.kind != EdgeKind::kLocal || onward.src_port != 0 || onward.dst_mode != DstMode::kMerge) return {-1};
    return {-2, onward.dst, onward.dst_slot - nodes[onward.dst].slot_base};
  };
  // The result Merge that input `input` of Merge `merge` only passes on
  // to, or -1. Remembered per (Merge, input): the values of nested Conds
  // share the Merges on their way, and walking them from each value again
  // was quartic in the depth. (A cycle, which validation rejects, ends
  // in -1, as the walk bounded by the node count did.)
  base::FlatHashMap<int64_t, int32_t> tail_of;  // -3: on the walk being made
  std::vector<int64_t> walk;
  auto tail_result = [&](int32_t merge, int32_t input) -> int32_t {
    walk.clear();
    int32_t result = -1;
    for (;;) {
      auto [it, inserted] = tail_of.try_emplace(key(merge, input), -3);
      if (!inserted) {
        result = it->second == -3 ? -1 : it->second;
        break;
      }
      walk.push_back(key(merge, input));
      const Step s = step(merge, input);
      if (s.result != -2) {
        result = s.result;
        break;
      }
      merge = s.next_merge;
      input = s.next_input;
    }
    for (int64_t k : walk) tail_of[k] = result;
    return result;
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
void Compiler::MarkTailSites() {
  if (exe_->mode != ExecutionMode::kStatic) return;
  std::vector<NodeBuild>& nodes = nodes_;
  // Per function block, its nodes with Return edges, in block order: each
  // Call reads its callee's, not the callee's every node. One list, block
  // after block (a vector per block was an allocation per function).
  std::vector<int32_t> delivering_begin(exe_->blocks.size() + 1, 0), delivering;
  for (ExecBlock& blk : exe_->blocks) {
    delivering_begin[blk.id] = static_cast<int32_t>(delivering.size());
    if (blk.kind != ExecBlock::Kind::kFunction) continue;
    for (int32_t id : blk.nodes) {
      if (!Info(id).return_edges_by_label.empty()) delivering.push_back(id);
      const int32_t index = Info(id).result_index;
      if (Info(id).return_edges_by_label.empty() || index < 0) continue;
      if (index >= static_cast<int32_t>(blk.result_nodes.size())) blk.result_nodes.resize(index + 1, -1);
      // Any such node delivers to the same places; one that fires is
      // preferred (a forwarded one keeps its edges too).
      int32_t& chosen = blk.result_nodes[index];
      if (chosen < 0 || (Info(chosen).forwarded && !Info(id).forwarded)) chosen = id;
    }
  }
  delivering_begin[exe_->blocks.size()] = static_cast<int32_t>(delivering.size());
  for (NodeBuild& c : nodes) {
    if (c.kind != NodeKind::kCall || Info(c).split_site || Info(c).target_block < 0) continue;
    ExecBlock& caller = exe_->blocks[c.block];
    const ExecBlock& callee = exe_->blocks[Info(c).target_block];
    if (caller.kind != ExecBlock::Kind::kFunction || callee.kind != ExecBlock::Kind::kFunction) continue;
    const int32_t label = Info(c).label;
    bool tail = false;
    for (int32_t k = delivering_begin[callee.id]; k < delivering_begin[callee.id + 1]; ++k) {
      const int32_t id = delivering[k];
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

}  // namespace runtime
}  // namespace tdf
