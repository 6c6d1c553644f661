// Compiler step: dead regions of a function body in one pass, as a tree
// (BuildNestedRegions), and the queries on region trees.
// Requires: what BuildDeadRegions requires (dead_branches.cc), which calls
// it. Ensures: the same regions, facts and installed groups as building
// each region by a worklist of its own (BuildRegionsOneByOne), in time
// linear in the body (times a logarithm), where that costs a node once per
// region that holds it: a multi-way if of depth D (n == 0 ? a : n == 1 ? b
// : ...) has D regions nested in each other, D^2 memberships in all, and
// took 54 s to compile at D = 2000. Returns false, having changed nothing,
// for a body whose regions are not nested this way; the caller then builds
// them one by one. Pinned by tests/runtime/many_functions_test.cc (deep
// multi-way ifs), dead_branches_test.cc and the randomized tests, whose
// programs take both ways.
//
// A node's regions are the pairs (group, port) whose dead port would make
// it dead: the least solution of, per node v (BuildRegionsOneByOne's
// joins(), read as equations on sets),
//   an input's set   its producer's, plus (g, p) for port p of a member of g;
//   Merge            the intersection of its inputs' sets;
//   Call             the intersection over its site's Calls of the union of
//                    each one's inputs' sets (a site joins whole);
//   Return           its site's Calls' set;
//   other ops        the union of their inputs' sets.
// Region (g, p) holds every member of a group h exactly when it holds all
// of h's regions (what h's dead ports make dead is dead when all of h is),
// so the regions that hold all of h's members are ancestors of h's
// regions: a forest. Here every node's set is one chain of that forest,
// from its innermost region (own) to a root, and so is each input's; the
// equations need only a chain's innermost region. Three things end the
// attempt: two chains that meet in a union without one containing the
// other (an op reading two branches of different Conds), a split call
// site (its parts' Returns and Calls depend on each other), and a cycle
// through a group (a member reading its own group's port).
#include "base/hash_tables.h"
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <deque>

namespace tdf {
namespace runtime {

void Compiler::SetRegionParent(int32_t region, int32_t parent) {
  RegionNode& r = regions_[region];
  r.parent = parent;
  if (parent < 0) {
    r.depth = 0;
    r.jump = region;
    return;
  }
  const RegionNode& p = regions_[parent];
  r.depth = p.depth + 1;
  // Myers' jump pointers: a jump's depth depends only on the node's depth,
  // and reaching any ancestor takes logarithmic steps.
  const RegionNode& pj = regions_[p.jump];
  r.jump = p.jump != parent && p.depth - pj.depth == pj.depth - regions_[pj.jump].depth ? pj.jump : parent;
}

int32_t Compiler::RegionAncestorAt(int32_t region, int32_t depth) const {
  while (regions_[region].depth > depth) {
    const RegionNode& r = regions_[region];
    region = regions_[r.jump].depth >= depth ? r.jump : r.parent;
  }
  return region;
}

bool Compiler::RegionWithin(int32_t outer, int32_t region) const {
  return regions_[outer].depth <= regions_[region].depth &&
         RegionAncestorAt(region, regions_[outer].depth) == outer;
}

int32_t Compiler::CommonRegion(int32_t a, int32_t b) const {
  if (regions_[a].depth > regions_[b].depth) std::swap(a, b);
  b = RegionAncestorAt(b, regions_[a].depth);
  while (a != b) {
    if (regions_[a].depth == 0) return -1;  // two roots
    // Equal depths have jumps of equal depth.
    if (regions_[a].jump != regions_[b].jump) {
      a = regions_[a].jump;
      b = regions_[b].jump;
    } else {
      a = regions_[a].parent;
      b = regions_[b].parent;
    }
  }
  return a;
}

// Two chains hold opposite ports of one group exactly when, below their
// deepest common region (or at their roots), they go through the two
// regions of one group: the two regions of a group are siblings, and
// any such pair lower down would have a common parent lower down.
bool Compiler::ExclusiveDeadWith(absl::Span<const DeadWith> a, absl::Span<const DeadWith> b) const {
  auto split = [&](int32_t x, int32_t y) {
    const int32_t common = CommonRegion(x, y);
    const int32_t below = common < 0 ? 0 : regions_[common].depth + 1;
    if (regions_[x].depth < below || regions_[y].depth < below) return false;  // one holds the other
    const RegionNode& cx = regions_[RegionAncestorAt(x, below)];
    const RegionNode& cy = regions_[RegionAncestorAt(y, below)];
    return cx.block == cy.block && cx.group == cy.group && cx.port != cy.port;
  };
  // Lists of nodes in many unnested regions (BuildRegionsOneByOne's, where
  // every region is a root) are compared through a table of one's
  // (block, group) -> ports rather than pair by pair.
  bool roots = true;
  for (const auto* list : {&a, &b})
    for (const DeadWith& d : *list) roots &= regions_[d.region].parent < 0;
  if (a.size() * b.size() <= 64 || !roots) {
    for (const DeadWith& x : a)
      for (const DeadWith& y : b)
        if (split(x.region, y.region)) return true;
    return false;
  }
  base::FlatHashMap<std::pair<int32_t, int32_t>, uint32_t> ports;
  for (const DeadWith& x : a) ports[{x.block, x.group}] |= uint32_t{1} << x.port;
  for (const DeadWith& y : b) {
    auto it = ports.find({y.block, y.group});
    if (it != ports.end() && (it->second & ~(uint32_t{1} << y.port)) != 0) return true;
  }
  return false;
}

bool Compiler::BuildNestedRegions(ExecBlock& blk, const RegionInputs& in, int32_t base, bool skip) {
  std::vector<NodeBuild>& nodes = nodes_;
  const int32_t size = static_cast<int32_t>(blk.nodes.size());
  const int32_t num_groups = static_cast<int32_t>(in.groups.size());
  // Call sites: a site number per Call (its site's first Call), and each
  // site's Returns.
  std::vector<int32_t> site_of(size, -1);
  std::vector<std::vector<int32_t>> site_calls, site_returns;
  for (int32_t i = 0; i < size; ++i) {
    const NodeBuild& n = nodes[blk.nodes[i]];
    if (n.kind != NodeKind::kCall) continue;
    if (Info(n).split_site) return false;
    if (site_of[i] >= 0) continue;
    const int32_t s = static_cast<int32_t>(site_calls.size());
    std::vector<int32_t> calls;
    for (int32_t c : Info(n).site_calls()) calls.push_back(nodes[c].index);
    if (calls.empty()) calls.push_back(i);
    for (int32_t c : calls) site_of[c] = s;
    site_calls.push_back(std::move(calls));
    site_returns.emplace_back();
  }
  std::vector<int32_t> return_site(size, -1);
  for (const auto& [ret, calls] : in.site_of_return) {
    return_site[ret] = site_of[calls.front()];
    site_returns[return_site[ret]].push_back(ret);
  }
  // The order: a topological one of the body's local edges, where a
  // group's members come before a node that reads any of them (the group's
  // regions get their parent from all its members) and a site's Calls
  // before a node that reads any of them and before its Returns. Vertices:
  // nodes [0, size), groups [size, size + G), sites after them.
  const int32_t group_vertex = size, site_vertex = size + num_groups;
  const int32_t vertices = site_vertex + static_cast<int32_t>(site_calls.size());
  auto via = [&](int32_t u) {  // the vertex an edge out of node u leaves from
    if (in.member_of[u] >= 0) return group_vertex + in.member_of[u];
    if (site_of[u] >= 0) return site_vertex + site_of[u];
    return u;
  };
  std::vector<int32_t> waiting(vertices, 0);
  for (int32_t v = 0; v < size; ++v) {
    waiting[v] = static_cast<int32_t>(in.ins(v).size()) + (return_site[v] >= 0 ? 1 : 0);
    if (in.member_of[v] >= 0) ++waiting[group_vertex + in.member_of[v]];
    if (site_of[v] >= 0) ++waiting[site_vertex + site_of[v]];
  }
  std::vector<int32_t> order;
  order.reserve(vertices);
  for (int32_t v = 0; v < vertices; ++v)
    if (waiting[v] == 0) order.push_back(v);
  auto release = [&](int32_t v) {
    if (--waiting[v] == 0) order.push_back(v);
  };
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t v = order[k];
    if (v < size) {
      if (via(v) != v) {
        release(via(v));
      } else {
        for (int32_t d : in.outs(v)) release(d);
      }
    } else if (v < site_vertex) {
      for (int32_t m : in.groups[v - group_vertex])
        for (int32_t d : in.outs(m)) release(d);
    } else {
      for (int32_t c : site_calls[v - site_vertex])
        for (int32_t d : in.outs(c)) release(d);
      for (int32_t r : site_returns[v - site_vertex]) release(r);
    }
  }
  if (static_cast<int32_t>(order.size()) != vertices) return false;  // a cycle through a group or site

  // Each node's innermost region (-1: none), in that order. Parents are
  // set on regions_ as groups are reached; undone if the attempt ends.
  std::vector<int32_t> own(size, -1), any_input(size, -1), site_set(site_calls.size(), -1);
  std::vector<int32_t> parent_of_group(num_groups, -1);
  auto undo = [&] {
    for (int32_t r = base; r < base + 2 * num_groups; ++r) SetRegionParent(r, -1);
    return false;
  };
  // The chain an input brings (innermost region), or -2 when it is the
  // union of two chains that do not nest.
  auto input_chain = [&](const RegionInputs::In& x) {
    const int32_t g = in.member_of[x.src];
    if (g < 0 || x.port < 0) return own[x.src];
    // Port p of a member of g: its own chain and region (g, p), whose
    // parent is the member's chain when all members share it.
    return own[x.src] == parent_of_group[g] ? base + 2 * g + x.port : -2;
  };
  auto join = [&](int32_t a, int32_t b) {  // union of two chains, -2 if they do not nest
    if (a == -2 || b == -2) return -2;
    if (a < 0) return b;
    if (b < 0 || RegionWithin(b, a)) return a;
    return RegionWithin(a, b) ? b : -2;
  };
  for (const int32_t v : order) {
    if (v >= site_vertex) {
      const int32_t s = v - site_vertex;
      int32_t set = -1;
      bool first = true;
      for (int32_t c : site_calls[s]) {
        if (!in.eligible[c] || any_input[c] < 0) {
          set = -1;
          break;
        }
        set = first ? any_input[c] : (set < 0 ? -1 : CommonRegion(set, any_input[c]));
        first = false;
      }
      site_set[s] = set;
      for (int32_t c : site_calls[s]) own[c] = set;
      continue;
    }
    if (v >= group_vertex) {
      const int32_t g = v - group_vertex;
      int32_t parent = own[in.groups[g].front()];
      for (int32_t m : in.groups[g]) parent = parent < 0 || own[m] < 0 ? -1 : CommonRegion(parent, own[m]);
      parent_of_group[g] = parent;
      SetRegionParent(base + 2 * g, parent);
      SetRegionParent(base + 2 * g + 1, parent);
      continue;
    }
    if (!in.eligible[v]) continue;
    const NodeBuild& n = nodes[blk.nodes[v]];
    if (n.kind == NodeKind::kReturn) {
      if (return_site[v] >= 0) own[v] = site_set[return_site[v]];
      continue;
    }
    if (n.kind == NodeKind::kMerge) {
      // Dead when every input is: the deepest region all inputs share.
      if (static_cast<int32_t>(in.ins(v).size()) != n.num_inputs || in.ins(v).empty()) continue;
      int32_t set = input_chain(in.ins(v).front());
      for (const RegionInputs::In& x : in.ins(v)) {
        const int32_t c = input_chain(x);
        if (c == -2) return undo();
        set = set < 0 || c < 0 ? -1 : CommonRegion(set, c);
      }
      own[v] = set;
      continue;
    }
    int32_t set = -1;
    for (const RegionInputs::In& x : in.ins(v)) set = join(set, input_chain(x));
    if (set == -2) return undo();
    if (n.kind == NodeKind::kCall) {
      any_input[v] = set;  // the site decides
    } else {
      own[v] = set;
    }
  }

  // The facts: one region per node, standing for its chain.
  for (int32_t v = 0; v < size; ++v) {
    if (own[v] < 0) continue;
    const RegionNode& r = regions_[own[v]];
    dead_with_[blk.nodes[v]].push_back({blk.id, r.group, r.port, own[v]});
  }
  if (!skip) return true;

  // Which groups jump. A group some of whose members a region holds, but
  // not all, is disabled by that region (if that region's group is still
  // enabled when its turn comes, regions in order), as
  // BuildRegionsOneByOne's overlap check does: such a region is on a
  // member's chain below the group's parent. Its other case, regions of
  // unrelated groups sharing a node, cannot arise: regions that share a
  // node are on one chain, one nested in the other.
  std::vector<std::vector<int32_t>> disables(2 * num_groups);  // region - base -> groups
  for (int32_t g = 0; g < num_groups; ++g) {
    for (int32_t m : in.groups[g]) {
      for (int32_t r = own[m]; r >= 0 && r != parent_of_group[g]; r = regions_[r].parent)
        disables[r - base].push_back(g);
    }
  }
  std::vector<uint8_t> enabled(num_groups, 1);
  for (int32_t r = 0; r < 2 * num_groups; ++r) {
    if (!enabled[r / 2]) continue;
    for (int32_t g : disables[r]) enabled[g] = g == r / 2 ? enabled[g] : 0;
  }
  // Regions that hold a node (an ancestor holds what its descendants do).
  std::vector<uint8_t> nonempty(2 * num_groups, 0);
  for (int32_t v = 0; v < size; ++v)
    for (int32_t r = own[v]; r >= 0 && !nonempty[r - base]; r = regions_[r].parent) nonempty[r - base] = 1;
  // Frontiers, in BuildRegionsOneByOne's order (by source node, then by
  // edge): an edge out of a node leaves each region of the node's chain
  // that does not hold its destination (a Call's argument edges excepted:
  // a skipped site has no invocation), and a member's port-p edge leaves
  // region (g, p) unless it holds the destination. A region with an edge
  // out of the frame does not jump (local).
  std::vector<std::vector<OutEdge>> frontier(2 * num_groups);
  // chain_nonlocal holds every ancestor of a region it holds (a walk stops
  // at a marked one); port_nonlocal, marked by members' port edges, need not.
  std::vector<uint8_t> chain_nonlocal(2 * num_groups, 0), port_nonlocal(2 * num_groups, 0);
  for (int32_t u = 0; u < size; ++u) {
    const NodeBuild& src = nodes[blk.nodes[u]];
    for (const OutEdge& e : src.edges) {
      const NodeBuild& dst = nodes[e.dst];
      const bool in_block = dst.block == blk.id;
      const int32_t dst_own = in_block ? own[dst.index] : -1;
      const bool local = e.kind == EdgeKind::kLocal && in_block;
      if (own[u] >= 0 && e.kind != EdgeKind::kCall) {
        if (!local)
          for (int32_t r = own[u]; r >= 0 && !chain_nonlocal[r - base]; r = regions_[r].parent)
            chain_nonlocal[r - base] = 1;
        for (int32_t r = own[u]; r >= 0 && !(dst_own >= 0 && RegionWithin(r, dst_own)); r = regions_[r].parent)
          if (enabled[(r - base) / 2]) frontier[r - base].push_back(e);
      }
      const int32_t g = in.member_of[u];
      if (g < 0 || e.src_port < 0) continue;
      const int32_t r = base + 2 * g + e.src_port;  // not on u's chain: no member is in its own region
      if (!local) port_nonlocal[r - base] = 1;
      if (enabled[g] && !(dst_own >= 0 && RegionWithin(r, dst_own))) frontier[r - base].push_back(e);
    }
  }
  for (int32_t g = 0; g < num_groups; ++g) {
    if (!enabled[g] || !(nonempty[2 * g] || nonempty[2 * g + 1])) continue;
    bool local = true;
    for (int32_t r = 2 * g; r < 2 * g + 2; ++r) local &= !chain_nonlocal[r] && !port_nonlocal[r];
    if (!local) continue;
    std::vector<OutEdge> edges[2] = {std::move(frontier[2 * g]), std::move(frontier[2 * g + 1])};
    InstallDeadRegionGroup(blk, in.groups[g], edges);
  }
  return true;
}

}  // namespace runtime
}  // namespace tdf
