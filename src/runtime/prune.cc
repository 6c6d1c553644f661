#include "runtime/prune.h"

#include "base/sync.h"
#include "base/hash_tables.h"

#include <algorithm>
#include <utility>

namespace tdf {
namespace runtime {

RunPruner::RunPruner(const ExecutableGraph* exe, bool gradients_may_be_left_out)
    : exe_(exe), gradients_may_be_left_out_(gradients_may_be_left_out) {
  base::MutexLock lock(&mu_);
  BuildIndexLocked();
}

void RunPruner::BuildIndexLocked() {
  const ExecutableGraph& exe = *exe_;
  const ExecBlock& main = exe.blocks[0];
  const int32_t num_main = static_cast<int32_t>(main.nodes.size());
  // Units, so that a loop's many Exits or a site's many results share one
  // list. A unit's members are dependency nodes: main indices, or
  // num_main + u for unit u.
  std::vector<std::vector<int32_t>> unit_members;
  auto new_unit = [&] {
    unit_members.emplace_back();
    return static_cast<int32_t>(unit_members.size()) - 1;
  };
  base::FlatHashMap<int32_t, int32_t> loop_unit;                     // loop block -> its Enters
  base::FlatHashMap<std::pair<int32_t, int32_t>, int32_t> site_unit;  // (callee block, label) -> every part
  base::FlatHashMap<int32_t, int32_t> callee_unit;                   // callee block -> every main site of it
  base::FlatHashMap<int32_t, int32_t> return_unit;                   // main index of a Return -> its part
  auto unit_of = [&](auto& map, const auto& key) {
    auto it = map.find(key);
    if (it == map.end()) it = map.emplace(key, new_unit()).first;
    return it->second;
  };
  split_sites_.clear();
  for (int32_t id : main.nodes) {
    const ExecNode& n = exe.nodes[id];
    const NodeInfo& info = exe.info[id];
    if (n.kind == NodeKind::kEnter) {
      unit_members[unit_of(loop_unit, info.target_block)].push_back(n.index);
      continue;
    }
    if (n.kind != NodeKind::kCall) continue;
    unit_members[unit_of(callee_unit, info.target_block)].push_back(n.index);
    const std::pair<int32_t, int32_t> key{info.target_block, info.label};
    if (site_unit.contains(key)) continue;  // the site's first Call builds its units
    const int32_t whole = unit_of(site_unit, key);
    // A site's parts: a split site of a forward and a gradient part
    // (NodeInfo::split_role) has a unit for each, the gradient's needing
    // the forward's (it reads the forward values of the invocation); any
    // other site is one unit.
    int32_t forward = -1, gradient = -1;
    uint64_t gradient_mask = 0;
    for (int32_t call : info.site_calls()) {
      const NodeInfo& ci = exe.info[call];
      int32_t unit = whole;
      if (ci.split_role == SplitRole::kForward) {
        if (forward < 0) forward = new_unit();
        unit = forward;
      } else if (ci.split_role == SplitRole::kGradient) {
        if (gradient < 0) gradient = new_unit();
        unit = gradient;
        gradient_mask = ci.part_mask;
      }
      unit_members[unit].push_back(exe.nodes[call].index);
      for (const auto& [ret, slot] : ci.site_returns()) return_unit[exe.nodes[ret].index] = unit;
    }
    if (forward >= 0) unit_members[whole].push_back(num_main + forward);
    if (gradient >= 0) unit_members[whole].push_back(num_main + gradient);
    if (forward >= 0 && gradient >= 0) {
      unit_members[gradient].push_back(num_main + forward);
      if (gradients_may_be_left_out_) {
        split_sites_.push_back({info.child_slot, forward, gradient, gradient_mask});
      } else {
        unit_members[forward].push_back(num_main + gradient);  // the call runs whole
      }
    }
  }
  // The main loop that a block of the main graph's loops belongs to.
  auto top_loop = [&](int32_t b) {
    while (exe.blocks[b].parent > 0) b = exe.blocks[b].parent;
    return exe.blocks[b].parent == 0 ? b : -1;
  };
  std::vector<std::pair<int32_t, int32_t>> needs;  // (dependency node, what it needs)
  for (const ExecNode& s : exe.nodes) {
    const ExecBlock& from = exe.blocks[s.block];
    for (const OutEdge& e : s.out()) {
      const ExecNode& d = exe.nodes[e.dst];
      if (d.block != 0) continue;
      if (s.block == 0) {
        needs.emplace_back(d.index, s.index);
      } else if (from.kind == ExecBlock::Kind::kLoop) {  // a loop's Exit
        const int32_t loop = top_loop(s.block);
        if (auto it = loop_unit.find(loop); it != loop_unit.end()) needs.emplace_back(d.index, num_main + it->second);
      } else if (from.kind == ExecBlock::Kind::kFunction) {  // a callee's result
        // Into a Return of a main site: that Return's part; else the site of
        // the edge's label; else every main site of the callee (more than
        // needed, never less).
        int32_t unit = -1;
        if (auto it = return_unit.find(d.index); it != return_unit.end()) unit = it->second;
        const int32_t k = static_cast<int32_t>(&e - s.out_begin);
        const auto& by_label = exe.info[s.id].return_edges_by_label;
        for (size_t label = 0; label < by_label.size() && unit < 0; ++label) {
          if (k < by_label[label].first || k >= by_label[label].second) continue;
          if (auto it = site_unit.find({s.block, static_cast<int32_t>(label)}); it != site_unit.end()) unit = it->second;
        }
        if (unit < 0)
          if (auto it = callee_unit.find(s.block); it != callee_unit.end()) unit = it->second;
        if (unit >= 0) needs.emplace_back(d.index, num_main + unit);
      }
    }
  }
  for (size_t u = 0; u < unit_members.size(); ++u)
    for (int32_t m : unit_members[u]) needs.emplace_back(num_main + static_cast<int32_t>(u), m);
  loop_unit_.clear();
  for (const auto& [block, unit] : loop_unit) loop_unit_[block] = num_main + unit;
  const size_t num_dep_nodes = static_cast<size_t>(num_main) + unit_members.size();
  dep_begin_.assign(num_dep_nodes + 1, 0);
  for (const auto& [node, dep] : needs) ++dep_begin_[node + 1];
  for (size_t i = 0; i < num_dep_nodes; ++i) dep_begin_[i + 1] += dep_begin_[i];
  deps_.resize(needs.size());
  std::vector<int32_t> fill(dep_begin_.begin(), dep_begin_.end() - 1);
  for (const auto& [node, dep] : needs) deps_[fill[node]++] = dep;
}

std::shared_ptr<const RunPlan> RunPruner::Plan(std::vector<int32_t> roots) {
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  // One exclusive lock: a lookup is short, and base::MutexLock tells TSan
  // about the ordering (the Debian Abseil is not instrumented).
  base::MutexLock lock(&mu_);
  if (auto it = cache_.find(roots); it != cache_.end()) return it->second;
  const ExecutableGraph& exe = *exe_;
  const ExecBlock& main = exe.blocks[0];
  const size_t num_main = main.nodes.size();
  std::vector<uint8_t> needed(dep_begin_.size() - 1, 0);
  std::vector<int32_t> todo;
  for (int32_t id : roots) {
    const ExecNode& root = exe.nodes[id];
    int32_t index = root.index;
    if (root.block != 0) {  // in a loop of the main graph: the whole loop
      int32_t loop = root.block;
      while (exe.blocks[loop].parent > 0) loop = exe.blocks[loop].parent;
      if (exe.blocks[loop].parent != 0) continue;  // a function body runs when called
      auto it = loop_unit_.find(loop);
      if (it == loop_unit_.end()) continue;  // a loop with no Enter here starts on another rank
      index = it->second;
    }
    if (!needed[index]) todo.push_back(index);
    needed[index] = 1;
  }
  size_t num_needed_main = 0;
  while (!todo.empty()) {
    const int32_t node = todo.back();
    todo.pop_back();
    if (static_cast<size_t>(node) < num_main) ++num_needed_main;
    for (int32_t k = dep_begin_[node]; k < dep_begin_[node + 1]; ++k) {
      if (needed[deps_[k]]) continue;
      needed[deps_[k]] = 1;
      todo.push_back(deps_[k]);
    }
  }
  auto plan = std::make_shared<RunPlan>();
  plan->whole_graph = num_needed_main == num_main;
  plan->needs_feed.resize(exe.placeholders.size());
  for (size_t i = 0; i < exe.placeholders.size(); ++i)
    plan->needs_feed[i] = needed[exe.nodes[exe.placeholders[i]].index];
  if (!plan->whole_graph) {
    for (int32_t src : main.sources)
      if (needed[exe.nodes[src].index]) plan->sources.push_back(src);
    for (size_t i = 0; i < num_main; ++i)
      if (!needed[i]) plan->pruned.push_back(static_cast<int32_t>(i));
  }
  const int32_t num_main_index = static_cast<int32_t>(num_main);
  for (const SplitSite& site : split_sites_)
    if (needed[num_main_index + site.forward] && !needed[num_main_index + site.gradient])
      plan->dead_parts.emplace_back(site.child_slot, site.gradient_mask);
  // A program that makes up fetch sets as it goes should not grow this
  // without bound; a few dozen sets are the common case.
  if (cache_.capacity() == 0 || cache_.size() >= kMaxCachedPlans) cache_ = decltype(cache_)(base::BucketsFor(kMaxCachedPlans));
  cache_.emplace(std::move(roots), plan);
  return plan;
}

}  // namespace runtime
}  // namespace tdf
