#include "distributed/cut_pruning.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/sync.h"
#include "graph/frames.h"
#include "graph/node_index.h"
#include "tdf/status.h"

namespace tdf {
namespace distributed {

absl::StatusOr<std::unique_ptr<CutEdgePruner>> CutEdgePruner::Create(const Graph& graph,
                                                                     const PartitionedGraph& parts, int rank) {
  std::unique_ptr<CutEdgePruner> p(new CutEdgePruner());
  const std::vector<NodeDef>& nodes = graph.node;
  const int32_t n = static_cast<int32_t>(nodes.size());
  TDF_ASSIGN_OR_RETURN(NodeIndex index, NodeIndex::Build(nodes));
  TDF_ASSIGN_OR_RETURN(FrameInfo frames, InferFrames(nodes, index, ""));
  for (int32_t i = 0; i < n; ++i) p->index_of_.emplace(nodes[i].name, i);
  p->names_.reserve(nodes.size());
  for (const NodeDef& node : nodes) p->names_.push_back(node.name);

  // Dependency nodes: the graph's nodes, then one per outermost block below
  // main (n + block: a loop of the main graph, or a function body, with
  // everything nested in it), then one per call site.
  const int32_t num_blocks = static_cast<int32_t>(frames.blocks.size());
  auto top_block = [&](int32_t b) {
    while (frames.blocks[b].parent > 0) b = frames.blocks[b].parent;
    return b;
  };
  base::FlatHashMap<std::string, int32_t> site_of;  // StaticizeRecursion's SITE of SITE/call_J
  std::vector<std::pair<int32_t, int32_t>> needs;   // (dependency node, what it needs)
  for (int32_t i = 0; i < n; ++i) {
    for (const ResolvedInput& in : index.inputs(i)) needs.emplace_back(i, in.src);
    const int32_t b = frames.block_of_node[i];
    if (b != 0) {
      const int32_t unit = n + top_block(b);
      needs.emplace_back(i, unit);
      needs.emplace_back(unit, i);
    }
    if (nodes[i].op == "Call") {
      const size_t slash = nodes[i].name.rfind("/call");
      if (slash == std::string::npos) continue;
      auto [it, inserted] =
          site_of.try_emplace(nodes[i].name.substr(0, slash), n + num_blocks + static_cast<int32_t>(site_of.size()));
      needs.emplace_back(i, it->second);
      needs.emplace_back(it->second, i);
    }
  }
  const size_t num_dep_nodes = static_cast<size_t>(n) + num_blocks + site_of.size();
  p->dep_begin_.assign(num_dep_nodes + 1, 0);
  for (const auto& [node, dep] : needs) ++p->dep_begin_[node + 1];
  for (size_t i = 0; i < num_dep_nodes; ++i) p->dep_begin_[i + 1] += p->dep_begin_[i];
  p->deps_.resize(needs.size());
  std::vector<int32_t> fill(p->dep_begin_.begin(), p->dep_begin_.end() - 1);
  for (const auto& [node, dep] : needs) p->deps_[fill[node]++] = dep;

  // This rank's cut edges and what their Recvs feed, from the partition of
  // each Recv (every rank builds them all). A consumer is a node of the
  // graph or a replica, which has its original's name.
  base::FlatHashSet<int64_t> mine;
  for (const SendRecvPair& pair : parts.pairs)
    if (pair.send_rank == rank || pair.recv_rank == rank) mine.insert(pair.key);
  std::vector<std::pair<int64_t, int32_t>> feeds;  // (key, consumer)
  for (const Graph& partition : parts.partitions) {
    base::FlatHashMap<std::string, int64_t> recv_key;
    for (const NodeDef& node : partition.node) {
      if (node.op != "Recv") continue;
      TDF_ASSIGN_OR_RETURN(int64_t key, node.GetInt("key"));
      if (mine.contains(key)) recv_key.emplace(node.name, key);
    }
    if (recv_key.empty()) continue;
    for (const NodeDef& node : partition.node) {
      for (const std::string& input : node.input) {
        TDF_ASSIGN_OR_RETURN(InputView view, ParseInputView(input));
        auto it = recv_key.find(view.node);
        if (it == recv_key.end()) continue;
        auto consumer = p->index_of_.find(node.name);
        if (consumer == p->index_of_.end())
          return absl::InternalError(absl::StrCat("node '", node.name, "' (", node.op,
                                                  "): a partition's node that the graph does not have reads Recv '",
                                                  input, "'"));
        feeds.emplace_back(it->second, consumer->second);
      }
    }
  }
  std::sort(feeds.begin(), feeds.end());
  feeds.erase(std::unique(feeds.begin(), feeds.end()), feeds.end());
  for (size_t k = 0; k < feeds.size(); ++k) {
    if (k == 0 || feeds[k].first != feeds[k - 1].first) {
      p->keys_.push_back(feeds[k].first);
      p->consumer_begin_.push_back(static_cast<int32_t>(k));
    }
    p->consumers_.push_back(feeds[k].second);
  }
  p->consumer_begin_.push_back(static_cast<int32_t>(feeds.size()));
  for (const NodeDef& node : parts.partitions[rank].node) {
    auto it = p->index_of_.find(node.name);
    if (it == p->index_of_.end()) continue;  // a Send or Recv
    const int32_t top = top_block(frames.block_of_node[it->second]);
    if (top == 0 || frames.blocks[top].parent == 0) p->local_nodes_.push_back(it->second);
  }
  return p;
}

std::shared_ptr<const CutEdgePruner::Needs> CutEdgePruner::Needed(const std::vector<std::string>& roots) {
  std::vector<int32_t> start;
  for (const std::string& name : roots)
    if (auto it = index_of_.find(name); it != index_of_.end()) start.push_back(it->second);
  std::sort(start.begin(), start.end());
  start.erase(std::unique(start.begin(), start.end()), start.end());
  base::MutexLock lock(&mu_);
  if (auto it = cache_.find(start); it != cache_.end()) return it->second;
  std::vector<uint8_t> needed(dep_begin_.size() - 1, 0);
  std::vector<int32_t> todo;
  for (int32_t i : start) {
    needed[i] = 1;
    todo.push_back(i);
  }
  while (!todo.empty()) {
    const int32_t node = todo.back();
    todo.pop_back();
    for (int32_t k = dep_begin_[node]; k < dep_begin_[node + 1]; ++k) {
      if (needed[deps_[k]]) continue;
      needed[deps_[k]] = 1;
      todo.push_back(deps_[k]);
    }
  }
  auto needs = std::make_shared<Needs>();
  for (size_t k = 0; k < keys_.size(); ++k) {
    for (int32_t c = consumer_begin_[k]; c < consumer_begin_[k + 1]; ++c) {
      if (!needed[consumers_[c]]) continue;
      needs->keys.insert(keys_[k]);
      break;
    }
  }
  for (int32_t i : local_nodes_)
    if (needed[i]) needs->nodes.push_back(names_[i]);
  // A program that makes up fetch sets as it goes should not grow this
  // without bound (runtime/prune.h's cache does the same).
  if (cache_.capacity() == 0 || cache_.size() >= kMaxCachedPlans)
    cache_ = decltype(cache_)(base::BucketsFor(kMaxCachedPlans));
  cache_.emplace(std::move(start), needs);
  return needs;
}

}  // namespace distributed
}  // namespace tdf
