// Compiler step: constant folding.
// Requires: linked units. Ensures: a function body's sourceless scalar
// Consts are gone from the firing path: their values sit in their
// consumers' slots in the frame image (ExecBlock::prefilled), and those
// consumers wait for one input less. Always on. Pinned by
// tests/runtime/scalar_ops_test.cc and frame_reuse_test.cc.
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

// A function body's sourceless scalar Consts would fire once per
// invocation; instead their values are written into their consumers' slots
// when the frame is created, and the consumers wait for one input less.
absl::Status Compiler::FoldConstants(const Unit& unit) {
  std::vector<NodeBuild>& nodes = nodes_;
  for (int32_t id : unit.ids) {
    NodeBuild& n = nodes[id];
    // The NodeBuild's fields first: its NodeDef is a cache miss per node of a large graph.
    if (n.num_inputs != 0 || n.edges.empty()) continue;
    ExecBlock& blk = exe_->blocks[n.block];
    if (blk.kind != ExecBlock::Kind::kFunction || absl::string_view(Info(n).def->op) != "Const") continue;
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

}  // namespace runtime
}  // namespace tdf
