#include "runtime/frame_reclaimer.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

namespace tdf {
namespace runtime {

namespace {

struct Job {
  FrameReclaimer::Owner* owner;
  int64_t frames;
  std::function<void()> free_frames;
};

// A std::mutex and condition variables, not absl::Mutex::Await: ThreadSanitizer
// sees std::mutex through its pthread interceptors, but not the Debian
// Abseil, whose Await evaluates a waiter's condition on whichever thread
// unlocks (a race on the condition's stack object, as TSan saw it).
struct ReclaimerState {
  std::mutex mu;
  std::condition_variable queued;  // a job was queued
  std::condition_variable done;    // a job has run
  std::deque<Job> jobs;            // guarded by mu
  int64_t backlog = 0;             // frames of the queued and running jobs; guarded by mu
  bool started = false;            // guarded by mu
};

// Never destroyed: the thread is detached and may still wait on the mutex
// while static destructors run at exit.
ReclaimerState& State() {
  static ReclaimerState* state = new ReclaimerState;
  return *state;
}

}  // namespace

void FrameReclaimer::ThreadMain() {
  ReclaimerState* state = &State();
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      state->queued.wait(lock, [state] { return !state->jobs.empty(); });
      job = std::move(state->jobs.front());
      state->jobs.pop_front();
    }
    job.free_frames();
    job.free_frames = nullptr;  // what it captured goes before the owner may
    std::lock_guard<std::mutex> lock(state->mu);
    state->backlog -= job.frames;
    // The owner may be destroyed as soon as the lock is released: not
    // touched after this.
    --job.owner->pending_;
    state->done.notify_all();
  }
}

void FrameReclaimer::Owner::WaitUntilIdle() {
  ReclaimerState& state = State();
  std::unique_lock<std::mutex> lock(state.mu);
  state.done.wait(lock, [this] { return pending_ == 0; });
}

bool FrameReclaimer::Submit(Owner* owner, int64_t frames, std::function<void()> free_frames) {
  ReclaimerState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
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
  state.queued.notify_one();
  return true;
}

}  // namespace runtime
}  // namespace tdf
