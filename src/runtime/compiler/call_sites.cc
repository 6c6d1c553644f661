// Compiler step: call-site tables, kernels and devices (FinishUnit).
// Requires: linked units. Ensures: per call site its Calls, Returns and
// argument Merges (NodeInfo::site_calls, site_returns), split forward and
// gradient parts (AddGradients' pairs), the per-node kernels and device
// contexts. Rejects Calls that feed no argument Merge or disagree on an
// index. Always on. Pinned by tests/runtime/call_site_race_test.cc,
// mutated_graphs_test.cc and many_functions_test.cc.
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "cuda/device_backend.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/partition.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

absl::Status Compiler::FinishUnit(const Unit& unit) {
  std::vector<NodeBuild>& nodes = nodes_;
  for (int32_t id : unit.ids) {
    NodeBuild& n = nodes[id];
    ExecBlock& blk = exe_->blocks[n.block];
    const NodeDef& def = *Info(n).def;
    // Sources fire when a frame of the block is created; in a loop body that
    // includes nodes whose only inputs are loop invariants.
    // A Recv has no inputs but is no source: its token arrives from
    // another rank (each frame of its block expects it).
    if (!Info(n).folded && n.kind != NodeKind::kRecv &&
        (n.num_inputs == 0 || (n.pending_init == 0 && n.kind != NodeKind::kMerge)))
      blk.sources.push_back(id);
    switch (n.kind) {
      case NodeKind::kSend:
      case NodeKind::kRecv:
        TDF_RETURN_IF_ERROR(AddRemoteEnd(n, blk));
        break;
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
        const absl::string_view fn = Callee(id);
        if (fn.empty()) TDF_RETURN_IF_ERROR(def.GetString("function").status());
        auto fit = function_blocks_.find(fn);
        if (fit == function_blocks_.end())
          return NodeError(def, absl::StatusCode::kInvalidArgument,
                           absl::StrCat("calls function '", fn, "' whose body is not in the graph"));
        Info(n).target_block = fit->second;
        Info(n).child_slot = ChildSlot(n.block, ChildKind::kCall, fit->second, Info(n).label);
        const SiteNodes& site = Site(n.block, Info(n).label, fn);
        const int32_t calls = static_cast<int32_t>(site.calls.size());
        if (!site.returns.empty()) Info(n).mutable_lists().site_returns.reserve(site.returns.size());
        for (int32_t ret : site.returns) Info(n).mutable_lists().site_returns.push_back({ret, nodes[ret].slot_base});
        Info(n).site_num_calls = calls;
        if (calls > 1) blk.child_fed_by_several[Info(n).child_slot] = 1;
        Info(n).site_call_nodes.reserve(site.calls.size());
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
          // Names compared in place: a string built per control input and
          // a std::set per Call were most of this step's allocations.
          auto controlled_by = [](const std::string& input, absl::string_view name) {
            return input.size() == name.size() + 1 && input[0] == '^' && absl::string_view(input).substr(1) == name;
          };
          std::vector<absl::string_view> part{def.name};
          std::vector<int32_t> part_returns;
          // A partition names the parts (kSitePartAttr): its rank may hold
          // none of a part's Returns.
          const int64_t named_part = def.GetIntOr(kSitePartAttr, -1);
          if (named_part >= 0) {
            for (int32_t other : site.calls)
              if (other != id && Info(nodes[other]).def->GetIntOr(kSitePartAttr, -1) == named_part)
                part.push_back(Info(nodes[other]).def->name);
          }
          for (const auto& [ret, slot] : Info(n).site_returns()) {
            const NodeDef& rdef = *Info(nodes[ret]).def;
            bool mine = false;
            for (size_t k = rdef.num_data_inputs(); k < rdef.input.size(); ++k)
              for (size_t c = 0; c < (named_part >= 0 ? part.size() : 1); ++c) mine |= controlled_by(rdef.input[k], part[c]);
            if (!mine) continue;
            part_returns.push_back(ret);
            if (named_part >= 0) continue;
            for (size_t k = rdef.num_data_inputs(); k < rdef.input.size(); ++k)
              part.push_back(absl::string_view(rdef.input[k]).substr(1));
          }
          Info(n).part_mask = 0;
          for (size_t i = 0; i < Info(n).site_calls().size(); ++i)
            if (std::find(part.begin(), part.end(), Info(nodes[Info(n).site_calls()[i]]).def->name) != part.end())
              Info(n).part_mask |= uint64_t{1} << i;
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
        // (A site has at most 64 Calls: a vector, not a std::set per Call.)
        std::vector<int64_t> supplied;
        supplied.reserve(site.calls.size());
        for (int32_t other : site.calls) supplied.push_back(ArgIndex(other));
        for (const auto& [merge, arg] : ArgMerges(fn)) {
          if (std::find(supplied.begin(), supplied.end(), arg) == supplied.end())
            Info(n).mutable_lists().missing_arg_merges.push_back({merge, nodes[merge].slot_base});
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
        Info(n).child_slot = ChildSlot(n.block, ChildKind::kInvoke, id, 0);
        Info(n).label = invoke_sites_[fn]++;  // dynamic mode: one Invoke per call
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
        // string_view: compared by length first, inline (std::string ==
        // const char* calls compare() for every kernel node).
        const absl::string_view op = def.op;
        if (op == "Variable") {
          if (blk.kind != ExecBlock::Kind::kMain)
            return NodeError(def, absl::StatusCode::kInvalidArgument, "a Variable must be in the main graph");
          Info(n).variable = static_cast<int32_t>(exe_->variables.size());
          exe_->variables.push_back(id);
          exe_->kernels.push_back(MakeVariableHandleKernel(Info(n).variable));
        } else if (IsStateOp(def.op)) {
          TDF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeStateKernel(def));
          exe_->kernels.push_back(std::move(k));
        } else {
          // "" is the CPU: most nodes, not parsed.
          absl::StatusOr<Device> parsed = def.device.empty() ? Device::Cpu() : Device::Parse(def.device);
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
          if (op == "Const") {
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
        Info(n).result_index = static_cast<int32_t>(ResultIndex(e.dst));
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
      const int64_t arg = ArgIndex(c);
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

// The argument Merges of function `fn` (fed by its Call nodes) with their
// argument index.
// Built for every function in one pass on first use (Calls' argument
// edges are final after LinkUnit): one pass per function read every
// node's attributes once per function (10^4 functions: 10^9 lookups).
// An argument Merge is fed by Calls of its own function only
// (CheckCrossing), so one `seen` serves all functions.
const std::vector<std::pair<int32_t, int64_t>>& Compiler::ArgMerges(absl::string_view fn) {
  if (!arg_merges_built_) {
    arg_merges_built_ = true;
    std::vector<uint8_t> seen(nodes_.size(), 0);
    for (const NodeBuild& c : nodes_) {
      if (c.kind != NodeKind::kCall) continue;
      std::vector<std::pair<int32_t, int64_t>>& out = arg_merges_[Callee(c.id)];
      for (const OutEdge& e : c.edges) {
        if (e.kind != EdgeKind::kCall || nodes_[e.dst].kind != NodeKind::kMerge || seen[e.dst]) continue;
        seen[e.dst] = 1;
        out.push_back({e.dst, ArgIndex(c.id)});
      }
    }
  }
  static const std::vector<std::pair<int32_t, int64_t>> kNone;
  auto it = arg_merges_.find(fn);
  return it == arg_merges_.end() ? kNone : it->second;
}

const Compiler::SiteNodes& Compiler::Site(int32_t block, int32_t label, absl::string_view fn) {
  if (!sites_built_) {
    sites_built_ = true;
    for (const NodeBuild& o : nodes_) {  // by id: block order within each block
      if (o.kind != NodeKind::kCall && o.kind != NodeKind::kReturn) continue;
      SiteNodes& site = sites_[{o.block, Info(o).label, Callee(o.id)}];
      (o.kind == NodeKind::kCall ? site.calls : site.returns).push_back(o.id);
    }
  }
  return sites_.at({block, label, fn});
}

}  // namespace runtime
}  // namespace tdf
