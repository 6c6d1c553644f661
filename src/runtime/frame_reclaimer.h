// File: runtime/frame_reclaimer.h
// Frees the frames a failed run leaves live after the run has returned, on
// one background thread for the process. A recursion 10^5 deep that is cut
// by its deadline or a cancel holds 10^5 frames; finding and freeing them
// (a cache miss per frame, a walk from the root) took 60-130 ms on the
// caller's thread before the run could return (issue #26, item 7;
// bench/deep_runs_bench.cc). Handed over, the run returns as soon as its
// workers stop.
//
//   FrameReclaimer::Owner owner;           // one per Executor: the frames' graph
//   if (!FrameReclaimer::Submit(&owner, frames, [=] { FreeAllFrames(root, ...); }))
//     FreeAllFrames(root, ...);             // backlog full: free them now
//
// Thread safety: Submit and Owner::WaitUntilIdle may be called from any
// thread. Jobs run one at a time, in the order submitted.
#ifndef TDF_SRC_RUNTIME_FRAME_RECLAIMER_H_
#define TDF_SRC_RUNTIME_FRAME_RECLAIMER_H_

#include <cstdint>
#include <functional>

namespace tdf {
namespace runtime {

class FrameReclaimer {
 public:
  // Whose frames a job frees: the frames point into the owner's compiled
  // graph, which must outlive them. Its destructor waits until every job
  // submitted for it has run.
  class Owner {
   public:
    Owner() = default;
    ~Owner() { WaitUntilIdle(); }
    Owner(const Owner&) = delete;
    Owner& operator=(const Owner&) = delete;
    // Returns once every job submitted for this owner so far has run.
    void WaitUntilIdle();

   private:
    friend class FrameReclaimer;
    int64_t pending_ = 0;  // guarded by the reclaimer's mutex (never destroyed)
  };

  // Frames handed over and not yet freed, over all owners, at most: past
  // it a run frees its own frames (Submit says no), so failed runs that
  // come faster than the thread frees never pile up memory.
  static constexpr int64_t kMaxBacklogFrames = int64_t{1} << 20;

  // Runs `free_frames`, which frees `frames` frames of `owner`, on the
  // reclaimer thread (started on first use) and returns true. Returns false
  // and runs nothing when the backlog would pass kMaxBacklogFrames, or the
  // thread cannot be started or the job queued (out of memory).
  static bool Submit(Owner* owner, int64_t frames, std::function<void()> free_frames);

 private:
  [[noreturn]] static void ThreadMain();
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_FRAME_RECLAIMER_H_
