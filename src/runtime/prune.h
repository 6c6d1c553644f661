// Pruning a run to what its fetches and targets need, as TensorFlow's
// executor does: a run fires the main-graph nodes of their backward closure
// and no others, so fetching a training graph's loss evaluates it without
// taking an optimizer step, and a Placeholder nothing needed reads need not
// be fed.
//
// The closure is taken over the executable's edges (what actually delivers,
// after the compiler's forwarding passes), at the granularity the runtime
// can start and finish: a main-graph node, a whole loop of the main graph
// (all of its Enters, when any of its Exits is needed), and a whole call
// site (all of its Calls, when any of its results is needed: an invocation
// runs its whole body, and waits for every argument it was given). Function
// bodies are never pruned.
#ifndef TDF_SRC_RUNTIME_PRUNE_H_
#define TDF_SRC_RUNTIME_PRUNE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"
#include "base/hash_tables.h"
#include "runtime/executable.h"

namespace tdf {
namespace runtime {

struct RunPlan {
  // Every main-graph node is needed: the run starts as an unpruned one.
  bool whole_graph = true;
  std::vector<int32_t> sources;   // main sources to start (global ids, block order)
  std::vector<int32_t> pruned;    // main-block indices that must not fire
  std::vector<uint8_t> needs_feed;  // by placeholder ordinal
  // Split call sites of main (AddGradients' paired forward and gradient
  // calls of one invocation) whose forward part the run needs and whose
  // gradient part it does not: (main child slot, the gradient part's
  // site_calls bits). Its arguments enter the invocation dead with the
  // forward part's first live one, so the gradient path drains instead of
  // running.
  std::vector<std::pair<int32_t, uint64_t>> dead_parts;
};

// Thread-safe; plans are cached per set of fetched and target nodes.
class RunPruner {
 public:
  // `gradients_may_be_left_out`: SessionOptions::evaluate_without_gradients.
  // Indexes the graph now (with Session::Create), not at the first run: a
  // run grows no hash table (base/hash_tables.h).
  RunPruner(const ExecutableGraph* exe, bool gradients_may_be_left_out);

  // `roots`: global ids of the nodes the run fetches or targets: main-block
  // nodes, or nodes of a loop of the main graph (an Exit, or a Send or Recv
  // of a distributed run), which need the whole loop. Nodes of function
  // bodies are left out: a body runs whole when it is called.
  std::shared_ptr<const RunPlan> Plan(std::vector<int32_t> roots);

 private:
  void BuildIndexLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ExecutableGraph* exe_;
  const bool gradients_may_be_left_out_;
  absl::Mutex mu_;
  // Dependency nodes: the main block's indices, then units (a main loop,
  // a call site, a part of a split site). Per node, what it needs (CSR).
  std::vector<int32_t> dep_begin_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> deps_ ABSL_GUARDED_BY(mu_);
  // A split site of main (NodeInfo::split_role): the units of its forward
  // and gradient parts, and the gradient part's site_calls bits.
  struct SplitSite {
    int32_t child_slot;
    int32_t forward;
    int32_t gradient;
    uint64_t gradient_mask;
  };
  std::vector<SplitSite> split_sites_ ABSL_GUARDED_BY(mu_);
  // A loop block of the main graph -> its unit (the dependency node of its
  // Enters): what fetching one of its Exits needs.
  base::FlatHashMap<int32_t, int32_t> loop_unit_ ABSL_GUARDED_BY(mu_);
  // Made with room for kMaxCachedPlans in its constructor and remade, never
  // grown (base/hash_tables.h).
  static constexpr size_t kMaxCachedPlans = 256;
  base::FlatHashMap<std::vector<int32_t>, std::shared_ptr<const RunPlan>> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_PRUNE_H_
