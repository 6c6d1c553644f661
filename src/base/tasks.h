#ifndef TDF_SRC_BASE_TASKS_H_
#define TDF_SRC_BASE_TASKS_H_

// Spawning oneTBB tasks so that ThreadSanitizer sees the ordering oneTBB
// (uninstrumented) really provides; used by the executor's offered work and
// by kernels::ParallelFor.

#include <utility>

#include "base/sync.h"
#include "oneapi/tbb/task_group.h"

namespace tdf {
namespace base {

// Under TSan, what a task's creator wrote (the task object too, which
// oneTBB builds from the lambda) must be ordered before the task runs, and
// the hand-off inside oneTBB is invisible. The task is built first (defer),
// then released on one address that every task acquires first (TaskStarts):
// coarser than the real edges, never missing one.
[[maybe_unused]] inline char tsan_task_handoff;
// Task objects come from oneTBB's small-object pool: a new task may be
// built where a finished one lived. A task releases here after its last use
// of its captures (TaskEnds), and a task is built only after acquiring here.
// (The pool's own destructor accesses are suppressed in tools/tsan.supp.)
[[maybe_unused]] inline char tsan_task_reuse;

template <typename F>
void SpawnTask(tbb::task_group& group, F&& f) {
  TDF_TSAN_ACQUIRE(&tsan_task_reuse);
  tbb::task_handle task = group.defer(std::forward<F>(f));
  TDF_TSAN_RELEASE(&tsan_task_handoff);
  group.run(std::move(task));
}

// First thing in a task spawned by SpawnTask.
inline void TaskStarts() { TDF_TSAN_ACQUIRE(&tsan_task_handoff); }
// After a task's last use of its captures.
inline void TaskEnds() { TDF_TSAN_RELEASE(&tsan_task_reuse); }

}  // namespace base
}  // namespace tdf

#endif  // TDF_SRC_BASE_TASKS_H_
