#include "runtime/prune.h"

#include <algorithm>
#include <utility>

namespace tdf {
namespace runtime {

void RunPruner::BuildIndexLocked() {
  const ExecutableGraph& exe = *exe_;
  const ExecBlock& main = exe.blocks[0];
  const int32_t num_main = static_cast<int32_t>(main.nodes.size());
  // Dependency nodes: the main block's indices, then units (a main loop:
  // its Enters; a main call site: its Calls), so that a loop's many Exits
  // or a site's many results share one list.
  std::vector<std::vector<int32_t>> unit_members;
  absl::flat_hash_map<int32_t, int32_t> loop_unit;                     // loop block -> unit
  absl::flat_hash_map<std::pair<int32_t, int32_t>, int32_t> site_unit;  // (callee block, label) -> unit
  absl::flat_hash_map<int32_t, int32_t> callee_unit;                   // callee block -> every main site of it
  auto unit_of = [&](auto& map, const auto& key) {
    auto [it, inserted] = map.try_emplace(key, static_cast<int32_t>(unit_members.size()));
    if (inserted) unit_members.emplace_back();
    return it->second;
  };
  for (int32_t id : main.nodes) {
    const ExecNode& n = exe.nodes[id];
    const NodeInfo& info = exe.info[id];
    if (n.kind == NodeKind::kEnter) {
      unit_members[unit_of(loop_unit, info.target_block)].push_back(n.index);
    } else if (n.kind == NodeKind::kCall) {
      unit_members[unit_of(site_unit, std::make_pair(info.target_block, info.label))].push_back(n.index);
      unit_members[unit_of(callee_unit, info.target_block)].push_back(n.index);
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
      } else if (from.kind == ExecBlock::Kind::kFunction) {  // a callee's result, for the site of its label
        const int32_t k = static_cast<int32_t>(&e - s.out_begin);
        int32_t unit = -1;
        const auto& by_label = exe.info[s.id].return_edges_by_label;
        for (size_t label = 0; label < by_label.size() && unit < 0; ++label) {
          if (k < by_label[label].first || k >= by_label[label].second) continue;
          if (auto it = site_unit.find({s.block, static_cast<int32_t>(label)}); it != site_unit.end()) unit = it->second;
        }
        // Not found by label: every main site of the callee (more than
        // needed, never less).
        if (unit < 0)
          if (auto it = callee_unit.find(s.block); it != callee_unit.end()) unit = it->second;
        if (unit >= 0) needs.emplace_back(d.index, num_main + unit);
      }
    }
  }
  for (size_t u = 0; u < unit_members.size(); ++u)
    for (int32_t m : unit_members[u]) needs.emplace_back(num_main + static_cast<int32_t>(u), m);
  const size_t num_dep_nodes = static_cast<size_t>(num_main) + unit_members.size();
  dep_begin_.assign(num_dep_nodes + 1, 0);
  for (const auto& [node, dep] : needs) ++dep_begin_[node + 1];
  for (size_t i = 0; i < num_dep_nodes; ++i) dep_begin_[i + 1] += dep_begin_[i];
  deps_.resize(needs.size());
  std::vector<int32_t> fill(dep_begin_.begin(), dep_begin_.end() - 1);
  for (const auto& [node, dep] : needs) deps_[fill[node]++] = dep;
  indexed_ = true;
}

std::shared_ptr<const RunPlan> RunPruner::Plan(std::vector<int32_t> roots) {
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto it = cache_.find(roots); it != cache_.end()) return it->second;
  }
  absl::MutexLock lock(&mu_);
  if (auto it = cache_.find(roots); it != cache_.end()) return it->second;
  if (!indexed_) BuildIndexLocked();
  const ExecutableGraph& exe = *exe_;
  const ExecBlock& main = exe.blocks[0];
  const size_t num_main = main.nodes.size();
  std::vector<uint8_t> needed(dep_begin_.size() - 1, 0);
  std::vector<int32_t> todo;
  for (int32_t id : roots) {
    const int32_t index = exe.nodes[id].index;
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
  // A program that makes up fetch sets as it goes should not grow this
  // without bound; a few dozen sets are the common case.
  if (cache_.size() >= 256) cache_.clear();
  cache_.emplace(std::move(roots), plan);
  return plan;
}

}  // namespace runtime
}  // namespace tdf
