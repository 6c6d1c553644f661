// Frames are activation records of code blocks (design.md §3): the main
// graph's run, one invocation of a function body, or one iteration of a loop
// body. A frame holds a slot for every input of every node of its block,
// per-node pending counters and one child slot per call site / loop entered
// from the block. A tag t/i is the chain frame -> parent -> ...; matching a
// token is an index into the slots plus an atomic decrement. A tail call's
// invocation may outlive its caller: it then hangs from the caller's caller
// and stands in for the released caller (Frame::return_block), its depth
// still counting every call.
//
// Lifetime: `refs` counts everything that can still touch the frame: nodes
// of the frame that are ready or running, live child frames, and arrivals
// still expected from outside (the Call nodes of the creating site not yet
// fired; for iteration k > 0, "iteration k-1 is not done"; for iteration 0,
// the loop's Enter nodes). The frame is reclaimed when refs reaches zero.
#ifndef TDF_SRC_RUNTIME_FRAME_H_
#define TDF_SRC_RUNTIME_FRAME_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "runtime/executable.h"
#include "tdf/tensor.h"

namespace tdf {
namespace runtime {

struct ExecBlock;
struct RunState;
struct LoopState;
struct BodyInstance;

// A value (or "go" for control edges) with its deadness. The tag is implied
// by the frame the token sits in. 16 bytes: the deadness rides in a header
// byte Tensor leaves unused, because a frame is mostly token slots and a
// deep recursion is bound by the bytes its frames take (a separate flag
// made tokens 24 bytes and exp(x, 10^5)'s frames a third larger). Copying
// `value` copies the flag too: slots are written with Set, which sets it.
struct Token {
  Tensor value;

  bool dead() const { return value.reserved_[0] != 0; }
  void set_dead(bool dead) { value.reserved_[0] = dead ? 1 : 0; }
  // value = v, dead = d, in one 16-byte store: a later 16-byte copy of the
  // token is then store-forwarded (see Tensor::StoreWords).
  void Set(const Tensor& v, bool d) {
    uint64_t words[2];
    std::memcpy(words, static_cast<const void*>(&v), sizeof(words));
    if (v.heap_) v.u_.rep->refs.fetch_add(1, std::memory_order_relaxed);  // before Release: `v` may be `value`
    value.Release();
    static_assert(offsetof(Tensor, reserved_) == 2, "the flag is byte 2 of the header word");
    words[0] = (words[0] & ~(uint64_t{0xFF} << 16)) | (d ? uint64_t{1} << 16 : 0);
    value.StoreWords(words[0], words[1]);
  }
  // Set(a live inline scalar of dtype `d` and these payload bytes), without
  // a Tensor to read it from.
  void SetLiveScalar(DType d, uint64_t payload) {
    value.Release();
    value.StoreWords(static_cast<uint64_t>(d), payload);
  }
  // A live inline scalar of dtype `d` (one test of the header word: dtype,
  // not on the heap, not dead): true, with its 8 payload bytes.
  bool LiveScalarOf(DType d, int64_t* payload) const {
    static_assert(offsetof(Tensor, dtype_) == 0 && offsetof(Tensor, heap_) == 1, "the header word's low bytes");
    uint64_t words[2];
    std::memcpy(words, static_cast<const void*>(&value), sizeof(words));
    std::memcpy(payload, &words[1], sizeof(*payload));
    return (words[0] & 0xFFFFFF) == static_cast<uint64_t>(d);
  }
};
static_assert(sizeof(Token) == 16, "a token is a tensor");

// Sentinel stored in a child slot once its child is finished.
inline void* const kChildDone = reinterpret_cast<void*>(uintptr_t{1});

struct ChildSlot {
  std::atomic<void*> child{nullptr};     // Frame* (call site) or LoopState* (loop)
  std::atomic<uint32_t> arrivals{0};     // Call nodes fired at this site: (live << 16) | total
  std::atomic<uint32_t> finished{0};     // split sites: Calls done delivering into the invocation
  std::atomic<uint64_t> dead_calls{0};   // bit i: site_calls[i] fired dead
  std::atomic<uint64_t> arrived{0};      // split sites: bit i: site_calls[i] fired
};
// ChildSlot::arrivals: the site gave its Returns dead without an invocation
// (split sites: a part that arrived all dead before any live argument).
constexpr uint32_t kSiteClosedDead = uint32_t{1} << 31;
// ChildSlot::arrivals of a split site: its gradient part arrived all dead
// before any live argument (or the run left it out) and waits for the
// forward part (Worker::FinishSplitCall).
constexpr uint32_t kSiteDeferredDead = uint32_t{1} << 15;
// ChildSlot::arrivals of a site a compiled unit made: its Calls' slots hold
// its arguments and its first Call is queued (Worker::MakeCall).
constexpr uint32_t kSiteParked = uint32_t{1} << 30;

struct Frame {
  enum class Kind : uint8_t { kRoot, kInvocation, kIteration };
  Kind kind;
  // An invocation handed over to its caller's caller (see may_have_tail_child):
  // the function block whose results this frame's results stand for,
  // result i for result i; its result nodes' Returns for `label` lead into
  // `parent`. -1: the frame's own function (a frame not handed over).
  int32_t return_block;
  const ExecBlock* block;
  Frame* parent;           // caller (invocation), enclosing frame (iteration), null (root)
  LoopState* loop;         // iterations only
  BodyInstance* instance;  // dynamic mode: the copied body this invocation runs
  RunState* run;
  int64_t iteration;       // iterations: k
  int32_t label;           // invocations: the call site label
  int32_t slot_in_parent;  // invocations: the parent's child slot
  int32_t depth;           // tag length
  int32_t caller_node;     // dynamic mode: the Invoke node in the parent
  std::atomic<Frame*> next_iteration;  // iterations: k+1 once created
  std::atomic<int64_t> refs;
  // Some slot may hold a tensor buffer (FreeFrame must release it). Set by
  // any worker that delivers one; read when the frame is freed.
  std::atomic<bool> holds_tensors;
  // Other workers may touch the frame. A frame is private to the worker
  // that created it until work in it or below it is offered (Worker::Share):
  // its counters are then plain loads and stores even while other workers
  // run, which made a 2-worker fib no faster than 1.2x on lock prefixes.
  // Shared frames have shared ancestors. Written by the owner before the
  // hand-off that lets another worker see the frame; cleared on reuse.
  std::atomic<bool> shared;
  // The counters need read-modify-writes whenever other workers run: the
  // frame is shared, or it is a loop iteration (kept conservative: loops
  // synchronise through their LoopState anyway).
  std::atomic<bool> atomic_counts;
  // An invocation of one of the block's tail sites (ExecBlock::
  // tail_child_slots) was created and may still run: once nothing but it
  // holds this frame, it takes the frame's place under its caller and the
  // frame is reclaimed (Worker::HandOverTailChild). Cleared when a look
  // finds none live, so that frames without one skip the look.
  std::atomic<bool> may_have_tail_child;
  // An invocation a compiled unit's path left waiting for its calls: the
  // path's continuation (CompiledThread::inlets), run when the last of
  // `cont_join` results has returned (Worker::Inlet), and null from then
  // on; null for every other frame. (cont_join sits in the bools' padding:
  // the header is 112 bytes, which kept exp's gradient frame at 12 cache
  // lines instead of 13.)
  std::atomic<int32_t> cont_join;
  std::atomic<const CompiledThread*> cont;
  // Cached address of the slots (hot path: one load, not two). The pending
  // counts follow the header at a fixed offset (kPendingOffset).
  Token* slots_ptr;

  std::atomic<int32_t>* pending();
  ChildSlot* children() { return reinterpret_cast<ChildSlot*>(reinterpret_cast<char*>(this) + ChildrenOffset()); }
  Token* slots() { return slots_ptr; }
  Token* args() { return reinterpret_cast<Token*>(reinterpret_cast<char*>(this) + ArgsOffset()); }

  size_t PendingOffset() const;
  size_t ChildrenOffset() const;
  size_t SlotsOffset() const;
  size_t ArgsOffset() const;
};

// Every frame starts with this header: 16 more bytes (112 -> 128) made exp's
// gradient frames a cache line longer, and its n = 10^3-10^4 runs 5-10% slower.
static_assert(sizeof(Frame) <= 112, "the frame header grew");

// Where every block's pending counts start (ExecBlock::pending_offset).
constexpr size_t kPendingOffset = (sizeof(Frame) + 15) / 16 * 16;
inline std::atomic<int32_t>* Frame::pending() {
  return reinterpret_cast<std::atomic<int32_t>*>(reinterpret_cast<char*>(this) + kPendingOffset);
}
inline size_t Frame::PendingOffset() const { return kPendingOffset; }
inline size_t Frame::ChildrenOffset() const { return block->children_offset; }
inline size_t Frame::SlotsOffset() const { return block->slots_offset; }
inline size_t Frame::ArgsOffset() const { return block->args_offset; }

// Dynamic mode: the copy of a function body's edges that one invocation
// runs on (the graph grows at run time, as in TensorFlow <= 1.4).
struct BodyInstance {
  std::vector<int32_t> edge_begin;  // per block index, size nodes + 1
  std::vector<OutEdge> edges;
};

// A deferred NextIteration token (the iteration window was full).
struct DeferredToken {
  OutEdge edge;
  Token token;
};

// One activation of a loop in its parent frame: shared by its iterations.
struct LoopState {
  const ExecBlock* block;
  Frame* parent;
  int32_t slot_in_parent;
  int32_t parallel_iterations;
  std::atomic<int64_t> refs;  // pending invariants + 1 for the iteration chain

  std::mutex mu;  // iteration creation/completion; never held while firing nodes
  std::vector<Token> invariants;
  std::deque<Frame*> live;          // created, not done, in order
  int64_t created = 0;              // iterations created so far
  int64_t last_done = -1;           // highest finished iteration
  std::vector<DeferredToken> deferred;  // for iteration `created` (window full)
  std::vector<DeferredToken> early;     // Enter tokens that arrived before the invariants
  int32_t invariants_arrived = 0;
  int32_t early_enters = 0;         // Enter nodes whose tokens are in `early`
  std::vector<uint8_t> exit_live;   // per Exit of the block: delivered a live token
  Frame* iteration0 = nullptr;
};

// Allocates and initialises a frame of `block` (slots empty, pending counts
// from the block's template). Returns null if memory runs out.
Frame* AllocateFrame(const ExecBlock& block);
// Releases the tensor buffers the frame's tokens still hold (its slots are
// then inline scalars or empty).
void ReleaseFrameTensors(Frame* frame);
// Releases the tokens still in the frame and frees its memory.
void FreeFrame(Frame* frame);
// Frees frames of one block that hold no tensors and no dynamic instance
// (a worker's kept frames), linked through `parent` from `first`: FreeFrame
// for each, in one pass over the pool (a deep recursion spills thousands).
void FreeKeptFrames(Frame* first);
// Gives frame memory back (issue #26, item 8). With `empty_caches`, frees
// the frames the process-wide depot and this thread's pool keep. Then, if
// that freed 64 MiB or more, or frames have taken that much from malloc
// since memory was last given back, asks malloc to return the free pages
// of all its arenas to the system (malloc_trim): threads that each ran deep
// recursions leave most of their frames' memory in their own malloc arenas.
void ReleaseFrameMemory(bool empty_caches);

// What all threads' frame pools keep together, at most (to within 1 MiB a
// thread): past it, a thread whose pool grows hands it to the depot.
constexpr int64_t kThreadPoolsMaxBytes = int64_t{64} << 20;

// What the frame caches keep, in bytes: the process-wide depot, and all
// threads' pools together as they last published it (each within 1 MiB).
struct CachedFrameBytes {
  int64_t depot = 0;
  int64_t thread_pools = 0;
};
CachedFrameBytes CachedFrameMemory();

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_FRAME_H_
