// Compiler step: slot layout. Requires: every step that changes edges.
// Ensures: forwarded nodes keep no slots; each block's frame layout
// (pending counters, child slots, token slots, arguments) and, for small
// frames, the image a new frame is copied from. Always on. Pinned by
// tests/runtime/frame_reuse_test.cc.
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

// A forwarded node never fires (its producers deliver past it), so slots
// laid out for its inputs would be copied into every frame and never read:
// it gets none unless some edge still targets it (a dead region's frontier
// may fire a forwarded result Identity). fib's frame: 27 slots -> 17.
// site_returns and missing_arg_merges name forwarded nodes too, but
// DeliverDead follows a forwarded node's edges and never reads its slot.
void Compiler::CompactSlots() {
  std::vector<NodeBuild>& nodes = nodes_;
  // What the step reads of each node's NodeInfo, read in one pass: each
  // loop below that read it again was one more pass of cache misses over
  // the 256-byte records of a large graph.
  enum : uint8_t { kTargeted = 1, kForwarded = 2, kDeadData = 4, kLists = 8 };
  std::vector<uint8_t> flags(nodes.size(), 0);
  for (const NodeBuild& n : nodes) {
    const NodeInfo& info = Info(n);
    flags[n.id] |= (info.forwarded ? kForwarded : 0) | (info.dead_data_ports != 0 ? kDeadData : 0) |
                   (info.lists != nullptr ? kLists : 0);
    for (const OutEdge& e : n.edges) flags[e.dst] |= kTargeted;
    if (info.dead_data_ports != 0)
      for (const auto& frontier : info.lists->dead_data_frontier)
        for (const OutEdge& e : frontier) flags[e.dst] |= kTargeted;
  }
  for (const ExecBlock& blk : exe_->blocks)
    for (const DeadRegionGroup& group : blk.dead_regions)
      for (const auto& frontier : group.frontier)
        for (const OutEdge& e : frontier) flags[e.dst] |= kTargeted;
  // Every block's slot map in one vector (block b's at slot_begin[b]),
  // and the per-block flags in buffers reused across blocks: a static
  // graph has a block per function, and vectors per block were most of
  // this step's allocations (10^4 functions: 10^5 of them).
  std::vector<size_t> slot_begin(exe_->blocks.size() + 1, 0);
  for (const ExecBlock& blk : exe_->blocks) slot_begin[blk.id + 1] = blk.num_slots;
  for (size_t b = 0; b < exe_->blocks.size(); ++b) slot_begin[b + 1] += slot_begin[b];
  std::vector<int32_t> new_slot(slot_begin.back(), -1);
  // Per node, where its block's map starts: remapping an edge reads this
  // dense array instead of the destination's NodeBuild. A graph of one
  // block (a large call-free one) needs none: not held at its peak.
  const bool one_block = exe_->blocks.size() == 1;
  std::vector<uint32_t> map_of_node(one_block ? 0 : nodes.size());
  if (!one_block)
    for (const NodeBuild& n : nodes) map_of_node[n.id] = static_cast<uint32_t>(slot_begin[n.block]);
  std::vector<uint8_t> is_prefilled, has_prefilled;
  std::vector<std::pair<int32_t, Tensor>> prefilled;
  for (ExecBlock& blk : exe_->blocks) {
    int32_t* map = new_slot.data() + slot_begin[blk.id];
    has_prefilled.assign(blk.nodes.size(), 0);
    if (!blk.prefilled.empty()) {
      is_prefilled.assign(blk.num_slots, 0);
      for (const auto& [slot, value] : blk.prefilled) is_prefilled[slot] = 1;
      for (size_t i = 0; i < blk.nodes.size(); ++i) {
        const NodeBuild& n = nodes[blk.nodes[i]];
        for (int32_t j = 0; j < n.num_inputs; ++j) has_prefilled[i] |= is_prefilled[n.slot_base + j];
      }
    }
    // Nodes with a folded constant first: a reused frame restores its
    // constants with the counters, in one copy (Worker::NewFrame).
    int32_t next = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < blk.nodes.size(); ++i) {
        const int32_t id = blk.nodes[i];
        if (((flags[id] & kForwarded) && !(flags[id] & kTargeted)) || (has_prefilled[i] != 0) != (pass == 0))
          continue;
        NodeBuild& n = nodes[id];
        for (int32_t j = 0; j < n.num_inputs; ++j) map[n.slot_base + j] = next + j;
        n.slot_base = next;
        next += n.num_inputs;
      }
      if (pass == 0) blk.prefilled_slots_end = next;
    }
    blk.num_slots = next;
    if (blk.prefilled.empty()) continue;
    prefilled.clear();
    for (auto& [slot, value] : blk.prefilled)
      if (map[slot] >= 0) prefilled.push_back({map[slot], std::move(value)});
    // Kept in place, at their size: the scratch keeps its capacity.
    blk.prefilled.assign(std::make_move_iterator(prefilled.begin()), std::make_move_iterator(prefilled.end()));
  }
  auto remap = [&](int32_t node, int32_t slot) { return new_slot[(one_block ? 0 : map_of_node[node]) + slot]; };
  for (NodeBuild& n : nodes) {
    for (OutEdge& e : n.edges) e.dst_slot = remap(e.dst, e.dst_slot);
    if (!(flags[n.id] & kLists)) continue;
    NodeLists& lists = *Info(n).lists;
    for (auto& [ret, slot] : lists.site_returns) slot = remap(ret, slot);
    for (auto& [merge, slot] : lists.missing_arg_merges) slot = remap(merge, slot);
    if (flags[n.id] & kDeadData)
      for (auto& frontier : lists.dead_data_frontier)
        for (OutEdge& e : frontier) e.dst_slot = remap(e.dst, e.dst_slot);
  }
  for (ExecBlock& blk : exe_->blocks)
    for (DeadRegionGroup& group : blk.dead_regions)
      for (auto& frontier : group.frontier)
        for (OutEdge& e : frontier) e.dst_slot = remap(e.dst, e.dst_slot);
}

void Compiler::Layout(ExecBlock& blk) {
  blk.pending_template.assign(blk.nodes.size() + blk.dead_regions.size(), 0);
  for (size_t i = 0; i < blk.nodes.size(); ++i) blk.pending_template[i] = nodes_[blk.nodes[i]].pending_init;
  for (const DeadRegionGroup& g : blk.dead_regions) blk.pending_template[g.counter_index] = g.members;
  size_t off = kPendingOffset;  // Frame::pending() counts on it
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

}  // namespace runtime
}  // namespace tdf
