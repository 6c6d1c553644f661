// File: src/runtime/batching/batch_plan.h
// Which nodes of an executable graph may batch across tags, and with which
// rule (batching_rules.h): made once per Executor when SessionOptions::
// batching is on, read by every worker (executor/batching.inc).
//
// A node batches when it is a CPU tensor kernel of a function or loop body
// (the main block runs each node once per run: nothing to batch) whose op
// has a rule.
//
// Thread safety: immutable after Create.
#ifndef TDF_SRC_RUNTIME_BATCHING_BATCH_PLAN_H_
#define TDF_SRC_RUNTIME_BATCHING_BATCH_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/batching/batching_rules.h"
#include "runtime/executable.h"
#include "tdf/session.h"

namespace tdf {
namespace runtime {
namespace batching {

// Counts of batched firings (RunStats::batched_*), per worker and merged.
struct BatchStats {
  int64_t firings = 0;
  int64_t instances = 0;
  int64_t deferred_ns = 0;
  int64_t inputs_without_copy = 0;
  std::vector<int64_t> histogram;  // [i]: batches of 2^i .. 2^(i+1) - 1 instances

  void Count(int64_t batch) {
    int bucket = 0;
    while ((int64_t{2} << bucket) <= batch) ++bucket;
    if (histogram.size() <= static_cast<size_t>(bucket)) histogram.resize(bucket + 1, 0);
    ++histogram[bucket];
    ++firings;
    instances += batch;
  }
  void MergeInto(BatchStats& total) {
    total.firings += firings;
    total.instances += instances;
    total.deferred_ns += deferred_ns;
    total.inputs_without_copy += inputs_without_copy;
    if (total.histogram.size() < histogram.size()) total.histogram.resize(histogram.size(), 0);
    for (size_t i = 0; i < histogram.size(); ++i) total.histogram[i] += histogram[i];
    *this = BatchStats();
  }
};

class BatchPlan {
 public:
  // Null when batching is off or no node can batch.
  static std::unique_ptr<BatchPlan> Create(const ExecutableGraph& exe, const SessionOptions& options);

  // The rule of node `id`, or null: it fires alone.
  const BatchRule* rule(int32_t id) const { return rules_[id].get(); }
  int max_batch() const { return max_batch_; }
  int64_t max_deferral() const { return max_deferral_; }

 private:
  std::vector<std::unique_ptr<BatchRule>> rules_;  // by node id
  int max_batch_ = 1;
  int64_t max_deferral_ = 1;
};

}  // namespace batching
}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_BATCHING_BATCH_PLAN_H_
