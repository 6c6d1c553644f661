// Compiler steps: dead regions (BuildDeadRegions, before the forwarding
// steps) and dead data frontiers (BuildDeadDataFrontiers, after them).
// Requires: linked call sites. Ensures: for each group of Switches on one
// predicate in a function body, the nodes each port's deadness makes dead
// (a region) and the edges leaving it (the frontier), which the executor
// delivers dead instead of firing the region node by node; dead_with_ for
// the steps that need exclusivity. Forwarding steps run after the regions:
// one that moves edges onto a node must check the node is in no skipped
// region (the frontier would not hold them). Turned off by
// SessionOptions::skip_dead_branches. Pinned by
// tests/runtime/dead_branches_test.cc and acceptance_regressions_test.cc.
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

// NodeLists::dead_data_frontier of each grouped Switch of a function body
// (no pivot edges), on the final edges. What a taken port's dead token
// makes dead, as BuildDeadRegions finds a branch's: an op with an input
// from the port or from the region, a Merge whose every input comes from
// there. Kept out, so that they fire as before: Calls, function
// results, Switches of a group, nodes with edges out of the block, and
// nodes of a branch region (whose own frontier may carry the same edge).
void Compiler::BuildDeadDataFrontiers() {
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

// See DeadRegionGroup (executable.h). Only function bodies: recursion is
// where dead branches are fired over and over (one per call), and loop
// bodies keep TensorFlow's dead exiting iteration, which tests observe.
// `skip`: install the groups (SessionOptions::skip_dead_branches); else
// only record which nodes each group's ports make dead.
void Compiler::BuildDeadRegions(ExecBlock& blk, bool skip) {
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

}  // namespace runtime
}  // namespace tdf
