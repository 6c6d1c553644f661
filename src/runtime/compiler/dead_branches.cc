// Compiler steps: dead regions (BuildDeadRegions, before the forwarding
// steps) and dead data frontiers (BuildDeadDataFrontiers, after them).
// Requires: linked call sites. Ensures: for each group of Switches on one
// predicate in a function body, the nodes each port's deadness makes dead
// (a region) and the edges leaving it (the frontier), which the executor
// delivers dead instead of firing the region node by node; dead_with_ for
// the steps that need exclusivity. BuildDeadRegions builds a body's
// regions as a tree in one pass where they nest (nested_regions.cc), else
// one by one (BuildRegionsOneByOne). Forwarding steps run after the
// regions: one that moves edges onto a node must check the node is in no
// skipped region (the frontier would not hold them). Turned off by
// SessionOptions::skip_dead_branches. Pinned by
// tests/runtime/dead_branches_test.cc, acceptance_regressions_test.cc and
// many_functions_test.cc (bodies of a thousand Conds, deep multi-way ifs).
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <iterator>
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
        for (const DeadWith& d : it->second)  // a region with a parent stands for more than itself
          if (d.block != blk.id || d.group != group || d.port != port || regions_[d.region].parent >= 0)
            return false;
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
      std::vector<int32_t> in;  // block indices, ascending (a flag per node each was quadratic)
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
    // Each candidate's region is the least fixpoint, found by a worklist:
    // a node is looked at again only when it gets one more dead input.
    // Per-candidate counters and flags are stamped, not reset per node.
    std::vector<uint8_t> owned(size, 0);
    std::vector<int32_t> dead_inputs(size, 0), dead_stamp(size, 0), in_stamp(size, 0), work;
    int32_t stamp = 0;
    for (Candidate& c : candidates) {
      const int32_t c_stamp = ++stamp;
      auto count_dead = [&](int32_t i) {
        if (dead_stamp[i] != c_stamp) {
          dead_stamp[i] = c_stamp;
          dead_inputs[i] = 0;
        }
        ++dead_inputs[i];
        work.push_back(i);
      };
      work.clear();
      for (const OutEdge& e : nodes[c.sw].edges)
        if (e.src_port == c.port) count_dead(nodes[e.dst].index);
      while (!work.empty()) {
        const int32_t i = work.back();
        work.pop_back();
        const NodeBuild& v = nodes[blk.nodes[i]];
        if (in_stamp[i] == c_stamp || owned[i] || !eligible(v, c.group, c.port)) continue;
        const int32_t need = v.kind == NodeKind::kMerge ? std::max(1, in_edges[v.id]) : 1;
        if (dead_inputs[i] < need) continue;
        in_stamp[i] = c_stamp;
        c.in.push_back(i);
        for (const OutEdge& e : v.edges) count_dead(nodes[e.dst].index);
      }
      std::sort(c.in.begin(), c.in.end());
      for (int32_t i : c.in) owned[i] = 1;
    }
    for (const Candidate& c : candidates) {
      if (c.in.empty()) continue;  // nothing to skip
      const int32_t c_stamp = ++stamp;
      for (int32_t i : c.in) in_stamp[i] = c_stamp;
      auto in_c = [&](int32_t i) { return in_stamp[i] == c_stamp; };
      NodeBuild& sw = nodes[c.sw];
      std::vector<OutEdge> frontier;
      for (const OutEdge& e : sw.edges)
        if (e.src_port == c.port && !in_c(nodes[e.dst].index)) frontier.push_back(e);
      for (int32_t i : c.in) {
        for (const OutEdge& e : nodes[blk.nodes[i]].edges)
          if (!in_c(nodes[e.dst].index)) frontier.push_back(e);
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
  region_base_.resize(exe_->blocks.size(), -1);
  region_base_[blk.id] = static_cast<int32_t>(regions_.size());
  // A body without a Switch has no regions: no lists per node to build
  // (f_i(n) = n + i of 10^5 functions).
  bool any_switch = false;
  for (int32_t id : blk.nodes)
    any_switch |= nodes[id].kind == NodeKind::kSwitch && !nodes[id].has_invariants && nodes[id].num_data_inputs == 2;
  if (!any_switch) return;
  RegionInputs& in = region_scratch_.inputs;  // reused: every field is reset below
  // Local inputs of every node (by block index) and how many inputs came
  // from elsewhere (arguments, results of calls); and local consumers.
  auto local = [&](const OutEdge& e) { return e.kind == EdgeKind::kLocal && nodes[e.dst].block == blk.id; };
  in.in_begin.assign(size + 1, 0);
  in.out_begin.assign(size + 1, 0);
  for (int32_t i = 0; i < size; ++i) {
    for (const OutEdge& e : nodes[blk.nodes[i]].edges) {
      if (!local(e)) continue;
      ++in.in_begin[nodes[e.dst].index + 1];
      ++in.out_begin[i + 1];
    }
  }
  for (int32_t i = 0; i < size; ++i) {
    in.in_begin[i + 1] += in.in_begin[i];
    in.out_begin[i + 1] += in.out_begin[i];
  }
  in.in_list.resize(in.in_begin[size]);
  in.out_list.resize(in.out_begin[size]);
  std::vector<int32_t>& in_fill = region_scratch_.in_fill;
  in_fill.assign(in.in_begin.begin(), in.in_begin.end() - 1);
  for (int32_t i = 0, out_fill = 0; i < size; ++i) {
    for (const OutEdge& e : nodes[blk.nodes[i]].edges) {
      if (!local(e)) continue;
      const NodeBuild& d = nodes[e.dst];
      in.in_list[in_fill[d.index]++] = {i, e.src_port, e.dst_slot - d.slot_base};
      in.out_list[out_fill++] = d.index;
    }
  }
  in.eligible.resize(size);
  for (int32_t i = 0; i < size; ++i) {
    const NodeBuild& n = nodes[blk.nodes[i]];
    bool ok = !Info(n).folded && !n.has_invariants && Info(n).return_edges_by_label.empty();
    switch (n.kind) {
      case NodeKind::kKernel:
      case NodeKind::kSwitch:
      case NodeKind::kNoOutput:
      case NodeKind::kMerge:
      case NodeKind::kReturn:
      case NodeKind::kInvoke:  // dynamic mode: a dead Invoke only passes dead on
      case NodeKind::kCall:    // a site joins whole, both parts of a split site included
        break;
      default:
        ok = false;
    }
    in.eligible[i] = ok;
  }
  // Calls and Returns of each call site (by a Call of the site).
  in.site_of_return.clear();
  for (int32_t i = 0; i < size; ++i) {
    const NodeBuild& n = nodes[blk.nodes[i]];
    if (n.kind != NodeKind::kCall) continue;
    std::vector<int32_t> calls;
    for (int32_t c : Info(n).site_calls()) calls.push_back(nodes[c].index);
    if (calls.empty()) calls.push_back(i);
    for (const auto& [ret, slot] : Info(n).site_returns()) in.site_of_return[nodes[ret].index] = calls;
  }
  in.returns_of_call.resize(size);
  for (std::vector<int32_t>& returns : in.returns_of_call) returns.clear();
  for (const auto& [ret, calls] : in.site_of_return)
    for (int32_t c : calls) in.returns_of_call[c].push_back(ret);
  // Groups: Switches by predicate producer (block index, port).
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> by_pred;
  for (int32_t i = 0; i < size; ++i) {
    const NodeBuild& n = nodes[blk.nodes[i]];
    if (n.kind != NodeKind::kSwitch || n.has_invariants || n.num_data_inputs != 2) continue;
    for (const RegionInputs::In& x : in.ins(i)) {
      if (x.input == 1 && x.port >= 0) by_pred[{x.src, x.port}].push_back(i);  // the predicate's producer
    }
  }
  in.groups.clear();
  for (auto& [key, members] : by_pred) in.groups.push_back(std::move(members));
  in.member_of.assign(size, -1);  // a Switch has one predicate: one group
  for (size_t g = 0; g < in.groups.size(); ++g)
    for (int32_t m : in.groups[g]) in.member_of[m] = static_cast<int32_t>(g);
  // Regions 2g and 2g + 1 of the block: group g's ports.
  const int32_t base = static_cast<int32_t>(regions_.size());
  for (size_t g = 0; g < in.groups.size(); ++g) {
    for (int32_t port = 0; port < 2; ++port) {
      const int32_t id = static_cast<int32_t>(regions_.size());
      regions_.push_back({blk.id, static_cast<int32_t>(g), port, -1, id, 0});
    }
  }
  for (size_t g = 0; g < in.groups.size(); ++g)
    for (int32_t m : in.groups[g]) predicate_group_of_[blk.nodes[m]] = static_cast<int32_t>(g);
  // One group's two regions cannot nest: one by one, they cost less than
  // the tree's bookkeeping (a body of one Cond, as most are).
  if (in.groups.size() < 2 || !BuildNestedRegions(blk, in, base, skip)) BuildRegionsOneByOne(blk, in, base, skip);
}

void Compiler::InstallDeadRegionGroup(ExecBlock& blk, const std::vector<int32_t>& members,
                                      std::vector<OutEdge> frontier[2]) {
  DeadRegionGroup drg;
  drg.members = static_cast<int32_t>(members.size());
  drg.counter_index = static_cast<int32_t>(blk.nodes.size() + blk.dead_regions.size());
  drg.frontier[0] = std::move(frontier[0]);
  drg.frontier[1] = std::move(frontier[1]);
  for (int32_t m : members) nodes_[blk.nodes[m]].switch_group = static_cast<int32_t>(blk.dead_regions.size());
  blk.dead_regions.push_back(std::move(drg));
}

// Each region by a worklist of its own: a node inside K nested Conds is
// visited K times. For blocks whose regions BuildNestedRegions cannot
// build (see there).
void Compiler::BuildRegionsOneByOne(ExecBlock& blk, const RegionInputs& inputs, int32_t base, bool skip) {
  std::vector<NodeBuild>& nodes = nodes_;
  const int32_t size = static_cast<int32_t>(blk.nodes.size());
  using In = RegionInputs::In;
  auto ins = [&](int32_t v) { return inputs.ins(v); };
  auto outs = [&](int32_t v) { return inputs.outs(v); };
  const auto& site_of_return = inputs.site_of_return;
  const auto& returns_of_call = inputs.returns_of_call;
  const auto& groups = inputs.groups;
  const auto& member_of = inputs.member_of;
  auto eligible = [&](const NodeBuild& n) { return inputs.eligible[n.index] != 0; };
  // A region's nodes are a list, not a flag per node of the block: a body
  // of K Conds has 2K regions, and K flags each cost K^2 (10^4 Conds: GBs).
  // Membership is read through `mark` (mark[v] == stamp: in the region
  // being built or read).
  // (OneByOneRegion, compiler.h.) Buffers from region_scratch_, reset here.
  using Region = OneByOneRegion;
  RegionScratch& scratch = region_scratch_;
  std::vector<uint8_t>& enabled = scratch.enabled;
  enabled.assign(groups.size(), 1);
  if (scratch.regions.size() < 2 * groups.size()) scratch.regions.resize(2 * groups.size());
  const absl::Span<Region> regions = absl::MakeSpan(scratch.regions.data(), 2 * groups.size());  // [2 * g + port]
  std::vector<int32_t>& mark = scratch.mark;
  mark.assign(size, 0);
  int32_t stamp = 0;
  std::vector<int32_t>& work = scratch.work;
  work.clear();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int32_t port = 0; port < 2; ++port) {
      Region& r = regions[2 * g + port];
      r.group = static_cast<int32_t>(g);
      r.port = port;
      r.in.clear();
      const int32_t region_stamp = ++stamp;
      auto in_r = [&](int32_t v) { return mark[v] == region_stamp; };
      auto dead_input = [&](const In& in) {
        return in_r(in.src) || (member_of[in.src] == static_cast<int32_t>(g) && in.port == port);
      };
      auto joins = [&](int32_t v) {
        const NodeBuild& n = nodes[blk.nodes[v]];
        if (!eligible(n)) return false;
        if (n.kind == NodeKind::kMerge) {
          if (static_cast<int32_t>(ins(v).size()) != n.num_inputs) return false;
          for (const In& in : ins(v))
            if (!dead_input(in)) return false;
          return true;
        }
        if (n.kind == NodeKind::kReturn) {
          auto it = site_of_return.find(v);
          if (it == site_of_return.end()) return false;
          for (int32_t c : it->second)
            if (!in_r(c)) return false;
          return true;
        }
        bool any = false;
        for (const In& in : ins(v)) any |= dead_input(in);
        if (!any || n.kind != NodeKind::kCall) return any;
        // A call site joins whole: every argument's Call is dead.
        for (int32_t c : Info(n).site_calls()) {
          const int32_t ci = nodes[c].index;
          if (ci == v) continue;
          bool dead = false;
          for (const In& in : ins(ci)) dead |= dead_input(in);
          if (!dead || !eligible(nodes[c])) return false;
        }
        return true;
      };
      // The least fixpoint of joins(), by a worklist: a node is looked at
      // again only when something it reads joins (what it feeds; a site's
      // Returns when one of its Calls joins; a Call's site-mates, whose
      // inputs its joining reads). Passes over the whole body per region
      // were quadratic in its Conds.
      auto push = [&](int32_t v) {
        work.push_back(v);
        const NodeBuild& n = nodes[blk.nodes[v]];
        if (n.kind == NodeKind::kCall)
          for (int32_t c : Info(n).site_calls()) work.push_back(nodes[c].index);
      };
      auto add = [&](int32_t v) {
        mark[v] = region_stamp;
        r.in.push_back(v);
        for (int32_t d : outs(v)) push(d);
        for (int32_t ret : returns_of_call[v]) work.push_back(ret);
      };
      work.clear();
      for (int32_t m : groups[g])
        for (int32_t d : outs(m)) push(d);
      while (!work.empty()) {
        const int32_t v = work.back();
        work.pop_back();
        if (in_r(v) || !joins(v)) continue;
        add(v);
        const NodeBuild& n = nodes[blk.nodes[v]];
        if (n.kind == NodeKind::kCall) {
          for (int32_t c : Info(n).site_calls())
            if (!in_r(nodes[c].index)) add(nodes[c].index);
        }
      }
      std::sort(r.in.begin(), r.in.end());
      // A member inside its own region would never fire: no jump for it.
      for (int32_t m : groups[g]) enabled[g] &= !in_r(m);
      // Which nodes a predicate value makes dead is a fact of the graph,
      // whether the group jumps or not (ForwardExclusiveResultMerges).
      for (int32_t v : r.in)
        dead_with_[blk.nodes[v]].push_back({blk.id, r.group, port, base + 2 * r.group + port});
    }
  }
  if (!skip) return;
  // Overlapping regions must nest group-wise: a group partly inside
  // another group's region could wait forever for a member that never
  // fires, and two unrelated regions could both deliver one frontier edge.
  // Only the groups that region `a` touches (a member of theirs, or a node
  // of one of their regions, is in `a`) can be disabled by it: the others
  // are found through regions_of, not tried one by one against a.
  // node -> regions holding it, ascending; packed (a list per node was an
  // allocation per node of every region)
  std::vector<int32_t>& regions_begin = scratch.regions_begin;
  std::vector<int32_t>& regions_list = scratch.regions_list;
  regions_begin.assign(size + 1, 0);
  for (const Region& r : regions)
    for (int32_t v : r.in) ++regions_begin[v + 1];
  for (int32_t v = 0; v < size; ++v) regions_begin[v + 1] += regions_begin[v];
  regions_list.resize(regions_begin[size]);
  {
    std::vector<int32_t>& fill = scratch.fill;
    fill.assign(regions_begin.begin(), regions_begin.end() - 1);
    for (size_t ri = 0; ri < regions.size(); ++ri)
      for (int32_t v : regions[ri].in) regions_list[fill[v]++] = static_cast<int32_t>(ri);
  }
  auto regions_of = [&](int32_t v) {
    return absl::MakeConstSpan(regions_list.data() + regions_begin[v], regions_begin[v + 1] - regions_begin[v]);
  };
  auto holds = [&](int32_t b, int32_t v) {
    const auto of = regions_of(v);
    return std::binary_search(of.begin(), of.end(), b);
  };
  std::vector<int32_t>& inside_stamp = scratch.inside_stamp;
  std::vector<int32_t>& inside = scratch.inside;
  std::vector<int32_t>& touch_stamp = scratch.touch_stamp;
  std::vector<int32_t>& touched_groups = scratch.touched_groups;
  inside_stamp.assign(groups.size(), 0);
  inside.assign(groups.size(), 0);
  touch_stamp.assign(regions.size(), 0);
  touched_groups.clear();
  for (bool changed = true; changed;) {
    changed = false;
    for (const Region& a : regions) {
      if (!enabled[a.group]) continue;
      const int32_t a_stamp = ++stamp;
      touched_groups.clear();
      for (int32_t v : a.in) {
        if (const int32_t h = member_of[v]; h >= 0) {
          if (inside_stamp[h] != a_stamp) {
            inside_stamp[h] = a_stamp;
            inside[h] = 0;
            touched_groups.push_back(h);
          }
          ++inside[h];
        }
        for (int32_t b : regions_of(v)) {
          if (touch_stamp[b] == a_stamp) continue;
          touch_stamp[b] = a_stamp;
          touched_groups.push_back(regions[b].group);
        }
      }
      for (const int32_t g : touched_groups) {
        if (!enabled[g] || g == a.group) continue;
        const int32_t in_a = inside_stamp[g] == a_stamp ? inside[g] : 0;
        bool nested = in_a == static_cast<int32_t>(groups[g].size());
        if (in_a > 0 && !nested) {
          enabled[g] = 0;
          changed = true;
          continue;
        }
        if (nested) continue;
        // Unrelated groups: their regions must not share a node unless
        // a's group lies inside g's region.
        for (int32_t b = 2 * g; b < 2 * g + 2; ++b) {
          bool a_inside_b = true;
          for (int32_t m : groups[a.group]) a_inside_b &= holds(b, m);
          if (a_inside_b) continue;
          if (touch_stamp[b] == a_stamp) {
            enabled[g] = 0;
            changed = true;
            break;
          }
        }
      }
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!enabled[g]) continue;
    const bool any = !regions[2 * g].in.empty() || !regions[2 * g + 1].in.empty();
    if (!any) continue;  // nothing to skip
    std::vector<OutEdge> frontier[2];
    bool local = true;  // every frontier edge stays in the frame (else: no skipping)
    for (size_t ri = 2 * g; ri < 2 * g + 2; ++ri) {
      const Region& r = regions[ri];
      const int32_t r_stamp = ++stamp;
      for (int32_t v : r.in) mark[v] = r_stamp;
      auto in_r = [&](int32_t v) { return mark[v] == r_stamp; };
      // The region's nodes and the group's members, ascending.
      std::vector<int32_t>& sources = scratch.sources;
      sources.clear();
      std::merge(r.in.begin(), r.in.end(), groups[g].begin(), groups[g].end(), std::back_inserter(sources));
      sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
      for (int32_t u : sources) {
        for (const OutEdge& e : nodes[blk.nodes[u]].edges) {
          if (e.kind == EdgeKind::kCall && in_r(u)) continue;  // a skipped call site has no invocation
          if (!in_r(u) && e.src_port != r.port) continue;  // a member's other port and control edges
          local &= e.kind == EdgeKind::kLocal && nodes[e.dst].block == blk.id;
          if (nodes[e.dst].block == blk.id && in_r(nodes[e.dst].index)) continue;
          frontier[r.port].push_back(e);
        }
      }
    }
    if (local) InstallDeadRegionGroup(blk, groups[g], frontier);
  }
}

}  // namespace runtime
}  // namespace tdf
