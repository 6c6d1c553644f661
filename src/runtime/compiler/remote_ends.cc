// Compiler step: the ends of cut edges in a partition of a distributed
// graph (tdf/partition.h, docs/distributed.md).
// Requires: linked units (Enters know their loops). Ensures: each Send and
// Recv in ExecutableGraph::remote_ends, the Recvs by key; per block the
// arrivals each of its frames expects (ExecBlock::remote_expected) and the
// loops below it that a token's label path may name (remote_loops), with
// their child slots, even where no local Enter made one; a loop whose
// NextIteration is on another rank has its LoopCond made a
// kRemoteLoopCond; cut loops have no iteration window; call sites have
// their wire labels. Does nothing for graphs without Send and Recv.
// Pinned by tests/distributed/session_test.cc (under mpirun).
#include <climits>

#include "absl/strings/str_cat.h"
#include "runtime/compiler/compiler.h"
#include "tdf/partition.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

absl::Status Compiler::AddRemoteEnd(NodeBuild& n, ExecBlock& blk) {
  const NodeDef& def = *Info(n).def;
  ExecutableGraph::RemoteEnd end;
  end.node = n.id;
  TDF_ASSIGN_OR_RETURN(end.key, def.GetInt("key"));
  TDF_ASSIGN_OR_RETURN(int64_t peer, def.GetInt(n.kind == NodeKind::kSend ? "recv_rank" : "send_rank"));
  end.peer_rank = static_cast<int32_t>(peer);
  end.control = def.GetBoolOr("control", false);
  if (!end.control) {
    TDF_ASSIGN_OR_RETURN(end.dtype, def.GetType("T"));
  }
  Info(n).io_index = static_cast<int32_t>(exe_->remote_ends.size());
  if (n.kind == NodeKind::kRecv) {
    if (!exe_->recv_by_key.emplace(end.key, Info(n).io_index).second)
      return NodeError(def, absl::StatusCode::kInvalidArgument, absl::StrCat("key ", end.key, " names two Recv nodes"));
    ++blk.remote_expected;
  }
  exe_->remote_ends.push_back(end);
  return absl::OkStatus();
}

absl::Status Compiler::LinkRemoteLoops() {
  if (exe_->remote_ends.empty()) return absl::OkStatus();
  const size_t num_blocks = exe_->blocks.size();
  std::vector<uint8_t> has_ends(num_blocks, 0), has_next(num_blocks, 0);
  std::vector<int32_t> loop_cond(num_blocks, -1);
  for (const NodeBuild& n : nodes_) {
    if (n.kind == NodeKind::kSend || n.kind == NodeKind::kRecv) has_ends[n.block] = 1;
    if (n.kind == NodeKind::kNextIteration) has_next[n.block] = 1;
    if (Info(n).def->op == "LoopCond") loop_cond[n.block] = n.id;
  }
  for (size_t b = 0; b < num_blocks; ++b) {
    ExecBlock& blk = exe_->blocks[b];
    if (blk.kind != ExecBlock::Kind::kLoop || blk.nodes.empty()) continue;
    const bool started_here = blk.num_enters + blk.num_invariants > 0;
    // Only loops that tokens cross, or that only tokens start, need labels.
    if (!has_ends[b] && started_here) continue;
    if (loop_cond[b] < 0)
      return NodeError(*Info(nodes_[blk.nodes[0]]).def, absl::StatusCode::kUnimplemented,
                       absl::StrCat("loop '", blk.name, "' is cut across ranks but has no LoopCond on this rank"));
    NodeBuild& cond = nodes_[loop_cond[b]];
    TDF_ASSIGN_OR_RETURN(blk.wire_id, Info(cond).def->GetInt(kFrameIdAttr));
    if (blk.parent < 0) return absl::InternalError(absl::StrCat("loop '", blk.name, "' has no enclosing block"));
    const int32_t slot = ChildSlot(blk.parent, ChildKind::kLoop, b, 0);
    ExecBlock& parent = exe_->blocks[blk.parent];
    parent.remote_loops.push_back({blk.wire_id, static_cast<int32_t>(b), slot, started_here});
    // A loop no local Enter starts: each frame of the enclosing block
    // expects its instance, which its first token creates.
    if (!started_here) ++parent.remote_expected;
    // Iterations are created as their tokens or predicates come, not
    // bounded by a window (docs/distributed.md, "Known limits").
    blk.parallel_iterations = INT_MAX;
    if (!has_next[b]) cond.kind = NodeKind::kRemoteLoopCond;
  }
  for (NodeBuild& n : nodes_)
    if (n.kind == NodeKind::kEnter && Info(n).target_block >= 0 &&
        exe_->blocks[Info(n).target_block].parallel_iterations == INT_MAX)
      Info(n).parallel_iterations = INT_MAX;
  // Call sites: their label on the wire is the Calls' _frame_id. Every
  // rank that takes part in the callee holds every Call of the site, so
  // invocations are always created by local Calls; a token that comes
  // first waits for them (Worker::FrameOfPath).
  for (const NodeBuild& n : nodes_) {
    if (n.kind != NodeKind::kCall || Info(n).child_slot < 0) continue;
    const int64_t fid = Info(n).def->GetIntOr(kFrameIdAttr, -1);
    if (fid < 0) continue;
    ExecBlock& parent = exe_->blocks[n.block];
    bool known = false;
    for (const ExecBlock::RemoteLoop& r : parent.remote_loops) known |= r.is_call && r.child_slot == Info(n).child_slot;
    if (!known) parent.remote_loops.push_back({fid, Info(n).target_block, Info(n).child_slot, true, true});
  }
  return absl::OkStatus();
}

}  // namespace runtime
}  // namespace tdf
