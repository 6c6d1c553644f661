#include "runtime/frame_reclaimer.h"

#include <deque>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "base/sync.h"

namespace tdf {
namespace runtime {

namespace {

struct Job {
  FrameReclaimer::Owner* owner;
  int64_t frames;
  std::function<void()> free_frames;
};

struct ReclaimerState {
  absl::Mutex mu;
  std::deque<Job> jobs ABSL_GUARDED_BY(mu);
  int64_t backlog ABSL_GUARDED_BY(mu) = 0;  // frames of the queued and running jobs
  bool started ABSL_GUARDED_BY(mu) = false;
};

// Never destroyed: the thread is detached and may still wait on the mutex
// while static destructors run at exit.
ReclaimerState& State() {
  static ReclaimerState* state = new ReclaimerState;
  return *state;
}

bool HasJobs(std::deque<Job>* jobs) { return !jobs->empty(); }

}  // namespace

void FrameReclaimer::ThreadMain() {
  ReclaimerState* state = &State();
  for (;;) {
    Job job;
    {
      base::MutexLock lock(&state->mu);
      state->mu.Await(absl::Condition(&HasJobs, &state->jobs));
      TDF_TSAN_ACQUIRE(&state->mu);  // Await re-acquires without the MutexLock's annotation
      job = std::move(state->jobs.front());
      state->jobs.pop_front();
    }
    job.free_frames();
    job.free_frames = nullptr;  // what it captured goes before the owner may
    base::MutexLock lock(&state->mu);
    state->backlog -= job.frames;
    // The owner may be destroyed as soon as the lock is released: not
    // touched after this.
    --job.owner->pending_;
  }
}

void FrameReclaimer::Owner::WaitUntilIdle() {
  ReclaimerState& state = State();
  base::MutexLock lock(&state.mu);
  state.mu.Await(absl::Condition(+[](int64_t* pending) { return *pending == 0; }, &pending_));
  TDF_TSAN_ACQUIRE(&state.mu);
}

bool FrameReclaimer::Submit(Owner* owner, int64_t frames, std::function<void()> free_frames) {
  ReclaimerState& state = State();
  base::MutexLock lock(&state.mu);
  if (state.backlog + frames > kMaxBacklogFrames) return false;
  // No thread, or no memory for the job: the caller frees its frames itself.
  if (!state.started) {
    try {
      std::thread(&FrameReclaimer::ThreadMain).detach();
    } catch (const std::system_error&) {
      return false;
    } catch (const std::bad_alloc&) {
      return false;
    }
    state.started = true;
  }
  try {
    state.jobs.push_back(Job{owner, frames, std::move(free_frames)});
  } catch (const std::bad_alloc&) {
    return false;
  }
  // Counted once queued: a job counted but never run would keep the owner
  // waiting forever (Owner::WaitUntilIdle).
  state.backlog += frames;
  ++owner->pending_;
  return true;
}

}  // namespace runtime
}  // namespace tdf
