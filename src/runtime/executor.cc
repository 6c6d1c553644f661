#include "runtime/executor.h"
#include "base/sync.h"
#include "base/tasks.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_group.h"
#include "cuda/device_backend.h"
#include "runtime/frame.h"
#include "tdf/status.h"
#include "runtime/scalar_ops.h"
#include "runtime/trace.h"

namespace tdf {
namespace runtime {

// ---------------------------------------------------------------------------
// Frame allocation: per-thread free lists by size class, so creating an
// invocation (one per call in fib) costs no malloc in the steady state.

namespace {

constexpr size_t kSizeClassBytes = 64;
constexpr size_t kNumSizeClasses = 128;  // frames up to 8 KiB are pooled
// A thread keeps up to kLocalMaxPerClass free frames of a class; past that it
// hands kDepotBatch of them to the process-wide depot, where any thread
// refills from. Freed frames go back to malloc only past kDepotMaxBytes: a
// recursion 10^5 deep frees 10^5 frames at the end of every run, and handing
// them to malloc (coalescing, trimming the heap, page faults when the next
// run grows it again) cost more than the run itself. Memory held is thus
// bounded by the peak of live frames, not by how many runs there were. The
// bound is not higher because what the depot holds slows the rest of the
// process down: with sum(10^6)'s 670 MB kept, a 10^6-op chain run next
// took 16 ns per firing instead of 14 (15 with 256 MiB kept).
constexpr size_t kLocalMaxPerClass = size_t{1} << 12;
constexpr size_t kDepotBatch = size_t{1} << 10;
constexpr size_t kDepotMaxBytes = size_t{256} << 20;

// Frames above the pooled sizes (a main graph of thousands of nodes: one
// root frame per run) are kept too, a few per thread by exact size: fresh
// large allocations are mmapped, and their page faults and zeroing cost
// more than the run itself for a graph like chain(10^4).
constexpr size_t kMaxLargeFrames = 4;
constexpr size_t kMaxLargeFrameBytes = size_t{64} << 20;

struct FrameDepot {
  absl::Mutex mu;
  std::vector<void*> free_lists[kNumSizeClasses] ABSL_GUARDED_BY(mu);
  size_t bytes ABSL_GUARDED_BY(mu) = 0;
};

// Never destroyed: threads return their frames to it when they exit, which
// may happen after static destructors have run.
FrameDepot& Depot() {
  static FrameDepot* depot = new FrameDepot;
  return *depot;
}

// Moves up to `count` frames of class `cls` from the back of `list` to the
// depot, or to malloc once the depot is full.
void ReturnToDepot(size_t cls, std::vector<void*>& list, size_t count) {
  count = std::min(count, list.size());
  const size_t frame_bytes = cls * kSizeClassBytes;
  FrameDepot& depot = Depot();
  size_t kept = 0;
  {
    base::MutexLock lock(&depot.mu);
    kept = std::min(count, (kDepotMaxBytes - std::min(kDepotMaxBytes, depot.bytes)) / std::max<size_t>(frame_bytes, 1));
    std::vector<void*>& shared = depot.free_lists[cls];
    shared.insert(shared.end(), list.end() - static_cast<std::ptrdiff_t>(count),
                  list.end() - static_cast<std::ptrdiff_t>(count - kept));
    depot.bytes += kept * frame_bytes;
  }
  for (size_t i = list.size() - (count - kept); i < list.size(); ++i) std::free(list[i]);
  list.resize(list.size() - count);
}

// Refills an empty `list` of class `cls` from the depot; false if it has none.
bool RefillFromDepot(size_t cls, std::vector<void*>& list) {
  FrameDepot& depot = Depot();
  base::MutexLock lock(&depot.mu);
  std::vector<void*>& shared = depot.free_lists[cls];
  if (shared.empty()) return false;
  const size_t n = std::min(kDepotBatch, shared.size());
  list.insert(list.end(), shared.end() - static_cast<std::ptrdiff_t>(n), shared.end());
  shared.resize(shared.size() - n);
  depot.bytes -= n * cls * kSizeClassBytes;
  return true;
}

struct FramePool {
  std::vector<void*> free_lists[kNumSizeClasses];
  std::vector<std::pair<size_t, void*>> large;  // (bytes, block)
  ~FramePool() {
    for (size_t cls = 0; cls < kNumSizeClasses; ++cls) ReturnToDepot(cls, free_lists[cls], free_lists[cls].size());
    for (auto& [bytes, p] : large) std::free(p);
  }
};

FramePool& ThreadPool() {
  thread_local FramePool pool;
  return pool;
}

// Hands this thread's pooled frames to the depot (large ones to malloc): a
// thread that frees frames and allocates none (the frame reclaimer's) would
// strand them.
void FlushThreadPool() {
  FramePool& pool = ThreadPool();
  for (size_t cls = 0; cls < kNumSizeClasses; ++cls) ReturnToDepot(cls, pool.free_lists[cls], pool.free_lists[cls].size());
  for (auto& [bytes, p] : pool.large) std::free(p);
  pool.large.clear();
}

void* AllocateBytes(size_t bytes) {
  size_t cls = bytes / kSizeClassBytes;
  if (cls < kNumSizeClasses) {
    auto& list = ThreadPool().free_lists[cls];
    if (!list.empty() || RefillFromDepot(cls, list)) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
  } else {
    auto& large = ThreadPool().large;
    for (size_t i = 0; i < large.size(); ++i) {
      if (large[i].first != bytes) continue;
      void* p = large[i].second;
      large.erase(large.begin() + static_cast<std::ptrdiff_t>(i));
      return p;
    }
  }
  return std::aligned_alloc(kSizeClassBytes, bytes);
}

void FreeBytes(void* p, size_t bytes) {
  size_t cls = bytes / kSizeClassBytes;
  if (cls < kNumSizeClasses) {
    auto& list = ThreadPool().free_lists[cls];
    list.push_back(p);
    if (list.size() > kLocalMaxPerClass) ReturnToDepot(cls, list, kDepotBatch);
    return;
  } else if (bytes <= kMaxLargeFrameBytes) {
    auto& large = ThreadPool().large;
    if (large.size() == kMaxLargeFrames) {
      std::free(large.front().second);
      large.erase(large.begin());
    }
    large.push_back({bytes, p});
    return;
  }
  std::free(p);
}

}  // namespace

Frame* AllocateFrame(const ExecBlock& block) {
  void* mem = AllocateBytes(block.frame_bytes);
  if (mem == nullptr) return nullptr;
  Frame* f = new (mem) Frame;
  f->block = &block;
  f->parent = nullptr;
  f->loop = nullptr;
  f->instance = nullptr;
  f->run = nullptr;
  f->iteration = 0;
  f->return_block = -1;
  f->label = -1;
  f->slot_in_parent = -1;
  f->depth = 0;
  f->caller_node = -1;
  f->next_iteration.store(nullptr, std::memory_order_relaxed);
  f->refs.store(0, std::memory_order_relaxed);
  f->shared.store(false, std::memory_order_relaxed);
  f->may_have_tail_child.store(false, std::memory_order_relaxed);
  f->atomic_counts.store(false, std::memory_order_relaxed);
  f->pending_ptr = reinterpret_cast<std::atomic<int32_t>*>(reinterpret_cast<char*>(f) + block.pending_offset);
  f->slots_ptr = reinterpret_cast<Token*>(reinterpret_cast<char*>(f) + block.slots_offset);
  static_assert(sizeof(std::atomic<int32_t>) == sizeof(int32_t), "pending counters are plain int32 in memory");
  if (!block.image.empty()) {
    std::memcpy(reinterpret_cast<char*>(f) + block.pending_offset, block.image.data(), block.image.size());
    f->holds_tensors.store(false, std::memory_order_relaxed);
    return f;
  }
  if (!block.pending_template.empty())
    std::memcpy(static_cast<void*>(f->pending()), block.pending_template.data(),
                sizeof(int32_t) * block.pending_template.size());
  // Zero bytes are empty child slots and empty (invalid, live) tokens.
  std::memset(static_cast<void*>(f->children()), 0, block.frame_bytes - block.children_offset);
  bool tensors = false;
  for (const auto& [slot, value] : block.prefilled) {
    f->slots_ptr[slot].value = value;
    tensors |= !value.is_inline_scalar();
  }
  f->holds_tensors.store(tensors, std::memory_order_relaxed);
  return f;
}

void ReleaseFrameTensors(Frame* f) {
  const ExecBlock& block = *f->block;
  if (f->holds_tensors.load(std::memory_order_relaxed)) {
    // Only slots that received a buffer need a release; scalar programs
    // (fib: one frame per call) skip the walk.
    Token* slots = f->slots();
    for (int32_t i = 0; i < block.num_slots; ++i) {
      if (!slots[i].value.is_inline_scalar()) slots[i].value = Tensor();
    }
  }
  Token* args = f->args();
  for (int32_t i = 0; i < block.num_args; ++i) {
    if (!args[i].value.is_inline_scalar()) args[i].value = Tensor();
  }
}

void FreeFrame(Frame* f) {
  const ExecBlock& block = *f->block;
  ReleaseFrameTensors(f);
  delete f->instance;
  const size_t bytes = block.frame_bytes;
  f->~Frame();
  FreeBytes(f, bytes);
}

// ---------------------------------------------------------------------------
// Run state.

namespace {

constexpr int32_t kMergeFired = 1 << 30;
// A main-block node a pruned run leaves out (prune.h) starts with this
// pending count: no number of its inputs brings it to zero, and a
// DstMode::kSingleInMain edge reads it. A left-out Merge starts as fired.
constexpr int32_t kPruned = 1 << 29;
constexpr int32_t kMergeCountMask = 0xFFFF;
constexpr int kCheckInterval = 1024;
// Surplus ready nodes are offered to idle workers only when the local stack
// holds more than this: a chain with one or two ready nodes (ack, a loop
// counter) stays on one worker instead of bouncing its frames between cores.
constexpr size_t kOfferThreshold = 2;
// Firings between the root worker's checks whether its helpers are done.
constexpr int kAloneCheckInterval = 64;
// Frames a worker creates or frees before it publishes the change to the
// run's live count when other workers run too (SessionOptions::
// exact_live_frames says what that means for the peak and the limit).
constexpr int64_t kLiveBatch = 32;
// Whether an offered task was worth waking a worker and moving frames
// between cores for. It must have run while other workers were busy too
// (RunState::ChangeBusy), and either fired this many nodes (ack's thieves
// fire 50-1000 nodes of eager argument work, and each offer shares a chain
// of ancestor frames: judged worth it at 512, 2 workers ran ack 1.9x slower)...
constexpr int64_t kWorthStealingFirings = 4096;
// ...or run this long in heavy firings (a TreeRNN node: a few firings, one
// of them a 300x150 MatMul), this long each on average. Time alone
// overrates scalar work: a thief's firings run on cold frames, several
// times slower than their owner's (ack: 100-250 ns each).
constexpr std::chrono::microseconds kWorthStealing{20};
constexpr std::chrono::microseconds kHeavyFiring{1};
// ...or been coarse: at least this many firings per offered item, and this
// many in all. fib's thieves fire 1,000-50,000 nodes from 1-9 items, ack's
// ~3 per item from 100-600 items (eager argument work, fine-grained however
// much of it there is). Judging fib's smaller thefts by kWorthStealingFirings
// alone doubled the offer interval up to 2^18 in a fib(24) run, and the
// thief idled: 2 workers 1.5x instead of 1.8x.
constexpr int64_t kCoarseFiringsPerItem = 64;
constexpr int64_t kCoarseMinFirings = 256;
// Offers judged not worth it double the firings between offers up to this
// (about 15 ms of scalar firings; at 2^16, ack(3,8) still offered ~460 times).
constexpr int kMaxOfferInterval = 1 << 20;
// How many result deliveries may fire their consumers nested in each other
// (Worker::DeliverReturns): bounds the C++ stack a chain of returns uses.
constexpr int kMaxNestedReturns = 16;

// A worker alone with the run's frames (a 1-worker run, or the root worker
// while no offered task is unfinished) needs no lock prefix on its
// read-modify-writes (each one a full barrier on x86): they are a load and
// a store. Otherwise they are real atomic operations.
template <typename T, typename D>
inline T FetchAdd(std::atomic<T>& a, D delta, bool alone) {
  if (alone) {
    const T v = a.load(std::memory_order_relaxed);
    a.store(static_cast<T>(v + delta), std::memory_order_relaxed);
    return v;
  }
  return a.fetch_add(static_cast<T>(delta), std::memory_order_acq_rel);
}

template <typename T>
inline T FetchOr(std::atomic<T>& a, T bits, bool alone) {
  if (alone) {
    const T v = a.load(std::memory_order_relaxed);
    a.store(static_cast<T>(v | bits), std::memory_order_relaxed);
    return v;
  }
  return a.fetch_or(bits, std::memory_order_acq_rel);
}

// A loop's lock, taken only when another worker may touch the loop: a
// worker alone with the run (see FetchAdd) would pay two atomic operations
// per iteration for nothing.
class LoopLock {
 public:
  LoopLock(std::mutex& mu, bool alone) : mu_(alone ? nullptr : &mu) {
    if (mu_ != nullptr) mu_->lock();
  }
  ~LoopLock() {
    if (mu_ != nullptr) mu_->unlock();
  }
  LoopLock(const LoopLock&) = delete;
  LoopLock& operator=(const LoopLock&) = delete;

 private:
  std::mutex* mu_;
};

// The value of control tokens and dead tokens.
const Tensor kNoValue;

// Frames completed by one completion (a chain of returns).
using FrameList = absl::InlinedVector<Frame*, 16>;

struct ReadyItem {
  Frame* frame;
  int32_t node;
};

// The worker's private LIFO of ready nodes (depth-first); push is inline.
class ReadyStack {
 public:
  ReadyStack() { Grow(256); }
  ~ReadyStack() { std::free(items_); }
  ReadyStack(const ReadyStack&) = delete;
  ReadyStack& operator=(const ReadyStack&) = delete;
  void push_back(ReadyItem item) {
    if (size_ == capacity_) Grow(capacity_ * 2);
    items_[size_++] = item;
  }
  ReadyItem back() const { return items_[size_ - 1]; }
  void pop_back() { --size_; }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  void clear() { size_ = 0; }
  ReadyItem* begin() { return items_; }
  ReadyItem* end() { return items_ + size_; }
  // Removes items [first, last), counted from the bottom of the stack.
  void erase_range(size_t first, size_t last) {
    std::memmove(items_ + first, items_ + last, (size_ - last) * sizeof(ReadyItem));
    size_ -= last - first;
  }

 private:
  void Grow(size_t capacity) {
    items_ = static_cast<ReadyItem*>(std::realloc(items_, capacity * sizeof(ReadyItem)));
    if (items_ == nullptr) std::abort();  // out of memory for a few KiB: nothing sensible remains
    capacity_ = capacity;
  }
  ReadyItem* items_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

struct FetchTarget {
  int32_t node;
  int32_t port;
};

}  // namespace

uint64_t NextRunId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

struct RunState {
  // Unique in the process: GPU errors found later are matched to their run.
  const uint64_t id = NextRunId();
  const ExecutableGraph* exe = nullptr;
  const SessionOptions* options = nullptr;
  VariableStore* variables = nullptr;
  std::vector<Tensor> feeds;                 // by placeholder ordinal
  // Main-block nodes (by index in the block) that are fetched or targets:
  // only their firings take the recording path, so the rest of the main
  // graph fires as lean as a function body (a 10^6-op chain).
  std::vector<uint8_t> root_watch;
  absl::flat_hash_map<int32_t, int32_t> fetch_first;  // node id -> first fetch index
  std::vector<FetchTarget> fetches;
  std::vector<int32_t> fetch_next;           // next fetch index of the same node
  std::vector<Tensor> fetched;
  std::vector<uint8_t> fetched_set;
  std::vector<uint8_t> fired_in_root;        // per main-block index, set for watched nodes
  // Exits of main-graph loops that are fetched or targets (global ids; a
  // few), and whether each fired: live, or dead when its loop ended
  // without it (Worker::RecordExit).
  std::vector<int32_t> watched_exits;
  std::vector<uint8_t> exit_fired;
  Frame* root = nullptr;
  std::atomic<bool> root_done{false};

  // Read by every firing: on a cache line that per-frame counters do not
  // write (sharing one with live_frames made every firing of a 2-worker
  // run miss on it: fib 2 workers slower than 1).
  alignas(64) std::atomic<bool> stop{false};
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);

  // Written on every frame creation and completion by every worker.
  alignas(64) std::atomic<int64_t> live_frames{0};
  std::atomic<int64_t> peak_live_frames{0};
  alignas(64) std::atomic<int64_t> frames_created{0};
  std::atomic<int64_t> tail_callers_released{0};
  std::atomic<int64_t> max_depth{0};
  std::atomic<int64_t> instantiations{0};
  std::atomic<int64_t> offers_made{0};
  std::atomic<int64_t> shared_frames{0};

  tbb::task_group* group = nullptr;
  int num_workers = 1;
  std::atomic<int> active{0};
  std::atomic<int> offers{0};
  // Worker tasks of the run not yet finished (started or not, the root's
  // included). A worker that reads 1 is the only thread that can touch the
  // run's frames: it uses plain loads and stores (Worker::alone_) until it
  // offers work. Finishing tasks decrement it with release, so everything
  // they did happens before that read.
  std::atomic<int> workers{1};
  // Firings between two offers of surplus work. Offered work that turns out
  // tiny (a sequential chain like ack) doubles it, so a worker is not woken
  // for a few firings at a time; substantial stolen work halves it again.
  std::atomic<int> offer_interval{1};
  // Worker-time spent in Loop so far, integrated over the run: a thief
  // compares it before and after its stolen work to see how long other
  // workers were busy beside it. In a sequential chain (ack) the offerer
  // runs dry right after offering and the thief carries the chain on alone:
  // the two take turns, nothing runs in parallel, and the offer was not
  // worth making however long the stolen work ran.
  absl::Mutex busy_mu;
  int64_t busy_integral_ns ABSL_GUARDED_BY(busy_mu) = 0;
  int64_t busy_changed_ns ABSL_GUARDED_BY(busy_mu) = 0;
  int busy_workers ABSL_GUARDED_BY(busy_mu) = 0;
  // Adds `delta` busy workers at `now`; returns the integral up to `now`.
  int64_t ChangeBusy(int delta, int64_t now) {
    base::MutexLock lock(&busy_mu);
    busy_integral_ns += (now - busy_changed_ns) * busy_workers;
    busy_changed_ns = now;
    busy_workers += delta;
    return busy_integral_ns;
  }

  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point deadline;
  bool has_deadline = false;
  const CancellationToken* cancel = nullptr;
  bool collect_node_stats = false;  // RunRequest's

  bool tracing = false;
  ExecutionObserver* observer = nullptr;
  TraceWriter* trace = nullptr;

  // Merged worker statistics.
  std::vector<int64_t> live_by_op ABSL_GUARDED_BY(mu);
  std::vector<int64_t> dead_by_op ABSL_GUARDED_BY(mu);
  std::vector<int64_t> live_by_node ABSL_GUARDED_BY(mu);
  std::vector<int64_t> dead_by_node ABSL_GUARDED_BY(mu);

  int64_t SinceStart() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  }

  void Fail(absl::Status s) {
    {
      base::MutexLock lock(&mu);
      if (status.ok()) status = std::move(s);
    }
    stop.store(true, std::memory_order_release);
  }
};

namespace {

// Error messages show at most the newest kMaxLabelsInMessages labels (deep
// recursion makes tags of a million) and how many more there are; traces
// get whole tags.
constexpr size_t kMaxLabelsInMessages = 64;

std::string TagString(const Frame* f, size_t max_labels = SIZE_MAX) {
  std::vector<std::string> labels;
  size_t omitted = 0;
  for (; f != nullptr && f->kind != Frame::Kind::kRoot; f = f->parent) {
    if (labels.size() >= max_labels) {
      omitted += f->kind == Frame::Kind::kInvocation ? 1 : 2;
      continue;
    }
    if (f->kind == Frame::Kind::kInvocation) {
      // Calls passed over by hand-overs (Worker::HandOverTailChild): their labels
      // are gone, their number is not.
      const int32_t passed_over = f->parent != nullptr ? f->depth - f->parent->depth - 1 : 0;
      if (passed_over > 0) labels.push_back(absl::StrCat("+", passed_over, " tail calls"));
      labels.push_back(absl::StrCat(f->label));
    } else {
      labels.push_back(absl::StrCat(f->iteration));
      labels.push_back(f->block->name);
    }
  }
  if (omitted > 0) labels.push_back(absl::StrCat("... ", omitted, " more"));
  return absl::StrCat("[", absl::StrJoin(labels, ", "), "]");
}

std::string NodeAtTag(const NodeInfo& n, const Frame* f) {
  // Dynamic mode runs function bodies under their own, function-local node
  // names (static mode's transformed names start with "function/"): name
  // the function too, or "Gather_1" could be any body's.
  const Frame* invocation = f;
  while (invocation != nullptr && invocation->kind == Frame::Kind::kIteration) invocation = invocation->parent;
  std::string in_function;
  if (invocation != nullptr && invocation->kind == Frame::Kind::kInvocation && invocation->block != nullptr) {
    const std::string& fn = invocation->block->name;
    if (!absl::StartsWith(n.def->name, absl::StrCat(fn, "/"))) in_function = absl::StrCat(" in function '", fn, "'");
  }
  return absl::StrCat("node '", n.def->name, "' (", n.def->op, ")", in_function, " at tag ",
                      TagString(f, kMaxLabelsInMessages));
}

class Worker {
 public:
  explicit Worker(RunState* run) : run_(run), exe_(run->exe) {
    const size_t ops = exe_->op_names.size();
    live_by_op_.assign(ops, 0);
    dead_by_op_.assign(ops, 0);
    if (run->collect_node_stats) {
      live_by_node_.assign(exe_->nodes.size(), 0);
      dead_by_node_.assign(exe_->nodes.size(), 0);
    }
    worker_id_ = tbb::this_task_arena::current_thread_index();
    frame_cache_.assign(exe_->blocks.size(), FrameCache{});
    fast_ok_ = !run->tracing && live_by_node_.empty();
    multi_ = run->num_workers > 1;
    exact_live_ = run->options->exact_live_frames;
  }


  ~Worker() { DropFrameCache(); }

  void Loop(std::vector<ReadyItem> items);
  // Work pushed into `f` from now on is frame-local (Push): the root's
  // sources all fire before any invocation they create runs, so a tail
  // recursion called from main with several arguments gets all of them
  // before it descends, and its callers can be released as it goes.
  void WorkIn(Frame* f) {
    current_ = f;
    current_loop_ = f->loop;
  }
  void Flush();

  // Nodes of the frame being fired go on the frame-local stack and run
  // before any other frame's: a frame finishes its own work (dead branch
  // drains included) before the worker descends into the invocations it
  // created, so it is reclaimed as soon as its results return. With one
  // LIFO, that leftover work sank under the recursion and kept every frame
  // of a long call chain alive (ack(3,5): 21.6k live frames vs native depth 255).
  // Iterations of the current frame's loop count as local: the next
  // iteration may start before this one ends, up to parallel_iterations.
  void Push(Frame* f, int32_t node) {
    if (f == current_ || (f->loop != nullptr && f->loop == current_loop_)) {
      local_.push_back({f, node});
    } else {
      stack_.push_back({f, node});
    }
  }
  // Inlined at every call: a firing ends in one, and most only decrement.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Release(Frame* f, int64_t delta);
  // Plain loads and stores suffice for `f`'s counters: no other worker runs,
  // or none can reach `f` (Frame::shared).
  const NodeInfo& Info(const ExecNode& n) const { return exe_->info[n.id]; }
  bool Alone(const Frame* f) const { return alone_ || !f->atomic_counts.load(std::memory_order_relaxed); }
  void MarkShared(Frame* f) {
    f->shared.store(true, std::memory_order_relaxed);
    f->atomic_counts.store(true, std::memory_order_relaxed);
    ++shared_frames_;
  }
  // Before work in `f` is offered: `f` and its ancestors become shared, and
  // so does every live child that several nodes of a newly shared frame feed.
  void Share(Frame* f);
  int64_t fired() const { return fired_; }
  // Runs with several workers: how long Loop ran, and how long other
  // workers were busy meanwhile (summed over them).
  int64_t loop_ns() const { return loop_ns_; }
  int64_t others_busy_ns() const { return others_busy_ns_; }

 private:
  void Fire(Frame* f, const ExecNode& n);
  bool FireFast(Frame* f, const ExecNode& n);
  bool FireLean(Frame* f, const ExecNode& n) {
    switch (n.lean) {
      case LeanKind::kScalarBinary: return FireScalarBinary(f, n);
      case LeanKind::kSwitch: return FireSwitch(f, n);
      case LeanKind::kPassThrough:
      case LeanKind::kConst: return FireOneOutput(f, n);
      default: return false;
    }
  }
  bool FireScalarBinary(Frame* f, const ExecNode& n);
  bool FireSwitch(Frame* f, const ExecNode& n);
  // A lean Switch with live data and predicate `p`: routes the data and
  // returns the nodes made ready (the caller releases the firing's
  // reference), or -1 when the general path must fire it.
  int RouteSwitch(Frame* f, const ExecNode& n, const Tensor& p);
  bool FireOneOutput(Frame* f, const ExecNode& n);
  void EmitLive(Frame* f, const ExecNode& n, const Tensor& out);
  // EmitLive without releasing the firing's reference: the nodes made ready.
  int Emit(Frame* f, const ExecNode& n, const Tensor& out);
  // Edge `e` of a Switch carries `value` to a lean scalar op that needs
  // nothing else (OutEdge::kValueInline): it fires now. The nodes made
  // ready, or -1 when it must be delivered as usual.
  int FireScalarWith(Frame* f, const OutEdge& e, const Tensor& value);
  // Stores a token in its destination slot; true when that makes the
  // destination ready.
  bool DeliverEdge(Frame* t, const OutEdge& e, const Tensor& value, bool dead);
  // DeliverEdge into a Merge (DstMode::kMerge or kMergeMark): out of line,
  // so that the common case inlines small.
  ABSL_ATTRIBUTE_NOINLINE bool DeliverToMerge(Frame* t, const OutEdge& e, const Tensor& value, bool dead);
  bool Deliver(Frame* t, const OutEdge& e, Token&& tok) { return DeliverEdge(t, e, tok.value, tok.dead()); }
  bool DeliverToNode(Frame* t, int32_t dst, int32_t slot, const Tensor& value, bool dead);
  bool DeliverMerge(Frame* t, const ExecNode& dst, int32_t slot, const Tensor& value, bool dead);
  // A dead token into Merge `dst` of `t`: true when it makes the Merge fire
  // (dead: every input arrived dead).
  bool CountDeadIntoMerge(Frame* t, const ExecNode& dst);
  bool FireKernelSlow(Frame* f, const ExecNode& n, Token* out);
  void RecordFiring(Frame* f, const ExecNode& n, bool dead, std::chrono::steady_clock::time_point t0);
  void RecordFetch(const ExecNode& n, const Token* out);
  void RecordExit(const ExecNode& exit, const Token& out);
  // Dynamic mode: result `port` of a fetched Invoke of the root frame.
  void RecordResult(const ExecNode& invoke, int32_t port, const Token& result);
  // Delivers `tok` along [begin, end) into `t`; returns the ready count.
  int DeliverEdges(Frame* t, const OutEdge* begin, const OutEdge* end, Token* outs, bool dead);
  void PropagateLocal(Frame* f, const ExecNode& n, Token* outs, bool dead);
  // PropagateLocal without releasing the firing's reference: the nodes of
  // `f` made ready.
  int Propagate(Frame* f, const ExecNode& n, Token* outs, bool dead);
  // A Const that the live port of a Switch triggers (OutEdge::kConstInline)
  // fires now; returns the nodes of `f` it made ready.
  int FireConstWith(Frame* f, const OutEdge& e);
  void FireCallWith(Frame* f, const OutEdge& e, const Tensor& value);
  // A result's edges into the caller's frame `t`: a scalar op or a
  // one-input Call there that the value makes ready (OutEdge::kReturnInline)
  // fires now, up to kMaxNestedReturns deep (a chain of returns can be as
  // long as the recursion is deep). Returns the nodes of `t` made ready.
  int DeliverReturns(Frame* t, const OutEdge* begin, const OutEdge* end, Token* outs, bool dead);
  void ForwardTailResult(Frame* t, const OutEdge* e, const Tensor& value);
  // A two-input scalar op of `t` whose inputs are all there: fired now, or
  // -1 (the general path must fire it).
  int FireScalarReady(Frame* t, const ExecNode& d);
  // A Switch's outputs: `dead_port` >= 0 (a grouped Switch's untaken port)
  // is held back for the group's frontier; pivot edges are live when
  // `pivot_port` (-1: a dead predicate) is theirs.
  void PropagateSwitch(Frame* f, const ExecNode& n, Token* outs, bool dead, int dead_port, int pivot_port);
  ABSL_ATTRIBUTE_NOINLINE void PropagateDeadData(Frame* f, const ExecNode& n, int held_port, int taken_port);
  // One grouped Switch of `n`'s group has fired: the last of the group in
  // `f` delivers the dead region's frontier. Returns the nodes made ready.
  int CountDownDeadRegion(Frame* f, const ExecNode& n, int dead_port) {
    const DeadRegionGroup& group = f->block->dead_regions[n.switch_group];
    if (FetchAdd(f->pending()[group.counter_index], -1, Alone(f)) != 1) return 0;
    const std::vector<OutEdge>& frontier = group.frontier[dead_port];
    if (frontier.size() == 1 && frontier[0].dst_mode == DstMode::kMerge) {
      // A Cond's result Merge alone (fib: every call): no call, no loop.
      if (!CountDeadIntoMerge(f, exe_->nodes[frontier[0].dst])) return 0;
      Push(f, frontier[0].dst);
      return 1;
    }
    return DeliverFrontier(f, frontier);
  }
  // Out of line: only a group's last Switch in a frame gets here, and the
  // others should not pay for its register spills.
  ABSL_ATTRIBUTE_NOINLINE int DeliverFrontier(Frame* f, const std::vector<OutEdge>& frontier);
  void FireEnter(Frame* f, const ExecNode& n, Token* outs, bool dead);
  void FireNextIteration(Frame* f, const ExecNode& n, Token* outs, bool dead);
  // `self_ref`: the references the firing holds on `f` (1, or 0 when a
  // lean firing calls it for the Call it made ready: OutEdge::kCallInline).
  void FireCall(Frame* f, const ExecNode& n, Token* outs, bool dead, int self_ref = 1);
  void FireCallWhenComplete(Frame* f, const ExecNode& n, Token* outs, bool dead, int self_ref);
  void FinishSplitCall(Frame* f, const ExecNode& n, Frame* child, int child_delta, bool dead, int self_ready,
                       int self_ref);
  int EnterDeadArgs(Frame* child, const ExecNode& n, uint64_t mask);
  // A call site that no argument entered: its Returns emit dead in `f`.
  // Returns the nodes made ready.
  int ReturnDead(Frame* f, const ExecNode& call);
  // A dead token into `slot` of `node` in `t` (or along its edges when the
  // node is forwarded: an argument Merge or a Return that never fires).
  // Returns the nodes made ready.
  int DeliverDead(Frame* t, int32_t node, int32_t slot);
  void FireInvoke(Frame* f, const ExecNode& n, bool dead);
  void FireRetval(Frame* f, const ExecNode& n, Token* outs, bool dead);
  Frame* NewFrame(const ExecBlock& block, Frame::Kind kind, Frame* parent, const ExecNode& creator);
  // A finished invocation's frame: kept for the next invocation of its
  // block on this worker, or freed.
  void RecycleFrame(Frame* f);
  // A finished static-mode invocation's frame leaves the run's live count.
  void RecycleInvocation(Frame* f) {
    if (!f->holds_tensors.load(std::memory_order_relaxed) && !f->block->image.empty()) {
      // RecycleFrame with nothing to release: a static-mode invocation never
      // writes its argument tokens (FireInvoke does, in dynamic mode).
      KeepFrame(frame_cache_[f->block->id], f);
    } else {
      RecycleFrame(f);
    }
    AddLive(-1);
  }
  // `f`'s references just dropped to one: when that is the invocation of
  // one of its tail sites, the invocation takes f's place (HandOverTailChild).
  // Only the flag is tested inline: Release must stay small enough to inline.
  void MaybeHandOverTailChild(Frame* f) {
    if (f->may_have_tail_child.load(std::memory_order_relaxed)) MaybeHandOverTailChildSlow(f);
  }
  ABSL_ATTRIBUTE_NOINLINE void MaybeHandOverTailChildSlow(Frame* f);
  void HandOverTailChild(Frame* f, Frame* child);
  // The node that delivers result node `n`'s result for handed-over frame `f`.
  const ExecNode& ResultStandIn(const Frame* f, const ExecNode& n) const {
    return exe_->nodes[exe_->blocks[f->return_block].result_nodes[Info(n).result_index]];
  }
  void DropFrameCache();
  Frame* CreateIteration(LoopState* loop, int64_t k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop->mu);
  void FrameDone(Frame* f);
  void FrameDoneAll(Frame* first);
  void IterationDone(Frame* f, FrameList* release, LoopState** loop_release);
  void LoopDone(LoopState* loop, FrameList* release);
  void Offer();
  // An invocation that some Call of its site has not entered yet (a site of
  // several Calls creates its invocation at the first argument to arrive).
  // Not a split site's: its forward part (a whole recursive forward pass in
  // a gradient) runs before the other part can arrive.
  bool AwaitsArguments(const Frame* f) const {
    if (f->kind != Frame::Kind::kInvocation || f->parent == nullptr || f->slot_in_parent < 0) return false;
    const int32_t calls = f->parent->block->child_site_calls[f->slot_in_parent];
    if (calls <= 1 || calls == std::numeric_limits<int32_t>::max()) return false;
    const ChildSlot& cs = f->parent->children()[f->slot_in_parent];
    return static_cast<int32_t>(cs.arrivals.load(std::memory_order_acquire) & 0xFFFF) < calls;
  }
  // Every kAloneCheckInterval firings: back to plain loads and stores once
  // no other worker can touch the run's frames; every kCheckInterval,
  // CheckLimits. False when the run must stop.
  bool PeriodicChecks();
  bool CheckLimits();
  void CountFrame(int32_t depth);
  void AddLive(int64_t delta);
  void PublishLive();
  const OutEdge* EdgesBegin(const Frame* f, const ExecNode& n) const {
    if (f->instance == nullptr) return n.out().data();
    return f->instance->edges.data() + f->instance->edge_begin[n.index];
  }
  const OutEdge* EdgesEnd(const Frame* f, const ExecNode& n) const {
    if (f->instance == nullptr) return n.out().data() + n.out().size();
    return f->instance->edges.data() + f->instance->edge_begin[n.index + 1];
  }

  static constexpr int32_t kInlineOutputs = 4;
  RunState* run_;
  const ExecutableGraph* exe_;
  ReadyStack stack_;  // other frames' ready nodes: offered to idle workers
  ReadyStack local_;  // ready nodes of current_
  Frame* current_ = nullptr;  // the frame whose work local_ holds
  LoopState* current_loop_ = nullptr;  // its loop (iterations), else null
  // Scratch reused across firings (no per-firing construction).
  Token out_[kInlineOutputs];
  std::vector<Token> many_out_;
  std::vector<const Tensor*> in_ptrs_;
  std::vector<Tensor> kernel_out_;
  std::vector<int64_t> live_by_op_, dead_by_op_, live_by_node_, dead_by_node_;
  int worker_id_ = 0;
  // No other thread can touch this run's frames (see FetchAdd): a run with
  // one worker, or the root worker while no offered task is unfinished.
  bool alone_ = false;
  int64_t live_delta_ = 0;  // frames created minus freed, not yet in RunState::live_frames
  bool exact_live_ = false;  // SessionOptions::exact_live_frames
  bool multi_ = false;  // the run has several workers: surplus work is offered
  int until_periodic_ = kAloneCheckInterval;  // firings until PeriodicChecks
  int periodic_ = 0;                          // PeriodicChecks since CheckLimits
  bool fast_ok_ = false;  // no tracing, no per-node counts: FireFast may run
  int since_offer_ = 0;
  int nested_returns_ = 0;  // DeliverReturns within DeliverReturns
  int64_t fired_ = 0;
  int64_t loop_ns_ = 0;
  int64_t others_busy_ns_ = 0;
  int64_t frames_created_ = 0;
  int64_t tail_callers_released_ = 0;
  int64_t shared_frames_ = 0;
  int64_t max_depth_ = 0;
  // Per block: frames of finished invocations, the most recent last. A
  // kept frame still has its block's layout and the fields every invocation
  // shares (block, array pointers, kind, no loop or copied body): taking
  // one costs the image copy and the per-call fields, where the pool cost a
  // thread-local lookup, a size-class list and the whole header (a quarter
  // of a fib call's instructions went to frame life).
  struct FrameCache {
    Frame* head = nullptr;  // linked through Frame::parent
    size_t size = 0;
  };
  std::vector<FrameCache> frame_cache_;
  void KeepFrame(FrameCache& cache, Frame* f);
  ABSL_ATTRIBUTE_NOINLINE void SpillFrameCache(FrameCache& cache);
};

void Worker::CountFrame(int32_t depth) {
  // Creation counts and depths are per worker (merged in Flush); only the
  // live count, whose peak is a fact about the whole run, is shared.
  ++frames_created_;
  if (depth > max_depth_) max_depth_ = depth;
  AddLive(1);
}

inline void Worker::AddLive(int64_t delta) {
  if (alone_) {
    const int64_t live = FetchAdd(run_->live_frames, delta, true) + delta;
    if (live > run_->peak_live_frames.load(std::memory_order_relaxed))
      run_->peak_live_frames.store(live, std::memory_order_relaxed);
    return;
  }
  // With other workers, one shared counter written per frame made every
  // call two contended read-modify-writes (fib at 2 workers: a quarter of
  // the time): changes are published in batches unless counts must be exact
  // (SessionOptions::exact_live_frames).
  live_delta_ += delta;
  if (exact_live_ || live_delta_ >= kLiveBatch || live_delta_ <= -kLiveBatch) PublishLive();
}

void Worker::PublishLive() {
  if (live_delta_ == 0) return;
  const int64_t live = run_->live_frames.fetch_add(live_delta_, std::memory_order_relaxed) + live_delta_;
  live_delta_ = 0;
  int64_t peak = run_->peak_live_frames.load(std::memory_order_relaxed);
  while (live > peak && !run_->peak_live_frames.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

Frame* Worker::NewFrame(const ExecBlock& block, Frame::Kind kind, Frame* parent, const ExecNode& creator) {
  const int32_t depth = parent->depth + 1;
  if (depth > run_->options->max_tag_depth) {
    run_->Fail(absl::ResourceExhaustedError(
        absl::StrCat("recursion limit: ", block.kind == ExecBlock::Kind::kLoop ? "loop '" : "function '", block.name,
                     "' would reach tag depth ", depth, ", over max_tag_depth ", run_->options->max_tag_depth,
                     " (", NodeAtTag(Info(creator), parent), ")")));
    return nullptr;
  }
  if (run_->live_frames.load(std::memory_order_relaxed) >= run_->options->max_live_frames) {
    run_->Fail(absl::ResourceExhaustedError(
        absl::StrCat("frame limit: ", run_->options->max_live_frames, " live frames reached entering ",
                     block.kind == ExecBlock::Kind::kLoop ? "loop '" : "function '", block.name, "' at tag depth ",
                     depth, " (", NodeAtTag(Info(creator), parent), ")")));
    return nullptr;
  }
  FrameCache& cache = frame_cache_[block.id];
  Frame* f = cache.head;
  if (f != nullptr && kind == Frame::Kind::kInvocation) {
    cache.head = f->parent;
    --cache.size;
    // Only frames whose block has an image are kept. Of it, only the
    // pending counts, child slots, folded constants (a firing may move one
    // out of its slot; they are the first slots) and arguments need
    // restoring: every other slot is written before it is read, and holds
    // an inline scalar (buffers were released when the frame was kept).
    // fib: 240 of 400 bytes.
    char* base = reinterpret_cast<char*>(f);
    std::memcpy(base + block.pending_offset, block.image.data(),
                block.slots_offset - block.pending_offset + sizeof(Token) * block.prefilled_slots_end);
    if (block.num_args > 0)
      std::memset(base + block.args_offset, 0, sizeof(Token) * static_cast<size_t>(block.num_args));
    f->return_block = -1;
    f->label = -1;
    f->slot_in_parent = -1;
    f->refs.store(0, std::memory_order_relaxed);
    f->may_have_tail_child.store(false, std::memory_order_relaxed);
    f->holds_tensors.store(false, std::memory_order_relaxed);
    f->shared.store(false, std::memory_order_relaxed);
    f->atomic_counts.store(false, std::memory_order_relaxed);
  } else {
    f = AllocateFrame(block);
    if (f == nullptr) {
      run_->Fail(absl::ResourceExhaustedError(absl::StrCat("out of memory creating a frame of '", block.name, "'")));
      return nullptr;
    }
    f->kind = kind;
  }
  f->parent = parent;
  f->run = run_;
  f->depth = depth;
  CountFrame(depth);
  return f;
}

// Frames that FreeFrame would free, kept in frame_cache_ up to this many per
// block. A full cache goes to the pool, oldest first, so that frames come
// back most recent first from the cache and then the pool alike. With the
// newest arrivals sent to the pool instead (a cap of 64), ack(3,7)'s chains
// of completions came back cold and it ran 5% slower than without a cache
// (7% faster with this).
constexpr size_t kMaxCachedFrames = 4096;

inline void Worker::KeepFrame(FrameCache& cache, Frame* f) {
  if (cache.size == kMaxCachedFrames) SpillFrameCache(cache);
  f->parent = cache.head;
  cache.head = f;
  ++cache.size;
}

void Worker::SpillFrameCache(FrameCache& cache) {
  Frame* oldest_first = nullptr;
  while (cache.head != nullptr) {
    Frame* f = cache.head;
    cache.head = f->parent;
    f->parent = oldest_first;
    oldest_first = f;
  }
  while (oldest_first != nullptr) {
    Frame* f = oldest_first;
    oldest_first = f->parent;
    FreeFrame(f);
  }
  cache.size = 0;
}

void Worker::RecycleFrame(Frame* f) {
  const ExecBlock& block = *f->block;
  if (f->kind != Frame::Kind::kInvocation || f->instance != nullptr || block.image.empty()) {
    FreeFrame(f);
    return;
  }
  ReleaseFrameTensors(f);  // the image copy on reuse resets the rest
  KeepFrame(frame_cache_[block.id], f);
}

void Worker::DropFrameCache() {
  for (FrameCache& cache : frame_cache_) SpillFrameCache(cache);
}

// Only the worker that owns a private frame (and its private relatives)
// runs this, before the hand-off: nothing else touches them meanwhile.
void Worker::Share(Frame* f) {
  FrameList below;
  for (Frame* p = f; p != nullptr && !p->shared.load(std::memory_order_relaxed); p = p->parent) {
    below.push_back(p);
    while (!below.empty()) {
      Frame* g = below.back();
      below.pop_back();
      if (g->shared.load(std::memory_order_relaxed)) continue;
      MarkShared(g);
      const ExecBlock& block = *g->block;
      for (int32_t slot = 0; slot < block.num_child_slots; ++slot) {
        if (!block.child_fed_by_several[slot]) continue;
        ChildSlot& cs = g->children()[slot];
        void* child = cs.child.load(std::memory_order_acquire);
        if (child == nullptr || child == kChildDone) continue;
        // Once every Call of its site has fired, nothing more enters the
        // invocation from g: it stays private (else ack's whole live
        // recursion below an offered frame became shared).
        if (!block.child_is_loop[slot] &&
            static_cast<int32_t>(cs.arrivals.load(std::memory_order_acquire) & 0xFFFF) >= block.child_site_calls[slot])
          continue;
        if (block.child_is_loop[slot]) {
          LoopState* loop = static_cast<LoopState*>(child);
          std::lock_guard<std::mutex> lock(loop->mu);
          for (Frame* iteration : loop->live) below.push_back(iteration);
        } else {
          below.push_back(static_cast<Frame*>(child));
        }
      }
    }
  }
}

inline void Worker::Release(Frame* f, int64_t delta) {
  if (delta == 0) return;
  const int64_t left = FetchAdd(f->refs, delta, Alone(f)) + delta;
  if (left == 0) {
    FrameDone(f);
  } else if (left == 1) {
    MaybeHandOverTailChild(f);
  }
}

// `f` is private and holds one reference: when a tail site's invocation is
// live, that reference is the invocation's, and nothing else can reach f.
void Worker::MaybeHandOverTailChildSlow(Frame* f) {
  if (f->shared.load(std::memory_order_relaxed)) return;
  for (int32_t slot : f->block->tail_child_slots) {
    void* child = f->children()[slot].child.load(std::memory_order_relaxed);
    if (child != nullptr && child != kChildDone) {
      HandOverTailChild(f, static_cast<Frame*>(child));
      return;
    }
  }
  f->may_have_tail_child.store(false, std::memory_order_relaxed);  // every one has returned
}

// `f` has nothing left to do but wait for `child`, the invocation of one of
// its tail sites, whose results are f's: the child takes f's place under
// f's caller (f's slot there, f's label, f's results: Frame::return_block)
// and f is reclaimed now, not when the child returns. Only while f is
// private: then no other worker can reach f or the child (shared frames
// have shared ancestors), and no Call of f's site is still to reach f's
// slot in the caller (f's external reference is gone). f's reference on
// the caller becomes the child's; the child's on f goes with f.
void Worker::HandOverTailChild(Frame* f, Frame* child) {
  Frame* up = f->parent;
  child->parent = up;
  child->slot_in_parent = f->slot_in_parent;
  child->label = f->label;
  child->return_block = f->return_block >= 0 ? f->return_block : f->block->id;
  // When f is a tail site's invocation of `up`, so is the child now.
  up->children()[f->slot_in_parent].child.store(child, std::memory_order_release);
  RecycleInvocation(f);
  ++tail_callers_released_;
}

// Completes `f` and every frame that completes because of it, iteratively
// (a chain of completions can be as long as the recursion is deep).
void Worker::FrameDone(Frame* f) {
  // A static-mode invocation (one per call), and its callers as long as
  // they finish with it, without FrameDoneAll's work list.
  while (f->kind == Frame::Kind::kInvocation && f->instance == nullptr) {
    Frame* parent = f->parent;
    parent->children()[f->slot_in_parent].child.store(kChildDone, std::memory_order_release);
    RecycleInvocation(f);
    const int64_t prev = FetchAdd(parent->refs, -1, Alone(parent));
    if (prev != 1) {
      if (prev == 2) MaybeHandOverTailChild(parent);
      return;
    }
    f = parent;
  }
  FrameDoneAll(f);
}

void Worker::FrameDoneAll(Frame* first) {
  FrameList todo{first};  // inline: completing a frame must not allocate
  while (!todo.empty()) {
    Frame* f = todo.back();
    todo.pop_back();
    switch (f->kind) {
      case Frame::Kind::kRoot:
        run_->root_done.store(true, std::memory_order_release);
        break;
      case Frame::Kind::kInvocation: {
        Frame* parent = f->parent;
        int ready = 0;
        if (f->instance != nullptr) {
          // Dynamic mode: the Invoke's control dependents run after the call.
          const ExecNode& invoke = exe_->nodes[f->caller_node];
          for (const OutEdge& e : invoke.out()) {
            if (e.src_port >= 0) continue;
            if (DeliverEdge(parent, e, kNoValue, false)) {
              Push(parent, e.dst);
              ++ready;
            }
          }
        }
        parent->children()[f->slot_in_parent].child.store(kChildDone, std::memory_order_release);
        RecycleFrame(f);
        AddLive(-1);
        const int64_t left = FetchAdd(parent->refs, ready - 1, Alone(parent)) + ready - 1;
        if (left == 0) {
          todo.push_back(parent);
        } else if (left == 1) {
          MaybeHandOverTailChild(parent);
        }
        break;
      }
      case Frame::Kind::kIteration: {
        LoopState* loop_release = nullptr;
        IterationDone(f, &todo, &loop_release);
        if (loop_release != nullptr && FetchAdd(loop_release->refs, -1, alone_) == 1) {
          LoopDone(loop_release, &todo);
        }
        break;
      }
    }
  }
}

Frame* Worker::CreateIteration(LoopState* loop, int64_t k) {
  const ExecBlock& block = *loop->block;
  Frame* parent = loop->parent;
  Frame* f = AllocateFrame(block);
  if (f == nullptr) {
    run_->Fail(absl::ResourceExhaustedError("out of memory creating a loop iteration"));
    return nullptr;
  }
  f->kind = Frame::Kind::kIteration;
  f->parent = parent;
  f->loop = loop;
  f->atomic_counts.store(true, std::memory_order_relaxed);
  if (parent->shared.load(std::memory_order_relaxed)) MarkShared(f);
  f->run = run_;
  f->iteration = k;
  f->depth = parent->depth + 1;
  CountFrame(f->depth);
  const int64_t external = k == 0 ? block.num_enters : (loop->last_done >= k - 1 ? 0 : 1);
  f->refs.store(external + static_cast<int64_t>(block.sources.size()), std::memory_order_relaxed);
  if (k > 0 && !loop->live.empty() && loop->live.back()->iteration == k - 1)
    loop->live.back()->next_iteration.store(f, std::memory_order_release);
  loop->live.push_back(f);
  loop->created = k + 1;
  for (int32_t src : block.sources) Push(f, src);
  return f;
}

void Worker::IterationDone(Frame* f, FrameList* release, LoopState** loop_release) {
  LoopState* loop = f->loop;
  Frame* succ = nullptr;
  bool chain_end = false;
  int ready_new = 0;
  Frame* created = nullptr;
  {
    LoopLock lock(loop->mu, alone_);
    loop->live.pop_front();
    loop->last_done = f->iteration;
    succ = f->next_iteration.load(std::memory_order_acquire);
    if (!loop->deferred.empty() &&
        static_cast<int32_t>(loop->live.size()) < loop->parallel_iterations) {
      created = CreateIteration(loop, loop->created);
      if (created != nullptr) {
        for (DeferredToken& d : loop->deferred) {
          if (Deliver(created, d.edge, std::move(d.token))) {
            Push(created, d.edge.dst);
            ++ready_new;
          }
        }
        created->refs.fetch_add(ready_new, std::memory_order_relaxed);
      }
      loop->deferred.clear();
    } else if (succ == nullptr && loop->deferred.empty()) {
      chain_end = true;
    }
  }
  FreeFrame(f);
  AddLive(-1);
  if (succ != nullptr && FetchAdd(succ->refs, -1, Alone(succ)) == 1) release->push_back(succ);
  if (chain_end) *loop_release = loop;
}

void Worker::LoopDone(LoopState* loop, FrameList* release) {
  Frame* parent = loop->parent;
  int ready = 0;
  // Exits that never saw a live token deliver one dead token (TensorFlow's
  // "dead exits"), so a loop in an untaken branch drains as dead.
  for (size_t i = 0; i < loop->block->exits.size(); ++i) {
    if (loop->exit_live[i]) continue;
    const ExecNode& exit = exe_->nodes[loop->block->exits[i]];
    if (parent == run_->root && !run_->watched_exits.empty()) {
      Token dead;
      dead.set_dead(true);
      RecordExit(exit, dead);
    }
    for (const OutEdge& e : exit.out()) {
      if (DeliverEdge(parent, e, kNoValue, true)) {
        Push(parent, e.dst);
        ++ready;
      }
    }
  }
  parent->children()[loop->slot_in_parent].child.store(kChildDone, std::memory_order_release);
  delete loop;
  const int64_t left = parent->refs.fetch_add(ready - 1, std::memory_order_acq_rel) + ready - 1;
  if (left == 0) {
    release->push_back(parent);
  } else if (left == 1) {
    // A loop that drains after its frame's tail call was made (a dead loop
    // in an argument's untaken branch) leaves the tail call's reference.
    MaybeHandOverTailChild(parent);
  }
}

bool Worker::DeliverToMerge(Frame* t, const OutEdge& e, const Tensor& value, bool dead) {
  if (e.dst_mode == DstMode::kMergeMark) return dead && CountDeadIntoMerge(t, exe_->nodes[e.dst]);
  if (e.return_tail() && !dead) {
    ForwardTailResult(t, &e, value);
    return false;
  }
  if (e.dst_mode == DstMode::kSingleTail) {  // a dead result fires the result node dead
    t->slots()[e.dst_slot].Set(value, dead);
    return true;
  }
  return DeliverMerge(t, exe_->nodes[e.dst], e.dst_slot, value, dead);
}

bool Worker::DeliverMerge(Frame* t, const ExecNode& dst, int32_t slot, const Tensor& value, bool dead) {
  std::atomic<int32_t>& state = t->pending()[dst.index];
  if (!dead) {
    const int32_t input = slot - dst.slot_base;
    int32_t cur = state.load(std::memory_order_relaxed);
    if (Alone(t)) {
      if (cur & kMergeFired) return false;
      state.store(cur | kMergeFired | (input << 16), std::memory_order_relaxed);
    } else {
      for (;;) {
        if (cur & kMergeFired) return false;  // a second live input: the Merge already fired
        if (state.compare_exchange_weak(cur, cur | kMergeFired | (input << 16), std::memory_order_acq_rel)) break;
      }
    }
    // Only the input that fires the Merge writes its slot, and before the
    // Merge is queued. A later live input that wrote its slot too raced
    // with the firing, which releases every input slot (Worker::Fire), on
    // another worker: its value is dropped unread instead.
    t->slots()[slot].Set(value, false);
    if (!value.is_inline_scalar()) t->holds_tensors.store(true, std::memory_order_relaxed);
    return true;
  }
  return CountDeadIntoMerge(t, dst);
}

inline bool Worker::CountDeadIntoMerge(Frame* t, const ExecNode& dst) {
  const int expected =
      Info(dst).merge_expected[(t->kind == Frame::Kind::kIteration && t->iteration > 0) ? 1 : 0];
  const int32_t prev = FetchAdd(t->pending()[dst.index], 1, Alone(t));
  return (prev & kMergeCountMask) + 1 == expected && !(prev & kMergeFired);
}

inline bool Worker::DeliverEdge(Frame* t, const OutEdge& e, const Tensor& value, bool dead) {
  static_assert(DstMode::kSingleTail > DstMode::kMergeMark && DstMode::kMergeMark > DstMode::kMerge &&
                    DstMode::kMerge > DstMode::kCounted &&
                    DstMode::kCounted > DstMode::kSingleInMain && DstMode::kSingleInMain > DstMode::kSingle,
                "the Merge modes come last");
  if (e.dst_mode >= DstMode::kMerge) return DeliverToMerge(t, e, value, dead);
  t->slots()[e.dst_slot].Set(value, dead);
  if (!value.is_inline_scalar()) t->holds_tensors.store(true, std::memory_order_relaxed);
  if (e.dst_mode == DstMode::kSingle) return true;
  if (e.dst_mode == DstMode::kSingleInMain) return t->pending()[e.dst_index].load(std::memory_order_relaxed) != kPruned;
  return FetchAdd(t->pending()[e.dst_index], -1, Alone(t)) == 1;
}

bool Worker::DeliverToNode(Frame* t, int32_t dst, int32_t slot, const Tensor& value, bool dead) {
  const ExecNode& d = exe_->nodes[dst];
  OutEdge e{dst, slot, d.index, 0, EdgeKind::kLocal, DstModeOf(d.kind, d.pending_init, d.block), -1};
  return DeliverEdge(t, e, value, dead);
}

int Worker::DeliverEdges(Frame* t, const OutEdge* begin, const OutEdge* end, Token* outs, bool dead) {
  int ready = 0;
  for (const OutEdge* e = begin; e != end; ++e) {
    const bool control = e->src_port < 0;
    const Tensor& value = control ? kNoValue : outs[e->src_port].value;
    const bool edge_dead = control ? dead : outs[e->src_port].dead();
    if (DeliverEdge(t, *e, value, edge_dead)) {
      Push(t, e->dst);
      ++ready;
    }
  }
  return ready;
}

void Worker::PropagateLocal(Frame* f, const ExecNode& n, Token* outs, bool dead) {
  Release(f, Propagate(f, n, outs, dead) - 1);
}

int Worker::DeliverReturns(Frame* t, const OutEdge* begin, const OutEdge* end, Token* outs, bool dead) {
  int ready = 0;
  for (const OutEdge* e = begin; e != end; ++e) {
    const bool control = e->src_port < 0;
    const Tensor& value = control ? kNoValue : outs[e->src_port].value;
    const bool edge_dead = control ? dead : outs[e->src_port].dead();
    if (e->return_inline() && !edge_dead && fast_ok_ && nested_returns_ < kMaxNestedReturns &&
        value.is_inline_scalar()) {
      const ExecNode& d = exe_->nodes[e->dst];
      ++nested_returns_;
      if (d.kind == NodeKind::kCall) {
        ++live_by_op_[d.op_id];
        ++fired_;
        Token arg;
        arg.value = value;
        FireCall(t, d, &arg, false, /*self_ref=*/0);
        --nested_returns_;
        continue;
      }
      int fired = -1;
      const bool made_ready = DeliverEdge(t, *e, value, false);
      if (made_ready) fired = FireScalarReady(t, d);
      --nested_returns_;
      if (fired >= 0) {
        ready += fired;
      } else if (made_ready) {
        Push(t, e->dst);
        ++ready;
      }
      continue;
    }
    if (DeliverEdge(t, *e, value, edge_dead)) {
      Push(t, e->dst);
      ++ready;
    }
  }
  return ready;
}

// A live value that the Merges of frame `t` that `e` leads to would only
// pass on to t's result (OutEdge::kReturnTail: a tail call's result, a base
// case's value) goes to t's caller instead, and on up while that caller's
// result is a tail call's too; the frames passed over complete on their
// own. Iterative: a chain of tail calls is as long as the recursion is
// deep. A frame on the way is alive: `t` holds its caller, and so on up.
void Worker::ForwardTailResult(Frame* t, const OutEdge* e, const Tensor& value) {
  for (;;) {
    const ExecNode& own = exe_->nodes[Info(exe_->nodes[e->dst]).tail_result];
    const ExecNode& result = t->return_block < 0 ? own : ResultStandIn(t, own);
    const auto& by_label = Info(result).return_edges_by_label;
    if (t->kind != Frame::Kind::kInvocation || t->label < 0 || t->label >= static_cast<int32_t>(by_label.size()))
      return;  // no site takes the caller's result
    const OutEdge* begin = result.out_begin + by_label[t->label].first;
    const OutEdge* end = result.out_begin + by_label[t->label].second;
    Frame* up = t->parent;
    if (end - begin == 1 && begin->return_tail()) {
      t = up;
      e = begin;
      continue;
    }
    Token outs[1];
    outs[0].value = value;
    const int ready = DeliverReturns(up, begin, end, outs, false);
    if (ready > 0) FetchAdd(up->refs, ready, Alone(up));
    return;
  }
}

int Worker::FireScalarReady(Frame* t, const ExecNode& d) {
  Token* in = t->slots() + d.slot_base;
  if (in[0].dead() || in[1].dead()) return -1;
  Tensor out;
  if (!ComputeScalarBinary(d.scalar_op, in[0].value, in[1].value, &out)) return -1;
  ++fired_;
  if (!d.is_result) return Emit(t, d, out);
  ++live_by_op_[d.op_id];
  Token outs[1];
  outs[0].value = std::move(out);
  return Propagate(t, d, outs, false);
}

int Worker::Propagate(Frame* f, const ExecNode& n, Token* outs, bool dead) {
  const OutEdge* begin = EdgesBegin(f, n);
  const OutEdge* end = EdgesEnd(f, n);
  int ready = 0;
  if (!n.is_result) {
    ready = DeliverEdges(f, begin, end, outs, dead);
  } else {
    // A function result: local edges, then the Return of the creating site.
    if (dead || !Info(n).local_edges_only_merge_marks)
      ready = DeliverEdges(f, begin, begin + Info(n).first_return_edge, outs, dead);
    // A frame handed over to its caller's caller delivers as the result of
    // the same index of the function it stands in for (Frame::return_block).
    const ExecNode& r = f->return_block < 0 ? n : ResultStandIn(f, n);
    if (f->kind == Frame::Kind::kInvocation && f->label >= 0 && !(dead && Info(n).returns_only_live) &&
        f->label < static_cast<int32_t>(Info(r).return_edges_by_label.size())) {
      const auto& range = Info(r).return_edges_by_label[f->label];
      Frame* parent = f->parent;
      const OutEdge* edges = f->return_block < 0 ? begin : r.out_begin;
      int parent_ready = DeliverReturns(parent, edges + range.first, edges + range.second, outs, dead);
      if (parent_ready > 0) FetchAdd(parent->refs, parent_ready, Alone(parent));
    }
  }
  return ready;
}

// A Switch of a dead-region group (DeadRegionGroup): its live port as usual,
// its dead port held back; the group's last Switch to fire in this frame
// delivers the region's frontier instead of the region firing dead.
void Worker::PropagateSwitch(Frame* f, const ExecNode& n, Token* outs, bool dead, int dead_port, int pivot_port) {
  int ready = 0;
  for (const OutEdge* e = EdgesBegin(f, n); e != EdgesEnd(f, n); ++e) {
    if (dead_port >= 0 && e->src_port == dead_port) continue;
    const bool control = e->src_port < 0 || e->pivot();
    const bool edge_dead = e->pivot() ? e->src_port != pivot_port : control ? dead : outs[e->src_port].dead();
    if (DeliverEdge(f, *e, control ? kNoValue : outs[e->src_port].value, edge_dead)) {
      Push(f, e->dst);
      ++ready;
    }
  }
  if (dead_port >= 0) ready += CountDownDeadRegion(f, n, dead_port);
  Release(f, ready - 1);
}

// A grouped Switch whose data arrived dead with a live predicate: what the
// taken port's dead token would make dead is skipped (its frontier gets the
// dead tokens), the held port counts down as usual, control edges go dead.
void Worker::PropagateDeadData(Frame* f, const ExecNode& n, int held_port, int taken_port) {
  int ready = 0;
  for (const OutEdge* e = EdgesBegin(f, n); e != EdgesEnd(f, n); ++e) {
    if (e->src_port >= 0) continue;
    if (DeliverEdge(f, *e, kNoValue, true)) {
      Push(f, e->dst);
      ++ready;
    }
  }
  ready += DeliverFrontier(f, Info(n).dead_data_frontier(taken_port));
  ready += CountDownDeadRegion(f, n, held_port);
  Release(f, ready - 1);
}

int Worker::DeliverFrontier(Frame* f, const std::vector<OutEdge>& frontier) {
  int ready = 0;
  for (const OutEdge& e : frontier) {
    bool made_ready;
    if (e.dst_mode == DstMode::kMerge) {
      // Inline, not through DeliverMerge: a Cond's result Merge is most
      // frontiers' only edge (fib: one per call).
      made_ready = CountDeadIntoMerge(f, exe_->nodes[e.dst]);
    } else {
      made_ready = DeliverEdge(f, e, kNoValue, true);
    }
    if (made_ready) {
      Push(f, e.dst);
      ++ready;
    }
  }
  return ready;
}

void Worker::FireEnter(Frame* f, const ExecNode& n, Token* outs, bool dead) {
  ChildSlot& cs = f->children()[Info(n).child_slot];
  void* p = cs.child.load(std::memory_order_acquire);
  LoopState* loop = static_cast<LoopState*>(p);
  if (p == nullptr) {
    const ExecBlock& block = exe_->blocks[Info(n).target_block];
    auto* fresh = new LoopState;
    fresh->block = &block;
    fresh->parent = f;
    fresh->slot_in_parent = Info(n).child_slot;
    fresh->parallel_iterations = std::max(1, Info(n).parallel_iterations);
    fresh->refs.store(block.num_invariants + 1, std::memory_order_relaxed);
    fresh->invariants.resize(block.num_invariants);
    fresh->exit_live.assign(block.exits.size(), 0);
    void* expected = nullptr;
    if (cs.child.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
      loop = fresh;
      f->refs.fetch_add(1, std::memory_order_relaxed);  // the loop is a child of f
    } else {
      delete fresh;
      loop = static_cast<LoopState*>(expected);
    }
  }
  if (Info(n).is_constant_enter) {
    Frame* start = nullptr;
    int ready = 0;
    int early_enters = 0;
    {
      LoopLock lock(loop->mu, alone_);
      loop->invariants[Info(n).io_index] = outs[0];
      loop->invariants[Info(n).io_index].set_dead(dead);
      if (++loop->invariants_arrived == loop->block->num_invariants && !loop->early.empty()) {
        // Enters that arrived before the invariants start iteration 0 now.
        start = CreateIteration(loop, 0);
        if (start != nullptr) {
          for (DeferredToken& d : loop->early) {
            if (Deliver(start, d.edge, std::move(d.token))) {
              Push(start, d.edge.dst);
              ++ready;
            }
          }
          loop->iteration0 = start;
        }
        loop->early.clear();
        early_enters = loop->early_enters;
        loop->early_enters = 0;
      }
    }
    if (start != nullptr) Release(start, ready - early_enters);
    if (loop->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      FrameList todo;
      LoopDone(loop, &todo);
      for (Frame* t : todo) FrameDone(t);
    }
    Release(f, -1);
    return;
  }
  Frame* it0 = nullptr;
  {
    LoopLock lock(loop->mu, alone_);
    if (loop->invariants_arrived < loop->block->num_invariants) {
      for (const OutEdge& e : n.out()) {
        DeferredToken d{e, Token{}};
        d.token = outs[0];
        d.token.set_dead(dead);
        loop->early.push_back(std::move(d));
      }
      ++loop->early_enters;
    } else {
      it0 = loop->iteration0;
      if (it0 == nullptr) {
        it0 = CreateIteration(loop, 0);
        loop->iteration0 = it0;
      }
    }
  }
  if (it0 != nullptr) {
    int ready = DeliverEdges(it0, n.out().data(), n.out().data() + n.out().size(), outs, dead);
    Release(it0, ready - 1);  // this Enter's arrival is done
  }
  Release(f, -1);
}

void Worker::FireNextIteration(Frame* f, const ExecNode& n, Token* outs, bool dead) {
  if (dead) {  // deadness stops at the back edge (TensorFlow does the same)
    Release(f, -1);
    return;
  }
  Frame* next = f->next_iteration.load(std::memory_order_acquire);
  if (next == nullptr) {
    // Never release a frame while holding the loop's lock: completing it
    // takes the same lock.
    LoopState* loop = f->loop;
    LoopLock lock(loop->mu, alone_);
    next = f->next_iteration.load(std::memory_order_acquire);
    if (next == nullptr) {
      if (static_cast<int32_t>(loop->live.size()) >= loop->parallel_iterations) {
        // The window of iterations in flight is full: park the tokens until
        // the oldest iteration finishes (IterationDone creates k+1 then).
        for (const OutEdge& e : n.out()) {
          DeferredToken d{e, Token{}};
          d.token = outs[0];
          loop->deferred.push_back(std::move(d));
        }
      } else {
        next = CreateIteration(loop, f->iteration + 1);
      }
    }
  }
  if (next != nullptr) {
    int ready = DeliverEdges(next, n.out().data(), n.out().data() + n.out().size(), outs, false);
    if (ready > 0) FetchAdd(next->refs, ready, Alone(next));
  }
  Release(f, -1);
}

void Worker::FireCall(Frame* f, const ExecNode& n, Token* outs, bool dead, int self_ref) {
  // The site's facts in locals: read through Info(n) after each store, they
  // were reloaded every time (the compiler cannot tell the stores miss them).
  const NodeInfo& info = Info(n);
  const int32_t child_slot = info.child_slot;
  const int32_t site_num_calls = info.site_num_calls;
  const int32_t num_call_edges = info.num_call_edges;
  const bool split_site = info.split_site;
  ChildSlot& cs = f->children()[child_slot];
  if (site_num_calls > 1 && !split_site && f->shared.load(std::memory_order_relaxed) &&
      cs.child.load(std::memory_order_acquire) == nullptr) {
    FireCallWhenComplete(f, n, outs, dead, self_ref);
    return;
  }
  int self_ready = 0;
  Frame* child = nullptr;
  int child_ready = 0;
  const OutEdge* begin = n.out().data();
  const OutEdge* end = begin + n.out().size();
  if (!dead) {
    child = static_cast<Frame*>(cs.child.load(std::memory_order_acquire));
    if (child == nullptr) {
      const ExecBlock& block = exe_->blocks[info.target_block];
      Frame* fresh = NewFrame(block, Frame::Kind::kInvocation, f, n);
      if (fresh == nullptr) {
        Release(f, -self_ref);
        return;
      }
      fresh->label = info.label;
      fresh->slot_in_parent = child_slot;
      // Another Call of the site may fire on another worker when f is shared.
      if (site_num_calls > 1 && f->shared.load(std::memory_order_relaxed)) MarkShared(fresh);
      // One external reference until the site's last Call has arrived.
      fresh->refs.store(1 + static_cast<int64_t>(block.sources.size()), std::memory_order_relaxed);
      void* expected = nullptr;
      // Alone: no other Call of the site can race us to the child slot.
      if (site_num_calls == 1 || Alone(f)) {
        cs.child.store(fresh, std::memory_order_release);
        child = fresh;
      } else if (cs.child.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
        child = fresh;
      } else {
        // Another argument's Call created the invocation first: this frame
        // never existed as far as the run is concerned.
        if (fresh->shared.load(std::memory_order_relaxed)) --shared_frames_;
        FreeFrame(fresh);
        AddLive(-1);
        --frames_created_;
        child = static_cast<Frame*>(expected);
        fresh = nullptr;
      }
      if (fresh != nullptr) {
        FetchAdd(f->refs, 1, Alone(f));  // the invocation is a child of f
        if (info.tail_site) f->may_have_tail_child.store(true, std::memory_order_relaxed);
        for (int32_t src : block.sources) Push(fresh, src);
        for (const auto& [merge, slot] : info.missing_arg_merges()) child_ready += DeliverDead(fresh, merge, slot);
      }
    }
    for (const OutEdge* e = begin; e != begin + num_call_edges; ++e) {
      if (DeliverEdge(child, *e, outs[0].value, false)) {
        Push(child, e->dst);
        ++child_ready;
      }
    }
    if (site_num_calls > 1 && child_ready > 0) {
      // Count what we made ready before announcing our arrival: once the
      // site's last Call has arrived it drops the invocation's external
      // reference, and on another worker the invocation could then finish,
      // and its frame be reused, while our ready nodes wait on our stack.
      FetchAdd(child->refs, child_ready, Alone(child));
      child_ready = 0;
    }
  }
  // Control edges to the site's Returns, in this frame.
  for (const OutEdge* e = begin + num_call_edges; e != end; ++e) {
    if (DeliverEdge(f, *e, kNoValue, dead)) {
      Push(f, e->dst);
      ++self_ready;
    }
  }
  if (split_site) {
    FinishSplitCall(f, n, dead ? nullptr : child, dead ? 0 : child_ready, dead, self_ready, self_ref);
    return;
  }
  bool last = true;
  int lives = dead ? 0 : 1;
  if (site_num_calls > 1) {
    if (dead) FetchOr(cs.dead_calls, uint64_t{1} << info.site_call_index, Alone(f));
    uint32_t prev = FetchAdd(cs.arrivals, 1 + (dead ? 0 : (1u << 16)), Alone(f));
    last = static_cast<int32_t>((prev & 0xFFFF) + 1) == site_num_calls;
    lives += static_cast<int>(prev >> 16);
  }
  // Dead arguments of an invocation that has live ones enter it now.
  auto enter_dead_args = [&](Frame* c) {
    int ready = 0;
    uint64_t mask = cs.dead_calls.load(std::memory_order_acquire);
    for (size_t i = 0; mask != 0 && i < info.site_calls().size(); ++i) {
      if (!(mask & (uint64_t{1} << i))) continue;
      for (const OutEdge& e : exe_->nodes[info.site_calls()[i]].out()) {
        if (e.kind == EdgeKind::kCall && DeliverEdge(c, e, kNoValue, true)) {
          Push(c, e.dst);
          ++ready;
        }
      }
    }
    return ready;
  };
  if (!dead) {
    if (last && site_num_calls > 1) child_ready += enter_dead_args(child);
    Release(child, child_ready - (last ? 1 : 0));
  } else if (last) {
    if (lives > 0) {
      Frame* c = static_cast<Frame*>(cs.child.load(std::memory_order_acquire));
      if (c != nullptr && c != kChildDone) Release(c, enter_dead_args(c) - 1);
    } else {
      // No argument entered the body: the Returns emit dead under our tag.
      self_ready += ReturnDead(f, n);
    }
  }
  Release(f, self_ready - self_ref);
}

// A Call of a site of several Calls in a shared frame: other workers may
// fire the site's other Calls. Started at its first argument, as FireCall
// does, the invocation would have to be shared, and so would every frame it
// creates the same way: a whole recursion (tak, ack) on lock-prefixed
// counters. Instead each argument waits in its Call's input slot and the
// site's last Call creates the invocation with all of them, private to its
// worker. Split sites (autodiff's forward part, whose results the other
// part waits for) still start early in FireCall.
void Worker::FireCallWhenComplete(Frame* f, const ExecNode& n, Token* outs, bool dead, int self_ref) {
  ChildSlot& cs = f->children()[Info(n).child_slot];
  if (dead) {
    cs.dead_calls.fetch_or(uint64_t{1} << Info(n).site_call_index, std::memory_order_acq_rel);
  } else if (n.num_data_inputs > 0) {
    f->slots()[n.slot_base].value = std::move(outs[0].value);
  }
  int self_ready = 0;
  const OutEdge* begin = n.out().data();
  for (const OutEdge* e = begin + Info(n).num_call_edges; e != begin + n.out().size(); ++e) {
    if (DeliverEdge(f, *e, kNoValue, dead)) {  // control edges to the site's Returns
      Push(f, e->dst);
      ++self_ready;
    }
  }
  // Release: this argument (or its deadness) is visible to the last Call.
  const uint32_t prev = FetchAdd(cs.arrivals, 1 + (dead ? 0 : (1u << 16)), Alone(f));
  if (static_cast<int32_t>((prev & 0xFFFF) + 1) != Info(n).site_num_calls) {
    Release(f, self_ready - self_ref);
    return;
  }
  if ((prev >> 16) + (dead ? 0 : 1) == 0) {
    // No argument is live: the Returns emit dead under our tag.
    self_ready += ReturnDead(f, n);
    Release(f, self_ready - self_ref);
    return;
  }
  const ExecBlock& block = exe_->blocks[Info(n).target_block];
  Frame* child = NewFrame(block, Frame::Kind::kInvocation, f, n);
  if (child == nullptr) {
    Release(f, self_ready - self_ref);
    return;
  }
  child->label = Info(n).label;
  child->slot_in_parent = Info(n).child_slot;
  child->refs.store(1 + static_cast<int64_t>(block.sources.size()), std::memory_order_relaxed);
  cs.child.store(child, std::memory_order_release);
  FetchAdd(f->refs, 1, Alone(f));  // the invocation is a child of f
  for (int32_t src : block.sources) Push(child, src);
  int child_ready = 0;
  for (const auto& [merge, slot] : Info(n).missing_arg_merges()) child_ready += DeliverDead(child, merge, slot);
  const uint64_t dead_calls = cs.dead_calls.load(std::memory_order_acquire);
  for (size_t i = 0; i < Info(n).site_calls().size(); ++i) {
    const ExecNode& call = exe_->nodes[Info(n).site_calls()[i]];
    const bool arg_dead = (dead_calls >> i) & 1;
    Tensor* arg = call.num_data_inputs > 0 && !arg_dead ? &f->slots()[call.slot_base].value : nullptr;
    const OutEdge* edges = call.out().data();
    for (const OutEdge* e = edges; e != edges + Info(call).num_call_edges; ++e) {
      if (DeliverEdge(child, *e, arg != nullptr ? *arg : kNoValue, arg_dead)) {
        Push(child, e->dst);
        ++child_ready;
      }
    }
    if (arg != nullptr) *arg = Tensor();
  }
  Release(child, child_ready - 1);
  Release(f, self_ready - self_ref);
}

int Worker::DeliverDead(Frame* t, int32_t node, int32_t slot) {
  const ExecNode& d = exe_->nodes[node];
  int ready = 0;
  if (Info(d).forwarded) {  // it would only have passed the dead token on: its consumers take it
    for (const OutEdge& e : d.out()) {
      if (DeliverEdge(t, e, kNoValue, true)) {
        Push(t, e.dst);
        ++ready;
      }
    }
  } else if (DeliverToNode(t, node, slot, kNoValue, true)) {
    Push(t, node);
    ++ready;
  }
  return ready;
}

int Worker::ReturnDead(Frame* f, const ExecNode& call) {
  int ready = 0;
  for (const auto& [ret, slot] : Info(call).site_returns()) ready += DeliverDead(f, ret, slot);
  return ready;
}

int Worker::EnterDeadArgs(Frame* child, const ExecNode& n, uint64_t mask) {
  int ready = 0;
  for (size_t i = 0; mask != 0 && i < Info(n).site_calls().size(); ++i) {
    if (!(mask & (uint64_t{1} << i))) continue;
    for (const OutEdge& e : exe_->nodes[Info(n).site_calls()[i]].out()) {
      if (e.kind == EdgeKind::kCall && DeliverEdge(child, e, kNoValue, true)) {
        Push(child, e.dst);
        ++ready;
      }
    }
  }
  return ready;
}

// The rest of FireCall at a split site (autodiff's paired calls, one site of
// f_ext with a forward and a backward part). Parts complete independently:
// when a part's last Call arrives, its dead arguments enter the invocation
// at once, or, when the part is all dead and no live argument has reached
// the site, its Returns emit dead without an invocation. Waiting for the
// whole site instead would deadlock: the backward part's arguments are
// computed from the forward part's results.
void Worker::FinishSplitCall(Frame* f, const ExecNode& n, Frame* child, int child_delta, bool dead, int self_ready,
                             int self_ref) {
  ChildSlot& cs = f->children()[Info(n).child_slot];
  const uint64_t bit = uint64_t{1} << Info(n).site_call_index;
  // A lock prefix here stalled 1-worker gradient runs on the parent's cold
  // child slot: a locked operation cannot overlap its miss with others.
  const bool alone = Alone(f);
  if (dead) {
    FetchOr(cs.dead_calls, bit, alone);
  } else {
    const uint32_t before = FetchAdd(cs.arrivals, 1u << 16, alone);
    if (before & kSiteClosedDead) {
      // Another part already returned dead: this live argument has no
      // consistent invocation to join (never the case for graphs that
      // AddGradients builds, where both parts share their Cond context).
      run_->Fail(absl::FailedPreconditionError(
          absl::StrCat(NodeAtTag(Info(n), f), ": a live argument reached a call site whose other part was all dead")));
      Release(child, child_delta);
      Release(f, self_ready - self_ref);
      return;
    }
    // The site's first live argument, while its gradient part waits all
    // dead: that part's arguments enter the invocation now.
    if ((before & kSiteDeferredDead) && ((before >> 16) & 0x7FFF) == 0)
      child_delta += EnterDeadArgs(child, n, Info(n).other_part_mask);
  }
  const uint64_t arrived = FetchOr(cs.arrived, bit, alone) | bit;
  auto existing_child = [&]() -> Frame* {
    if (child != nullptr) return child;
    void* c = cs.child.load(std::memory_order_acquire);
    return c == nullptr || c == kChildDone ? nullptr : static_cast<Frame*>(c);
  };
  if ((arrived & Info(n).part_mask) == Info(n).part_mask) {
    const uint64_t part_dead = cs.dead_calls.load(std::memory_order_acquire) & Info(n).part_mask;
    bool closed = false, deferred = false, close_other = false;
    if (part_dead == Info(n).part_mask) {
      // All dead before any live argument. A gradient part waits for the
      // forward part (its dead arguments enter with the first live one, or
      // its Returns go dead with the forward part's); any other part closes
      // the site and returns dead.
      const bool defer = Info(n).split_role == SplitRole::kGradient;
      uint32_t cur = cs.arrivals.load(std::memory_order_acquire);
      while (((cur >> 16) & 0x7FFF) == 0) {
        if (defer && (cur & kSiteClosedDead)) {
          closed = true;  // the forward part returned dead: so does this one
          break;
        }
        const uint32_t want = cur | (defer ? kSiteDeferredDead : kSiteClosedDead);
        if (alone) {
          cs.arrivals.store(want, std::memory_order_relaxed);
        } else if (!cs.arrivals.compare_exchange_weak(cur, want, std::memory_order_acq_rel)) {
          continue;
        }
        (defer ? deferred : closed) = true;
        close_other = !defer && (cur & kSiteDeferredDead);
        break;
      }
    }
    if (closed) {
      self_ready += ReturnDead(f, n);
      if (close_other) {
        const int other = __builtin_ctzll(Info(n).other_part_mask);
        self_ready += ReturnDead(f, exe_->nodes[Info(n).site_calls()[other]]);
      }
    } else if (!deferred && part_dead != 0) {
      child = existing_child();  // a live argument created it
      if (child != nullptr) child_delta += EnterDeadArgs(child, n, part_dead);
    }
  }
  if (child != nullptr && child_delta != 0) Release(child, child_delta);  // our ready nodes
  // The external reference is dropped by the site's last Call to *finish*,
  // not the last to arrive: a Call whose part completed still delivers its
  // dead arguments after announcing its arrival, and the invocation must
  // not complete (and its frame be reused) under those deliveries.
  if (FetchAdd(cs.finished, 1, alone) + 1 == static_cast<uint32_t>(Info(n).site_calls().size())) {
    child = existing_child();
    if (child != nullptr) Release(child, -1);
  }
  Release(f, self_ready - self_ref);
}

void Worker::FireInvoke(Frame* f, const ExecNode& n, bool dead) {
  Token* slots = f->slots() + n.slot_base;
  if (dead) {
    Token outs[1];
    outs[0].set_dead(true);
    int ready = 0;
    for (const OutEdge& e : n.out()) {
      if (DeliverEdge(f, e, kNoValue, true)) {
        Push(f, e.dst);
        ++ready;
      }
    }
    Release(f, ready - 1);
    return;
  }
  const ExecBlock& block = exe_->blocks[Info(n).target_block];
  Frame* child = NewFrame(block, Frame::Kind::kInvocation, f, n);
  if (child == nullptr) {
    Release(f, -1);
    return;
  }
  MarkShared(child);  // dynamic mode: every frame is (its root is)
  // Instantiate a fresh copy of the callee's body: the dynamic baseline pays
  // for materializing the graph on every call.
  auto* inst = new BodyInstance;
  inst->edge_begin.resize(block.nodes.size() + 1);
  size_t total = 0;
  for (size_t i = 0; i < block.nodes.size(); ++i) total += exe_->nodes[block.nodes[i]].out().size();
  inst->edges.reserve(total);
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    inst->edge_begin[i] = static_cast<int32_t>(inst->edges.size());
    const auto& edges = exe_->nodes[block.nodes[i]].out();
    inst->edges.insert(inst->edges.end(), edges.begin(), edges.end());
  }
  inst->edge_begin[block.nodes.size()] = static_cast<int32_t>(inst->edges.size());
  run_->instantiations.fetch_add(1, std::memory_order_relaxed);
  child->instance = inst;
  child->label = Info(n).label;
  child->slot_in_parent = Info(n).child_slot;
  child->caller_node = n.id;
  for (int32_t i = 0; i < n.num_data_inputs && i < block.num_args; ++i) child->args()[i] = std::move(slots[i]);
  child->refs.store(static_cast<int64_t>(block.sources.size()), std::memory_order_relaxed);
  f->children()[Info(n).child_slot].child.store(child, std::memory_order_release);
  f->refs.fetch_add(1, std::memory_order_relaxed);
  for (int32_t src : block.sources) Push(child, src);
  if (block.sources.empty()) FrameDone(child);
  Release(f, -1);
}

void Worker::FireRetval(Frame* f, const ExecNode& n, Token* outs, bool dead) {
  Frame* parent = f->parent;
  const ExecNode& invoke = exe_->nodes[f->caller_node];
  if (parent == run_->root && run_->root_watch[invoke.index]) RecordResult(invoke, Info(n).io_index, outs[0]);
  int ready = 0;
  for (const OutEdge& e : invoke.out()) {
    if (e.src_port != Info(n).io_index) continue;
    if (DeliverEdge(parent, e, outs[0].value, dead)) {
      Push(parent, e.dst);
      ++ready;
    }
  }
  if (ready > 0) parent->refs.fetch_add(ready, std::memory_order_acq_rel);
  Release(f, -1);
}

// The common firings of scalar programs, without Fire's generality: every
// input live, scalars inline, no tracing or per-node counts. Returns false,
// having changed nothing, when the case is not covered; Fire handles it.
bool Worker::FireFast(Frame* f, const ExecNode& n) {
  if (f->instance != nullptr) return false;  // dynamic mode reads its copied edges in Fire
  if (f == run_->root && run_->root_watch[n.index]) return false;  // Fire records fetches and targets
  Token* slots = f->slots() + n.slot_base;
  Tensor out0, out1;   // out1: a Merge's value_index
  int dead_port = -1;  // Switch: the untaken port
  int held_port = -1;  // grouped Switch: the untaken port, held back (DeadRegionGroup)
  switch (n.kind) {
    case NodeKind::kKernel: {
      const Token* in0 = &slots[0];
      const Token* in1 = &slots[1];
      if (n.has_invariants) {  // loop invariants are read in place
        for (int32_t i = 0; i < n.num_inputs; ++i)
          if (Info(n).invariant_input()[i] < 0 ? slots[i].dead() : f->loop->invariants[Info(n).invariant_input()[i]].dead()) return false;
        if (n.num_data_inputs > 0 && Info(n).invariant_input()[0] >= 0) in0 = &f->loop->invariants[Info(n).invariant_input()[0]];
        if (n.num_data_inputs > 1 && Info(n).invariant_input()[1] >= 0) in1 = &f->loop->invariants[Info(n).invariant_input()[1]];
      } else {
        for (int32_t i = 0; i < n.num_inputs; ++i)
          if (slots[i].dead()) return false;
      }
      if (n.is_const) {
        out0 = Info(n).const_value;
      } else {
        if (n.num_data_inputs == 0) return false;
        if (!ComputeScalar(n.scalar_op, in0->value, n.num_data_inputs > 1 ? &in1->value : nullptr, &out0)) return false;
      }
      if (n.is_result) {  // a function's result: to the caller's Return too
        ++live_by_op_[n.op_id];
        Token outs[1];
        outs[0].value = std::move(out0);
        PropagateLocal(f, n, outs, false);
        return true;
      }
      break;
    }
    case NodeKind::kCall: {
      for (int32_t i = 0; i < n.num_inputs; ++i)
        if (slots[i].dead()) return false;
      ++live_by_op_[n.op_id];
      Token outs[1];
      if (n.num_data_inputs > 0) outs[0].value = std::move(slots[0].value);
      FireCall(f, n, outs, false);
      return true;
    }
    case NodeKind::kSwitch: {
      for (int32_t i = 0; i < n.num_inputs; ++i)
        if (slots[i].dead()) return false;
      const Tensor& p = slots[1].value;
      if (p.dtype() != DType::kBool || !p.is_inline_scalar()) return false;
      dead_port = p.scalar<bool>() ? 0 : 1;
      if (n.switch_group >= 0) held_port = dead_port;
      out0 = std::move(slots[0].value);
      break;
    }
    case NodeKind::kMerge: {
      const int32_t state = f->pending()[n.index].load(std::memory_order_acquire);
      if (!(state & kMergeFired)) return false;  // all inputs dead
      const int32_t input = (state >> 16) & 0x3FFF;
      if (n.is_result) {  // a forwarded function result (ForwardResults)
        ++live_by_op_[n.op_id];
        Token outs[2];
        outs[0].value = std::move(slots[input].value);
        outs[1].value = Tensor::Scalar<int32_t>(input);
        PropagateLocal(f, n, outs, false);
        return true;
      }
      out0 = std::move(slots[input].value);
      out1 = Tensor::Scalar<int32_t>(input);
      break;
    }
    case NodeKind::kReturn:
      if (slots[0].dead()) return false;
      out0 = std::move(slots[0].value);
      break;
    case NodeKind::kExit:
      // Every iteration but the last sends its Exit a dead token: it only
      // ends that firing (LoopDone sends dead exits for a loop never left).
      if (!slots[0].dead() || n.num_inputs != 1) return false;
      ++dead_by_op_[n.op_id];
      Release(f, -1);
      return true;
    case NodeKind::kNextIteration: {
      if (slots[0].dead()) return false;
      ++live_by_op_[n.op_id];
      Token outs[1];
      outs[0].value = std::move(slots[0].value);
      FireNextIteration(f, n, outs, false);
      return true;
    }
    default:
      return false;
  }
  ++live_by_op_[n.op_id];
  int ready = 0;
  for (const OutEdge& e : n.out()) {
    const Tensor* value = &kNoValue;
    bool edge_dead = false;
    if (dead_port >= 0 && e.src_port == dead_port) {
      if (held_port >= 0) continue;
      edge_dead = true;
    } else if (e.src_port >= 0 && !e.pivot()) {
      value = e.src_port == 1 && n.kind == NodeKind::kMerge ? &out1 : &out0;
    }
    if (DeliverEdge(f, e, *value, edge_dead)) {
      Push(f, e.dst);
      ++ready;
    }
  }
  if (held_port >= 0) {
    ready += CountDownDeadRegion(f, n, held_port);
  }
  Release(f, ready - 1);
  return true;
}

// The bulk of a recursive scalar program's firings (fib: LessEqual, Sub,
// Add, its Switches) without FireFast's generality: every input live,
// inline scalars, no fetch or target (not in main), no copied body (static
// mode). Each returns false, having changed nothing, when its case is not
// covered. One function per shape: a shared one spilled more than it saved.
// A lean firing's one live output along every edge of `n` in `f`.
inline void Worker::EmitLive(Frame* f, const ExecNode& n, const Tensor& out) { Release(f, Emit(f, n, out) - 1); }

inline int Worker::Emit(Frame* f, const ExecNode& n, const Tensor& out) {
  ++live_by_op_[n.op_id];
  int ready = 0;
  for (const OutEdge& e : n.out()) {
    if (e.call_inline()) {
      FireCallWith(f, e, out);
      continue;
    }
    if (e.switch_inline() && Alone(f)) {
      // The predicate of a Switch whose data is already here (a private
      // frame: nothing else can deliver meanwhile): it routes now.
      std::atomic<int32_t>& pending = f->pending()[e.dst_index];
      if (pending.load(std::memory_order_relaxed) == 1) {
        const ExecNode& sw = exe_->nodes[e.dst];
        const int routed = RouteSwitch(f, sw, out);
        if (routed >= 0) {
          pending.store(0, std::memory_order_relaxed);
          ++fired_;
          ready += routed;
          continue;
        }
      }
    }
    if (DeliverEdge(f, e, e.src_port >= 0 ? out : kNoValue, false)) {
      Push(f, e.dst);
      ++ready;
    }
  }
  return ready;
}

bool Worker::FireScalarBinary(Frame* f, const ExecNode& n) {
  Token* in = f->slots() + n.slot_base;
  if (in[0].dead() || in[1].dead()) return false;
  Tensor out;
  if (!ComputeScalarBinary(n.scalar_op, in[0].value, in[1].value, &out)) return false;
  EmitLive(f, n, out);
  return true;
}

// An Identity (its input moved on) or a control-triggered Const.
bool Worker::FireOneOutput(Frame* f, const ExecNode& n) {
  Token* in = f->slots() + n.slot_base;
  for (int32_t i = 0; i < n.num_inputs; ++i)
    if (in[i].dead()) return false;
  Tensor out;
  if (n.lean == LeanKind::kConst) {
    out = Info(n).const_value;
  } else {
    if (!in[0].value.device().is_cpu()) return false;  // the kernel decides about device tensors
    out = std::move(in[0].value);
  }
  EmitLive(f, n, out);
  return true;
}

bool Worker::FireSwitch(Frame* f, const ExecNode& n) {
  Token* in = f->slots() + n.slot_base;
  if (in[1].dead()) return false;
  const int ready = RouteSwitch(f, n, in[1].value);
  if (ready < 0) return false;
  Release(f, ready - 1);
  return true;
}

int Worker::RouteSwitch(Frame* f, const ExecNode& n, const Tensor& p) {
  Token* in = f->slots() + n.slot_base;
  if (in[0].dead() || p.dtype() != DType::kBool || !p.is_inline_scalar()) return -1;
  const int dead_port = p.scalar<bool>() ? 0 : 1;
  const Tensor out = std::move(in[0].value);
  ++live_by_op_[n.op_id];
  const bool grouped = n.switch_group >= 0;
  int ready = 0;
  bool calls = false;
  for (const OutEdge& e : n.out()) {
    bool made_ready;
    if (e.src_port == dead_port) {
      if (grouped) continue;  // the group's frontier stands in for it
      made_ready = DeliverEdge(f, e, kNoValue, true);
    } else {
      if (e.value_inline()) {
        const int fired = FireScalarWith(f, e, out);
        if (fired >= 0) {
          ready += fired;
          continue;
        }
      } else if (e.const_inline()) {
        ready += FireConstWith(f, e);
        continue;
      } else if (e.call_inline()) {
        calls = true;
        continue;
      }
      made_ready = DeliverEdge(f, e, e.src_port >= 0 && !e.pivot() ? out : kNoValue, false);
    }
    if (made_ready) {
      Push(f, e.dst);
      ++ready;
    }
  }
  if (calls) {
    for (const OutEdge& e : n.out())
      if (e.src_port != dead_port && e.call_inline()) FireCallWith(f, e, out);
  }
  if (grouped) ready += CountDownDeadRegion(f, n, dead_port);
  return ready;
}

// A one-input Call that this value alone makes ready (OutEdge::kCallInline)
// fires now: its argument is never stored in its slot, its firing never
// queued. It takes care of its own references to `f`.
inline void Worker::FireCallWith(Frame* f, const OutEdge& e, const Tensor& value) {
  const ExecNode& call = exe_->nodes[e.dst];
  ++live_by_op_[call.op_id];
  ++fired_;
  Token arg;
  arg.value = value;
  FireCall(f, call, &arg, false, /*self_ref=*/0);
}

int Worker::FireConstWith(Frame* f, const OutEdge& e) {
  const ExecNode& d = exe_->nodes[e.dst];
  ++fired_;
  if (!d.is_result) return Emit(f, d, Info(d).const_value);
  ++live_by_op_[d.op_id];
  Token outs[1];
  outs[0].value = Info(d).const_value;
  return Propagate(f, d, outs, false);
}

int Worker::FireScalarWith(Frame* f, const OutEdge& e, const Tensor& value) {
  const ExecNode& d = exe_->nodes[e.dst];
  const int32_t input = e.dst_slot - d.slot_base;
  const Token& other = f->slots()[d.slot_base + 1 - input];  // a folded constant
  if (other.dead()) return -1;
  Tensor out;
  if (!ComputeScalarBinary(d.scalar_op, input == 0 ? value : other.value, input == 0 ? other.value : value, &out))
    return -1;
  ++fired_;
  return Emit(f, d, out);
}

void Worker::Fire(Frame* f, const ExecNode& n) {
  Token* slots = f->slots() + n.slot_base;
  Token* out = out_;
  if (n.num_outputs > kInlineOutputs) {
    many_out_.resize(n.num_outputs);
    out = many_out_.data();
  }
  const int32_t num_out_tokens = n.num_outputs > 0 ? n.num_outputs : 1;
  out[0].set_dead(false);
  for (int32_t i = 1; i < num_out_tokens; ++i) out[i].set_dead(false);
  bool dead = false;
  const bool has_invariants = n.has_invariants;
  if (n.kind == NodeKind::kMerge) {
    const int32_t state = f->pending()[n.index].load(std::memory_order_acquire);
    if (state & kMergeFired) {
      const int32_t input = (state >> 16) & 0x3FFF;
      out[0].value = std::move(slots[input].value);
      out[1].value = Tensor::Scalar<int32_t>(input);
    } else {
      dead = true;
    }
  } else if (n.kind == NodeKind::kReturn) {
    dead = slots[0].dead();
  } else if (!has_invariants) {
    for (int32_t i = 0; i < n.num_inputs; ++i) dead |= slots[i].dead();
  } else {
    for (int32_t i = 0; i < n.num_inputs; ++i)
      dead |= Info(n).invariant_input()[i] >= 0 ? f->loop->invariants[Info(n).invariant_input()[i]].dead() : slots[i].dead();
  }
  if (has_invariants && n.kind != NodeKind::kKernel) {
    // Control-flow nodes read their slots; kernels read invariants in place.
    for (int32_t i = 0; i < n.num_inputs; ++i)
      if (Info(n).invariant_input()[i] >= 0) {
        slots[i].value = f->loop->invariants[Info(n).invariant_input()[i]].value;
        if (!slots[i].value.is_inline_scalar()) f->holds_tensors.store(true, std::memory_order_relaxed);
      }
  }
  std::chrono::steady_clock::time_point t0;
  if (run_->tracing) t0 = std::chrono::steady_clock::now();
  int dead_port = -1;  // grouped Switch: the port its dead region skips
  int pivot_port = -1;  // Switch: the port its live predicate selects

  switch (n.kind) {
    case NodeKind::kKernel: {
      if (dead) break;
      if (n.is_const) {
        out[0].value = Info(n).const_value;
        break;
      }
      const Tensor* in0 = nullptr;
      const Tensor* in1 = nullptr;
      if (n.num_data_inputs > 0) {
        in0 = (has_invariants && Info(n).invariant_input()[0] >= 0) ? &f->loop->invariants[Info(n).invariant_input()[0]].value
                                                            : &slots[0].value;
      }
      if (n.num_data_inputs > 1) {
        in1 = (has_invariants && Info(n).invariant_input()[1] >= 0) ? &f->loop->invariants[Info(n).invariant_input()[1]].value
                                                            : &slots[1].value;
      }
      if (n.scalar_op != ScalarOp::kNone && n.num_data_inputs <= 2 && in0 != nullptr &&
          ComputeScalar(n.scalar_op, *in0, in1, &out[0].value)) {
        break;
      }
      if (!FireKernelSlow(f, n, out)) return;  // the run failed; cleanup frees the frames
      break;
    }
    case NodeKind::kPlaceholder:
      out[0].value = run_->feeds[Info(n).io_index];
      break;
    case NodeKind::kSwitch: {
      if (slots[1].dead() || (dead && n.switch_group < 0 && !Info(n).has_pivot_edges)) break;
      const Tensor& p = slots[1].value;
      bool pred;
      if (p.dtype() == DType::kBool && p.is_inline_scalar()) {
        pred = p.scalar<bool>();
      } else {
        absl::StatusOr<bool> v = p.ScalarValue<bool>();
        if (!v.ok()) {
          run_->Fail(absl::InvalidArgumentError(absl::StrCat(NodeAtTag(Info(n), f), ": predicate: ", v.status().message())));
          return;
        }
        pred = *v;
      }
      // A grouped Switch holds back its dead port (dead data: both ports
      // are dead, and the other one propagates as usual).
      if (n.switch_group >= 0) dead_port = pred ? 0 : 1;
      pivot_port = pred ? 1 : 0;
      if (dead) break;
      out[pred ? 1 : 0].value = std::move(slots[0].value);
      out[pred ? 0 : 1].set_dead(true);
      break;
    }
    case NodeKind::kEnter:
    case NodeKind::kExit:
    case NodeKind::kNextIteration:
    case NodeKind::kCall:
    case NodeKind::kReturn:
    case NodeKind::kRetval:
      if (n.num_data_inputs > 0) out[0].value = std::move(slots[0].value);
      break;
    case NodeKind::kArg:
      out[0].value = f->args()[Info(n).io_index].value;
      break;
    default:
      break;
  }
  if (dead) {
    for (int32_t i = 0; i < num_out_tokens; ++i) out[i].set_dead(true);
  }
  // Inputs are consumed: release tensor buffers now, not at frame exit. An
  // Invoke's are its arguments: FireInvoke moves them into the callee's frame.
  for (int32_t i = 0; i < n.num_inputs; ++i) {
    if (!slots[i].value.is_inline_scalar() && n.kind != NodeKind::kInvoke) slots[i].value = Tensor();
  }

  if (dead) {
    ++dead_by_op_[n.op_id];
  } else {
    ++live_by_op_[n.op_id];
  }
  if (!live_by_node_.empty()) ++(dead ? dead_by_node_ : live_by_node_)[n.id];
  if (run_->tracing) RecordFiring(f, n, dead, t0);
  if (f == run_->root && run_->root_watch[n.index]) RecordFetch(n, out);

  switch (n.kind) {
    case NodeKind::kEnter:
      FireEnter(f, n, out, dead);
      break;
    case NodeKind::kExit: {
      if (dead) {
        Release(f, -1);
        break;
      }
      f->loop->exit_live[Info(n).io_index] = 1;
      Frame* parent = f->parent;
      if (parent == run_->root && !run_->watched_exits.empty()) RecordExit(n, out[0]);
      int ready = DeliverEdges(parent, n.out().data(), n.out().data() + n.out().size(), out, false);
      if (ready > 0) FetchAdd(parent->refs, ready, Alone(parent));
      Release(f, -1);
      break;
    }
    case NodeKind::kNextIteration:
      FireNextIteration(f, n, out, dead);
      break;
    case NodeKind::kCall:
      FireCall(f, n, out, dead);
      break;
    case NodeKind::kInvoke:
      FireInvoke(f, n, dead);
      break;
    case NodeKind::kRetval:
      FireRetval(f, n, out, dead);
      break;
    case NodeKind::kSwitch:
      if (dead && dead_port >= 0 && (Info(n).dead_data_ports >> pivot_port & 1)) {
        PropagateDeadData(f, n, dead_port, pivot_port);
      } else if (dead_port >= 0 || Info(n).has_pivot_edges) {
        PropagateSwitch(f, n, out, dead, dead_port, pivot_port);
      } else {
        PropagateLocal(f, n, out, dead);
      }
      break;
    default:
      PropagateLocal(f, n, out, dead);
      break;
  }
  for (int32_t i = 0; i < num_out_tokens; ++i) {
    if (!out[i].value.is_inline_scalar()) out[i].value = Tensor();
  }
}

bool Worker::FireKernelSlow(Frame* f, const ExecNode& n, Token* out) {
  const bool has_invariants = n.has_invariants;
  Token* slots = f->slots() + n.slot_base;
  in_ptrs_.resize(n.num_data_inputs);
  for (int32_t i = 0; i < n.num_data_inputs; ++i) {
    in_ptrs_[i] = (has_invariants && Info(n).invariant_input()[i] >= 0) ? &f->loop->invariants[Info(n).invariant_input()[i]].value
                                                                : &slots[i].value;
  }
  kernel_out_.resize(std::max<int32_t>(n.num_outputs, 1));
  KernelContext ctx(in_ptrs_.data(), n.num_data_inputs, kernel_out_.data(), n.num_outputs, Info(n).device);
  // A GPU kernel's errors surface at a later synchronization (a CopyToHost
  // or the run's end), which names the node and tag, and the run, with this.
  struct Site final : KernelSite {
    Site(const NodeInfo& info, const Frame* frame, uint64_t run) : info(info), frame(frame), run(run) {}
    std::string Describe() const override { return NodeAtTag(info, frame); }
    uint64_t run_id() const override { return run; }
    const NodeInfo& info;
    const Frame* frame;
    const uint64_t run;
  } site(Info(n), f, run_->id);
  ctx.set_site(&site);
  if (Info(n).device_context != nullptr) ctx.set_device_context(Info(n).device_context);
  ctx.set_session_state(run_->variables);
  absl::Status s = Info(n).kernel->Compute(ctx);
  if (!s.ok()) {
    run_->Fail(absl::Status(s.code(), absl::StrCat(NodeAtTag(Info(n), f), ": ", s.message())));
    for (int32_t i = 0; i < n.num_outputs; ++i) kernel_out_[i] = Tensor();
    return false;
  }
  for (int32_t i = 0; i < n.num_outputs; ++i) out[i].value = std::move(kernel_out_[i]);
  return true;
}

void Worker::RecordFiring(Frame* f, const ExecNode& n, bool dead, std::chrono::steady_clock::time_point t0) {
  auto t1 = std::chrono::steady_clock::now();
  FiringEvent ev{&Info(n).def->name, &Info(n).def->op, TagString(f), worker_id_, dead,
                 std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - run_->start).count(),
                 std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - run_->start).count()};
  if (run_->observer != nullptr) run_->observer->OnFiring(ev);
  if (run_->trace != nullptr) run_->trace->Add(ev);
}

void Worker::RecordFetch(const ExecNode& n, const Token* out) {
  run_->fired_in_root[n.index] = 1;
  // A live Invoke's outputs are its call's results, which its Retvals
  // deliver later (RecordResult); when it fires they are not there yet.
  if (n.kind == NodeKind::kInvoke && !out[0].dead()) return;
  auto first = run_->fetch_first.find(n.id);
  if (first == run_->fetch_first.end()) return;  // a target
  for (int32_t k = first->second; k >= 0; k = run_->fetch_next[k]) {
    const FetchTarget& t = run_->fetches[k];
    if (!out[t.port].dead()) {
      run_->fetched[k] = out[t.port].value;
      run_->fetched_set[k] = 1;
    }
  }
}

void Worker::RecordExit(const ExecNode& exit, const Token& out) {
  for (size_t w = 0; w < run_->watched_exits.size(); ++w)
    if (run_->watched_exits[w] == exit.id) run_->exit_fired[w] = 1;
  auto first = run_->fetch_first.find(exit.id);
  if (first == run_->fetch_first.end() || out.dead()) return;  // a target, or a loop never left
  for (int32_t k = first->second; k >= 0; k = run_->fetch_next[k]) {
    run_->fetched[k] = out.value;
    run_->fetched_set[k] = 1;
  }
}

void Worker::RecordResult(const ExecNode& invoke, int32_t port, const Token& result) {
  auto first = run_->fetch_first.find(invoke.id);
  if (first == run_->fetch_first.end()) return;  // a target
  for (int32_t k = first->second; k >= 0; k = run_->fetch_next[k]) {
    const FetchTarget& t = run_->fetches[k];
    if (t.port != port || result.dead()) continue;
    run_->fetched[k] = result.value;
    run_->fetched_set[k] = 1;
  }
}

using base::SpawnTask;

void Worker::Offer() {
  // Hand the oldest half of the local stack (the largest subcomputations of
  // a depth-first walk) to the arena, where an idle worker steals it.
  // Other frames' work first; a single wide frame (a flat graph) offers its own.
  ReadyStack& from = stack_.size() > kOfferThreshold ? stack_ : local_;
  const size_t half = from.size() / 2;
  std::vector<ReadyItem> items;
  items.reserve(half);
  // Work of an invocation that still waits for arguments stays: it is the
  // part of one call that needs only the arguments already there (ack's
  // eager m-1 work: a few firings, then the thief waits), never worth a
  // theft. Offered, it made ack slower at 2 workers than at 1.
  size_t kept = 0;
  for (size_t i = 0; i < half; ++i) {
    const ReadyItem item = from.begin()[i];
    if (AwaitsArguments(item.frame)) {
      from.begin()[kept++] = item;
    } else {
      items.push_back(item);
    }
  }
  from.erase_range(kept, half);
  if (items.empty()) {
    // Nothing worth stealing now: back off as after a theft not worth it.
    const int interval = run_->offer_interval.load(std::memory_order_relaxed);
    run_->offer_interval.store(std::min(interval * 2, kMaxOfferInterval), std::memory_order_relaxed);
    return;
  }
  Frame* last = nullptr;
  for (const ReadyItem& item : items) {
    if (item.frame != last) Share(item.frame);
    last = item.frame;
  }
  // From here on another thread may touch our frames: real atomics.
  alone_ = false;
  run_->workers.fetch_add(1, std::memory_order_relaxed);
  run_->offers.fetch_add(1, std::memory_order_relaxed);
  run_->offers_made.fetch_add(1, std::memory_order_relaxed);
  RunState* run = run_;
  // Captures are plain pointers, read once at the start: the task object's
  // destructor then reads none of its memory (see base::tsan_task_reuse). Every
  // spawned task runs (the run waits for its task_group), which frees them.
  auto* offered = new std::vector<ReadyItem>(std::move(items));
  SpawnTask(*run_->group, [run_captured = run, offered] {
    base::TaskStarts();
    RunState* run = run_captured;
    std::vector<ReadyItem> items = std::move(*offered);
    const int64_t num_items = static_cast<int64_t>(items.size());
    delete offered;
    run->offers.fetch_sub(1, std::memory_order_relaxed);
    Worker w(run);
    w.Loop(std::move(items));
    // See kWorthStealingFirings. With an observer or a trace, a firing's
    // time is mostly the recording's: there only the firing count judges.
    const int64_t took = w.loop_ns();
    const bool parallel = w.others_busy_ns() >= took / 2;
    const bool heavy = !run->tracing && took >= std::chrono::nanoseconds(kWorthStealing).count() &&
                       took >= w.fired() * std::chrono::nanoseconds(kHeavyFiring).count();
    const bool coarse = w.fired() >= kCoarseMinFirings && w.fired() >= kCoarseFiringsPerItem * num_items;
    const bool worth = parallel && (w.fired() >= kWorthStealingFirings || heavy || coarse);
    int interval = run->offer_interval.load(std::memory_order_relaxed);
    if (!worth) {
      run->offer_interval.store(std::min(interval * 2, kMaxOfferInterval), std::memory_order_relaxed);
    } else if (interval > 1) {
      run->offer_interval.store(interval / 2, std::memory_order_relaxed);
    }
    TDF_TSAN_RELEASE(run);  // what this task did is visible after the wait
    base::TaskEnds();
    // Last: what this task did to the frames happens before another worker
    // finds itself alone and goes back to plain loads and stores.
    run->workers.fetch_sub(1, std::memory_order_release);
  });
}

bool Worker::PeriodicChecks() {
  until_periodic_ = kAloneCheckInterval;
  // A run without parallelism (ack) that offered work once should not pay
  // for lock-prefixed operations for the rest of the run.
  if (!alone_ && run_->workers.load(std::memory_order_acquire) == 1) {
    PublishLive();
    alone_ = true;
  }
  if (++periodic_ < kCheckInterval / kAloneCheckInterval) return true;
  periodic_ = 0;
  return CheckLimits();
}

bool Worker::CheckLimits() {
  if (run_->cancel != nullptr && run_->cancel->cancelled()) {
    run_->Fail(absl::CancelledError("run cancelled"));
    return false;
  }
  if (run_->has_deadline && std::chrono::steady_clock::now() > run_->deadline) {
    run_->Fail(absl::DeadlineExceededError("run exceeded its deadline"));
    return false;
  }
  return true;
}

void Worker::Loop(std::vector<ReadyItem> items) {
  run_->active.fetch_add(1, std::memory_order_relaxed);
  int64_t start = 0, busy_at_start = 0;
  if (multi_) {
    start = run_->SinceStart();
    busy_at_start = run_->ChangeBusy(1, start);
  }
  alone_ = run_->workers.load(std::memory_order_acquire) == 1;
  for (const ReadyItem& item : items) stack_.push_back(item);
  while (!local_.empty() || !stack_.empty()) {
    if (run_->stop.load(std::memory_order_relaxed)) {
      local_.clear();
      stack_.clear();  // frames they hold are freed by the run's cleanup
      break;
    }
    if (--until_periodic_ <= 0 && !PeriodicChecks()) continue;
    ReadyItem item;
    if (!local_.empty()) {
      item = local_.back();
      local_.pop_back();
    } else {
      item = stack_.back();
      stack_.pop_back();
      current_ = item.frame;
      current_loop_ = item.frame->loop;
    }
    const ExecNode& node = exe_->nodes[item.node];
    bool fired = false;
    if (node.fast && fast_ok_) {
      fired = (node.lean != LeanKind::kNone && (item.frame != run_->root || !run_->root_watch[node.index]) &&
               FireLean(item.frame, node)) ||
              FireFast(item.frame, node);
    }
    if (!fired) Fire(item.frame, node);
    ++fired_;
    if (multi_ && (stack_.size() > kOfferThreshold || local_.size() > kOfferThreshold) &&
        ++since_offer_ >= run_->offer_interval.load(std::memory_order_relaxed) &&
        run_->active.load(std::memory_order_relaxed) + run_->offers.load(std::memory_order_relaxed) <
            run_->num_workers) {
      since_offer_ = 0;
      Offer();
    }
  }
  Flush();
  if (multi_) {
    const int64_t end = run_->SinceStart();
    loop_ns_ = end - start;
    others_busy_ns_ = run_->ChangeBusy(-1, end) - busy_at_start - loop_ns_;
  }
  run_->active.fetch_sub(1, std::memory_order_relaxed);
}

void Worker::Flush() {
  PublishLive();
  run_->frames_created.fetch_add(frames_created_, std::memory_order_relaxed);
  frames_created_ = 0;
  run_->tail_callers_released.fetch_add(tail_callers_released_, std::memory_order_relaxed);
  tail_callers_released_ = 0;
  run_->shared_frames.fetch_add(shared_frames_, std::memory_order_relaxed);
  shared_frames_ = 0;
  int64_t md = run_->max_depth.load(std::memory_order_relaxed);
  while (max_depth_ > md && !run_->max_depth.compare_exchange_weak(md, max_depth_, std::memory_order_relaxed)) {
  }
  base::MutexLock lock(&run_->mu);
  for (size_t i = 0; i < live_by_op_.size(); ++i) {
    run_->live_by_op[i] += live_by_op_[i];
    run_->dead_by_op[i] += dead_by_op_[i];
    live_by_op_[i] = dead_by_op_[i] = 0;
  }
  for (size_t i = 0; i < live_by_node_.size(); ++i) {
    run_->live_by_node[i] += live_by_node_[i];
    run_->dead_by_node[i] += dead_by_node_[i];
    live_by_node_[i] = dead_by_node_[i] = 0;
  }
}

// Frees every frame still reachable from the root (after an error, a cancel
// or a run that could not finish) without recursion. Every frame is found,
// and the "waits for" lines (which name tags, walking parents) made, before
// any frame or loop is freed: a freed frame's memory may already belong to
// another run.
int64_t FreeAllFrames(Frame* root, const ExecutableGraph& exe, std::vector<std::string>* waiting, int max_waiting) {
  std::vector<Frame*> frames;
  std::vector<LoopState*> loops;
  std::vector<Frame*> todo{root};
  while (!todo.empty()) {
    Frame* f = todo.back();
    todo.pop_back();
    frames.push_back(f);
    const ExecBlock& block = *f->block;
    ChildSlot* children = f->children();
    for (int32_t s = 0; s < block.num_child_slots; ++s) {
      void* c = children[s].child.load(std::memory_order_acquire);
      if (c == nullptr || c == kChildDone) continue;
      if (block.child_is_loop[s]) {
        auto* loop = static_cast<LoopState*>(c);
        for (Frame* it : loop->live) todo.push_back(it);
        loops.push_back(loop);
      } else {
        todo.push_back(static_cast<Frame*>(c));
      }
    }
  }
  if (waiting != nullptr) {
    for (Frame* f : frames) {
      const ExecBlock& block = *f->block;
      for (size_t i = 0; i < block.nodes.size() && static_cast<int>(waiting->size()) < max_waiting; ++i) {
        const ExecNode& n = exe.nodes[block.nodes[i]];
        const int32_t p = f->pending()[i].load(std::memory_order_relaxed);
        if (n.kind != NodeKind::kMerge && p > 0 && p < n.pending_init)
          waiting->push_back(absl::StrCat(NodeAtTag(exe.info[n.id], f), " waits for ", p, " of ", n.pending_init, " inputs"));
      }
    }
  }
  for (Frame* f : frames) FreeFrame(f);
  for (LoopState* loop : loops) delete loop;
  return static_cast<int64_t>(frames.size());
}

}  // namespace

Executor::Executor(const ExecutableGraph* exe, const SessionOptions& options, VariableStore* variables)
    : exe_(exe), options_(options), variables_(variables),
      arena_(std::make_unique<tbb::task_arena>(std::max(1, options.num_workers))),
      pruner_(std::make_unique<RunPruner>(exe, options.evaluate_without_gradients)) {}

Executor::~Executor() = default;

namespace {

// Whether a fetched or target node fired with the root as its tag: a
// main-block node, or an Exit of a main-graph loop (into the root).
bool FiredInRoot(const RunState& run, const ExecNode& n) {
  if (n.block == 0) return run.fired_in_root[n.index];
  for (size_t w = 0; w < run.watched_exits.size(); ++w)
    if (run.watched_exits[w] == n.id) return run.exit_fired[w];
  return false;
}

// An Enter's or a Call's output is delivered into a loop's or a callee's
// frame, not main's: there is nothing in main to fetch or wait for.
std::string IntoChildMessage(const char* what, const std::string& name, const NodeDef& def) {
  return absl::StrCat(what, " '", name, "': node '", def.name, "' (", def.op, ") delivers into ",
                      def.op == "Enter" ? "its loop's frame; fetch the loop's results (its Exits)"
                                        : "the callee's frame; fetch the call's results (its Returns)");
}

// Fewer live frames than this are freed before the run returns: waking the
// reclaimer costs more than freeing them.
constexpr int64_t kReclaimLaterFrames = 4096;

}  // namespace

absl::StatusOr<std::vector<Tensor>> Executor::Run(const RunRequest& request, RunStats* stats) {
  auto Info = [this](const ExecNode& n) -> const NodeInfo& { return exe_->info[n.id]; };
  RunState run;
  run.exe = exe_;
  run.options = &options_;
  run.variables = variables_;
  run.num_workers = std::max(1, options_.num_workers);
  run.cancel = request.cancel;
  run.collect_node_stats = request.collect_node_stats;
  run.start = std::chrono::steady_clock::now();
  if (request.deadline != absl::InfiniteDuration()) {
    run.has_deadline = true;
    run.deadline = run.start + absl::ToChronoNanoseconds(request.deadline);
  }
  // Feeds: every placeholder must be fed with its dtype.
  run.feeds.resize(exe_->placeholders.size());
  std::vector<uint8_t> fed(exe_->placeholders.size(), 0);
  for (const auto& [name, value] : request.feeds) {
    int32_t id = exe_->FindMainNode(name);
    if (id < 0 || exe_->nodes[id].kind != NodeKind::kPlaceholder)
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' does not name a Placeholder of the graph"));
    const ExecNode& n = exe_->nodes[id];
    absl::StatusOr<DType> want = Info(n).def->GetType("dtype");
    if (!want.ok()) return want.status();
    if (value.dtype() != *want)
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' is ", DTypeName(value.dtype()),
                                                     "; node '", name, "' (Placeholder) wants ", DTypeName(*want)));
    if (fed[Info(n).io_index])
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' is given twice"));
    run.feeds[Info(n).io_index] = value;
    fed[Info(n).io_index] = 1;
  }
  const size_t main_nodes = exe_->blocks[0].nodes.size();
  run.root_watch.assign(main_nodes, 0);
  for (const std::string& fetch : request.fetches) {
    absl::StatusOr<InputRef> ref = InputRef::Parse(fetch);
    if (!ref.ok() || ref->is_control) return absl::InvalidArgumentError(absl::StrCat("malformed fetch '", fetch, "'"));
    int32_t id = exe_->FindMainNode(ref->node);
    int32_t port = ref->port;
    if (const int32_t exit = exe_->FindMainLoopExit(ref->node); exit >= 0) {
      if (port >= exe_->nodes[exit].num_outputs)
        return absl::InvalidArgumentError(absl::StrCat("fetch '", fetch, "': node has 1 output"));
      run.fetches.push_back({exit, port});
      auto [first, inserted] = run.fetch_first.try_emplace(exit, -1);
      run.fetch_next.push_back(first->second);
      first->second = static_cast<int32_t>(run.fetches.size()) - 1;
      if (std::find(run.watched_exits.begin(), run.watched_exits.end(), exit) == run.watched_exits.end())
        run.watched_exits.push_back(exit);
      continue;
    }
    if (id < 0) {
      // Static mode: an Invoke's output r is its Return r's.
      const std::vector<int32_t>* returns = exe_->FindInvokeResults(ref->node);
      if (returns == nullptr)
        return absl::NotFoundError(absl::StrCat("fetch '", fetch, "': no node '", ref->node, "' in the main graph"));
      if (port >= static_cast<int32_t>(returns->size()))
        return absl::InvalidArgumentError(absl::StrCat("fetch '", fetch, "': node '", ref->node, "' (Invoke) has ",
                                                       returns->size(), " outputs"));
      id = (*returns)[port];
      port = 0;
    } else if (port >= exe_->nodes[id].num_outputs) {
      return absl::InvalidArgumentError(absl::StrCat("fetch '", fetch, "': node has ", exe_->nodes[id].num_outputs,
                                                     " outputs"));
    } else if (const NodeKind kind = exe_->nodes[id].kind; kind == NodeKind::kEnter || kind == NodeKind::kCall) {
      return absl::InvalidArgumentError(IntoChildMessage("fetch", fetch, *Info(exe_->nodes[id]).def));
    }
    run.fetches.push_back({id, port});
    auto [first, inserted] = run.fetch_first.try_emplace(id, -1);
    run.fetch_next.push_back(first->second);
    first->second = static_cast<int32_t>(run.fetches.size()) - 1;
    run.root_watch[exe_->nodes[id].index] = 1;
  }
  std::vector<int32_t> targets;
  for (const std::string& t : request.targets) {
    int32_t id = exe_->FindMainNode(t);
    if (const int32_t exit = exe_->FindMainLoopExit(t); exit >= 0) {
      targets.push_back(exit);
      if (std::find(run.watched_exits.begin(), run.watched_exits.end(), exit) == run.watched_exits.end())
        run.watched_exits.push_back(exit);
      continue;
    }
    if (id < 0) {
      // Static mode: an Invoke has run when each of its Returns has.
      const std::vector<int32_t>* returns = exe_->FindInvokeResults(t);
      if (returns == nullptr)
        return absl::NotFoundError(absl::StrCat("target '", t, "': no node of that name in the main graph"));
      for (int32_t r : *returns) {
        targets.push_back(r);
        run.root_watch[exe_->nodes[r].index] = 1;
      }
      continue;
    }
    if (const NodeKind kind = exe_->nodes[id].kind; kind == NodeKind::kEnter || kind == NodeKind::kCall)
      return absl::InvalidArgumentError(IntoChildMessage("target", t, *Info(exe_->nodes[id]).def));
    targets.push_back(id);
    run.root_watch[exe_->nodes[id].index] = 1;
  }
  // The run fires what its fetches and targets need (prune.h).
  std::vector<int32_t> roots = targets;
  for (const FetchTarget& f : run.fetches) roots.push_back(f.node);
  const std::shared_ptr<const RunPlan> plan = pruner_->Plan(std::move(roots));
  for (size_t i = 0; i < fed.size(); ++i) {
    if (!fed[i] && plan->needs_feed[i])
      return absl::InvalidArgumentError(absl::StrCat("node '", exe_->info[exe_->placeholders[i]].def->name,
                                                     "' (Placeholder): missing feed"));
  }
  // Limits already passed end the run before it starts (a periodic check
  // comes only every few thousand firings: a short run would finish first).
  if (request.deadline <= absl::ZeroDuration())
    return absl::DeadlineExceededError(absl::StrCat("run exceeded its deadline: ", request.deadline_source, " is ",
                                                    absl::FormatDuration(request.deadline)));
  if (request.cancel != nullptr && request.cancel->cancelled())
    return absl::CancelledError("run cancelled before it started");
  run.exit_fired.assign(run.watched_exits.size(), 0);
  run.fetched.resize(run.fetches.size());
  run.fetched_set.assign(run.fetches.size(), 0);
  run.fired_in_root.assign(main_nodes, 0);
  {
    base::MutexLock lock(&run.mu);
    run.live_by_op.assign(exe_->op_names.size(), 0);
    run.dead_by_op.assign(exe_->op_names.size(), 0);
    if (request.collect_node_stats) {
      run.live_by_node.assign(exe_->nodes.size(), 0);
      run.dead_by_node.assign(exe_->nodes.size(), 0);
    }
  }
  std::unique_ptr<TraceWriter> trace;
  const std::string& trace_path = request.trace_path;
  if (!trace_path.empty()) trace = std::make_unique<TraceWriter>();
  run.trace = trace.get();
  run.observer = request.observer;
  run.tracing = run.trace != nullptr || run.observer != nullptr;

  const ExecBlock& main = exe_->blocks[0];
  Frame* root = AllocateFrame(main);
  if (root == nullptr) return absl::ResourceExhaustedError("out of memory creating the root frame");
  root->kind = Frame::Kind::kRoot;
  root->run = &run;
  const std::vector<int32_t>& sources = plan->whole_graph ? main.sources : plan->sources;
  for (int32_t index : plan->pruned) {
    const bool merge = exe_->nodes[main.nodes[index]].kind == NodeKind::kMerge;
    root->pending()[index].store(merge ? kMergeFired : kPruned, std::memory_order_relaxed);
  }
  root->refs.store(1 + static_cast<int64_t>(sources.size()), std::memory_order_relaxed);
  // A split site's gradient part the run leaves out is as if it had
  // arrived all dead and been deferred (FinishSplitCall): its arguments
  // enter the invocation dead when the forward part's first live argument
  // does, and the site's other Calls drop the invocation's external
  // reference as they finish.
  for (const auto& [slot, mask] : plan->dead_parts) {
    ChildSlot& cs = root->children()[slot];
    cs.dead_calls.store(mask, std::memory_order_relaxed);
    cs.arrived.store(mask, std::memory_order_relaxed);
    cs.finished.store(static_cast<uint32_t>(__builtin_popcountll(mask)), std::memory_order_relaxed);
    cs.arrivals.store(kSiteDeferredDead, std::memory_order_relaxed);
  }
  run.root = root;
  if (exe_->mode == ExecutionMode::kDynamic) {
    // Copied bodies are not covered by Worker::Share's walk: all frames shared.
    root->shared.store(true, std::memory_order_relaxed);
    root->atomic_counts.store(true, std::memory_order_relaxed);
    run.shared_frames.store(1);
  }
  run.live_frames.store(1);
  run.peak_live_frames.store(1);
  run.frames_created.store(1);

  tbb::task_group group;
  run.group = &group;
  TDF_TSAN_RELEASE(&run);
#ifdef TDF_TSAN
  // When runs from several threads fill the shared arena, oneTBB hands a
  // caller's functor to a thread inside the arena: a hand-off TSan cannot
  // see (oneTBB is not instrumented), reported as races on the functor. A
  // run of its own arena is never handed off; the workers' code is the same.
  tbb::task_arena run_arena(std::max(1, options_.num_workers));
  tbb::task_arena& arena = run_arena;
#else
  tbb::task_arena& arena = *arena_;
#endif
  arena.execute([&] {
    tbb::task_handle root_task = group.defer([&] {
      base::TaskStarts();
      TDF_TSAN_ACQUIRE(&run);
      Worker w(&run);
      w.WorkIn(root);
      for (auto it = sources.rbegin(); it != sources.rend(); ++it) w.Push(root, *it);
      // Drop the external reference only after the sources hold theirs.
      w.Release(root, -1);
      std::vector<ReadyItem> none;
      w.Loop(std::move(none));
      run.workers.fetch_sub(1, std::memory_order_release);
      TDF_TSAN_RELEASE(&run);
    });
    TDF_TSAN_RELEASE(&base::tsan_task_handoff);
    group.run_and_wait(std::move(root_task));
  });
  TDF_TSAN_ACQUIRE(&run);

  absl::Status status;
  {
    base::MutexLock lock(&run.mu);
    status = run.status;
  }
  const bool root_done = run.root_done.load(std::memory_order_acquire);
  int64_t leaked = run.live_frames.load();
  std::vector<std::string> waiting;
  if (status.ok()) {
    for (size_t k = 0; k < run.fetches.size(); ++k) {
      if (!run.fetched_set[k]) {
        const ExecNode& n = exe_->nodes[run.fetches[k].node];
        const bool fired = FiredInRoot(run, n);
        status = absl::FailedPreconditionError(absl::StrCat(
            "fetch '", request.fetches[k], "' was not produced: ", NodeAtTag(Info(n), root), " ",
            fired ? "fired with a dead output" : "never fired", "; the run stopped making progress"));
        break;
      }
    }
    for (int32_t id : targets) {
      if (status.ok() && !FiredInRoot(run, exe_->nodes[id]))
        status = absl::FailedPreconditionError(
            absl::StrCat("target ", NodeAtTag(exe_->info[id], root), " never ran"));
    }
  }
  // Reclaim whatever is still live (after errors and stalls); on a clean run
  // only the root remains. Only a stall's message lists the nodes still
  // waiting (below), read from frames not yet freed. Otherwise many frames
  // (a deep recursion cut by its deadline) are freed after the run returns
  // (frame_reclaimer.h): finding and freeing 10^5 of them cost 60-130 ms.
  const bool report_waiting = status.code() == absl::StatusCode::kFailedPrecondition;
  if (!root_done || leaked > 1) {
    const ExecutableGraph* exe = exe_;
    if (report_waiting || leaked < kReclaimLaterFrames ||
        !FrameReclaimer::Submit(&reclaims_, leaked, [root, exe] {
          FreeAllFrames(root, *exe, nullptr, 0);
          FlushThreadPool();
        })) {
      FreeAllFrames(root, *exe_, report_waiting ? &waiting : nullptr, 10);
    }
  } else {
    FreeFrame(root);
  }
  if (!status.ok() && !waiting.empty() && status.code() == absl::StatusCode::kFailedPrecondition) {
    status = absl::Status(status.code(), absl::StrCat(status.message(), ". Waiting: ", absl::StrJoin(waiting, "; ")));
  }
  if (stats != nullptr) {
    base::MutexLock lock(&run.mu);
    RunStats s;
    for (size_t i = 0; i < exe_->op_names.size(); ++i) {
      if (run.live_by_op[i] == 0 && run.dead_by_op[i] == 0) continue;
      s.firings_by_op[exe_->op_names[i]] = {run.live_by_op[i], run.dead_by_op[i]};
      s.live_firings += run.live_by_op[i];
      s.dead_firings += run.dead_by_op[i];
    }
    s.firings = s.live_firings + s.dead_firings;
    for (size_t i = 0; i < run.live_by_node.size(); ++i) {
      if (run.live_by_node[i] == 0 && run.dead_by_node[i] == 0) continue;
      s.firings_by_node[exe_->info[i].def->name] = {run.live_by_node[i], run.dead_by_node[i]};
    }
    s.nodes_pruned = static_cast<int64_t>(plan->pruned.size());
    s.frames_created = run.frames_created.load();
    s.tail_callers_released = run.tail_callers_released.load();
    s.peak_live_frames = run.peak_live_frames.load();
    // The root is freed by the run itself; anything else still live leaked.
    s.live_frames_after_run = root_done ? leaked - 1 : leaked;
    s.max_tag_depth = run.max_depth.load();
    s.instantiations = run.instantiations.load();
    s.offers = run.offers_made.load();
    s.shared_frames = run.shared_frames.load();
    s.elapsed = absl::FromChrono(std::chrono::steady_clock::now() - run.start);
    // oneTBB runs no more threads than max_allowed_parallelism (the
    // machine's concurrency unless a tbb::global_control raises it),
    // whatever the arena asks for.
    s.num_workers = static_cast<int>(std::min<size_t>(
        run.num_workers, tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)));
    *stats = std::move(s);
  }
  if (trace != nullptr) {
    absl::Status ts = trace->WriteChromeJson(trace_path);
    if (status.ok() && !ts.ok()) status = ts;
  }
  // Errors that GPU kernels recorded (an index out of range, an integer
  // division by zero) fail this run, not whichever run next reads the
  // device (runs in flight at once each get their own); a run that failed
  // otherwise clears them too.
  for (Device device : exe_->gpu_devices) {
    absl::Status s = DeviceBackend::Synchronize(device, run.id);
    if (!s.ok() && status.ok())
      status = absl::Status(s.code(), absl::StrCat("a GPU kernel of this run failed (found when the run ended): ",
                                                   s.message()));
  }
  if (!status.ok()) return status;
  // Fetched values come back to the host.
  for (Tensor& t : run.fetched) {
    if (!t.valid() || t.device().is_cpu()) continue;
    TDF_ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(t.dtype(), t.shape()));
    TDF_RETURN_IF_ERROR(DeviceBackend::CopyDeviceToHost(host.raw_mutable_data(), t.raw_data(), t.bytes(), t.device()));
    TDF_RETURN_IF_ERROR(DeviceBackend::Synchronize(t.device(), run.id));
    t = std::move(host);
  }
  return std::move(run.fetched);
}

}  // namespace runtime
}  // namespace tdf
