// Pruning a distributed run (docs/distributed.md, "Pruning"): which cut
// edges a run's fetches and targets need.
//
// One rank cannot prune its partition alone: a node it holds may be needed
// by a fetch on another rank, through any number of ranks. Every rank holds
// the whole transformed graph, so every rank takes the same backward
// closure of the run's fetches and targets over it, and a cut edge is
// needed when a consumer of its Recv is in the closure. Each rank then runs
// its own pruned plan (runtime/prune.h) with the ends of its needed cut
// edges as roots: both ends of an edge see the same answer, so every Send a
// rank waits for fires and no Recv waits for a Send that does not.
//
// That holds because the closure here is never smaller than what a rank's
// own pruner keeps: it follows every edge of the graph (the compiler's
// forwarding only shortcuts them) and takes whole units at least as large
// as the pruner's: a loop of the main graph whole, a function body whole
// with every Call of that function, a call site with all of its Calls.
#ifndef TDF_SRC_DISTRIBUTED_CUT_PRUNING_H_
#define TDF_SRC_DISTRIBUTED_CUT_PRUNING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/hash_tables.h"
#include "tdf/graph.h"
#include "runtime/remote_channel.h"
#include "tdf/partition.h"

namespace tdf {
namespace distributed {

class CutEdgePruner {
 public:
  // `graph`: the transformed graph `parts` was cut from; `rank`: whose Sends
  // and Recvs and nodes Needed answers for.
  static absl::StatusOr<std::unique_ptr<CutEdgePruner>> Create(const Graph& graph, const PartitionedGraph& parts,
                                                               int rank);

  // What a run of `roots` (node names of the graph, fetched or targeted on
  // any rank) needs of this rank: the keys of its Sends and Recvs, and its
  // nodes of the main graph and its loops in the closure, replicas among
  // them (a replicated Call or Enter must fire here when its original is
  // needed, though nothing on this rank reads it). Names of no node are left
  // out (the rank that owns the fetch reports them). Thread-safe; answers
  // are cached per set of roots.
  using Needs = runtime::RemoteNeeds;
  std::shared_ptr<const Needs> Needed(const std::vector<std::string>& roots);

 private:
  CutEdgePruner() = default;

  base::FlatHashMap<std::string, int32_t> index_of_;  // node name -> index
  std::vector<std::string> names_;                    // index -> node name
  // Per node, what it needs (CSR): its inputs, its unit's members when it
  // opens a unit, the other Calls of its call site.
  std::vector<int32_t> dep_begin_;
  std::vector<int32_t> deps_;
  // This rank's cut edges: key -> the nodes its Recv feeds (CSR).
  std::vector<int64_t> keys_;
  std::vector<int32_t> consumer_begin_;
  std::vector<int32_t> consumers_;
  // This rank's nodes of the main graph and its loops (not of function
  // bodies, which run whole when called), by index in the graph.
  std::vector<int32_t> local_nodes_;

  absl::Mutex mu_;
  static constexpr size_t kMaxCachedPlans = 256;
  base::FlatHashMap<std::vector<int32_t>, std::shared_ptr<const Needs>> cache_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace distributed
}  // namespace tdf

#endif  // TDF_SRC_DISTRIBUTED_CUT_PRUNING_H_
