// The tagged-token executor: runs an ExecutableGraph on a oneTBB task arena
// with work stealing (design.md §3).
#ifndef TDF_SRC_RUNTIME_EXECUTOR_H_
#define TDF_SRC_RUNTIME_EXECUTOR_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "oneapi/tbb/task_arena.h"
#include "runtime/batching/batch_plan.h"
#include "runtime/executable.h"
#include "runtime/frame_reclaimer.h"
#include "runtime/prune.h"
#include "runtime/remote_channel.h"
#include "runtime/state_kernels.h"
#include "tdf/session.h"


namespace tdf {
namespace runtime {

struct RunRequest {
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> fetches;
  std::vector<std::string> targets;
  const CancellationToken* cancel = nullptr;
  // The run's settings: RunOptions where set, else the session's
  // (Session::Run resolves them).
  absl::Duration deadline = absl::InfiniteDuration();
  const char* deadline_source = "SessionOptions::deadline";  // for the error message
  bool collect_node_stats = false;
  std::string trace_path;  // "": no trace
  ExecutionObserver* observer = nullptr;
  // A distributed run (DistributedSession): the other ranks, through which
  // Sends send and Recv tokens arrive. Null for one-process runs; a graph
  // with Send/Recv nodes needs one.
  RemoteChannel* remote = nullptr;
  // With `remote`: what the run needs of this partition, whatever this rank
  // fetches (distributed/cut_pruning.h): its nodes there and the Sends and
  // Recvs of its cut edges are roots of the pruned run, as fetches are.
  // Null: every node of the partition runs.
  const RemoteNeeds* remote_needs = nullptr;
};

class Executor {
 public:
  Executor(const ExecutableGraph* exe, const SessionOptions& options, VariableStore* variables);
  ~Executor();

  // Thread-safe.
  absl::StatusOr<std::vector<Tensor>> Run(const RunRequest& request, RunStats* stats);

 private:
  const ExecutableGraph* exe_;
  SessionOptions options_;
  VariableStore* variables_;  // not owned; outlives the executor
  // Arenas of num_workers threads, one per run in progress (TakeArena):
  // runs from several client threads used to share one, and a client that
  // found it full handed its run to a thread inside it, which another run's
  // endless work could keep forever: the run never started, so neither its
  // deadline nor its cancel was ever checked (RunOptionsTest.
  // ConcurrentRunsKeepTheirOwnDeadlines hung). A run's own arena keeps a
  // slot for its client thread. oneTBB's threads are shared by all arenas.
  std::mutex arenas_mu_;
  std::vector<std::unique_ptr<tbb::task_arena>> idle_arenas_;
  std::unique_ptr<tbb::task_arena> TakeArena();
  void ReturnArena(std::unique_ptr<tbb::task_arena> arena);
  std::unique_ptr<RunPruner> pruner_;
  std::unique_ptr<batching::BatchPlan> batch_plan_;  // null: batching off
  // Failed runs' frames still being freed after their runs returned; last,
  // so that it is destroyed first and waits for them while the graph their
  // blocks point into is still there.
  FrameReclaimer::Owner reclaims_;
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_EXECUTOR_H_
