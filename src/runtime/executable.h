// The immutable executable form of a graph (design.md §3): code blocks with
// dense node indices, an input-slot layout per node and successor lists with
// the target slot precomputed. Frames (frame.h) are activations of blocks.
#ifndef TDF_SRC_RUNTIME_EXECUTABLE_H_
#define TDF_SRC_RUNTIME_EXECUTABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/hash_tables.h"
#include "graph/node_index.h"
#include "tdf/graph.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"
#include "runtime/scalar_ops.h"
#include "tdf/session.h"

namespace tdf {
namespace runtime {

// Where a token goes relative to the frame of the node that emits it.
enum class EdgeKind : uint8_t {
  kLocal,      // same frame
  kEnter,      // into iteration 0 of the child loop (or its invariants)
  kExit,       // to the loop's parent frame
  kNextIter,   // to iteration k+1
  kCall,       // into the invocation created for the call site
  kReturn,     // from a callee into its caller; only for the creating site
};

// How a delivered token makes its destination ready.
enum class DstMode : uint8_t {
  kSingle,   // the node waits for one input: ready on arrival
  // The same in the main block, where a run may leave the node out (a
  // pruned run, prune.h): ready on arrival unless its pending counter holds
  // the run's "pruned" mark. Read, never written.
  kSingleInMain,
  kCounted,  // ready when its pending counter reaches zero
  kMerge,    // Merge rules (first live input, or all dead)
  // Into a Merge whose live output its producer delivers itself (see
  // NodeInfo::returns_only_live): dead tokens count as for kMerge, a live one
  // is dropped. Uncounted, it keeps the Merge from ever firing: its dead
  // inputs then never reach its input count.
  kMergeMark,
  // Into a function's result node of one input that only returns its value
  // (an unconditional tail call's result: f(n) = f(n + 1)), on an
  // OutEdge::kReturnTail edge: a live token goes to the frame's caller
  // (Worker::ForwardTailResult), a dead one is delivered as for kSingle.
  // After the Merge modes, so the common modes' test stays one compare.
  kSingleTail,
};

struct OutEdge {
  int32_t dst;        // node id (global)
  int32_t dst_slot;   // slot index in the destination frame
  int32_t dst_index;  // the destination's index in its block (pending counter)
  int16_t src_port;   // -1: control edge
  EdgeKind kind;
  DstMode dst_mode;
  int16_t invariant;  // kEnter of a constant Enter: index in the loop's invariants; else -1
  // One byte of flags, so that an edge stays 20 bytes (a chain of 10^6
  // ops streams its edges):
  // - kPivot: from a Switch, taken over from its Cond's pivot Switch (see
  //   NodeInfo::has_pivot_edges): a control token, live exactly when the
  //   predicate is live and selects src_port, whatever the data's deadness.
  // - kCallInline: from a lean scalar op or a lean Switch of a function body
  //   to a Call of one input in the same frame: the op fires the Call itself
  //   with its value (Worker::Emit, Worker::RouteSwitch).
  // - kSwitchInline: from a lean scalar op of a function body to the
  //   predicate of a lean Switch in the same frame: when the Switch's data is
  //   already there, the op routes it itself (Worker::Emit).
  // - kValueInline: from a lean Switch's data port to a lean scalar op whose
  //   other input is a folded constant (fib's n - 1) in the same frame: the
  //   Switch fires it with the value (Worker::FireScalarWith).
  // - kConstInline: from a lean Switch's port to a Const it alone triggers
  //   (a Cond branch's constant) in the same frame: the Switch fires it
  //   (Worker::FireConstWith).
  // - kReturnInline: a function result's edge into the caller's frame, to a
  //   two-input scalar op or a one-input Call of a function body: the
  //   result's firing fires it when the value makes it ready
  //   (Worker::DeliverReturns).
  // - kReturnTail: an edge into a Merge of a function body that only passes
  //   the value on to the function's result (a tail call's result, a base
  //   case's value), or into that result itself (DstMode::kSingleTail): a
  //   live token goes to the frame's caller instead
  //   (Worker::ForwardTailResult, NodeInfo::tail_result).
  static constexpr uint8_t kPivot = 1, kCallInline = 2, kSwitchInline = 4, kValueInline = 8, kConstInline = 16,
                           kReturnInline = 32, kReturnTail = 64;
  uint8_t flags = 0;
  bool pivot() const { return flags & kPivot; }
  bool call_inline() const { return flags & kCallInline; }
  bool switch_inline() const { return flags & kSwitchInline; }
  bool value_inline() const { return flags & kValueInline; }
  bool const_inline() const { return flags & kConstInline; }
  bool return_inline() const { return flags & kReturnInline; }
  bool return_tail() const { return flags & kReturnTail; }
  void SetFlag(uint8_t flag, bool on) { flags = on ? (flags | flag) : (flags & ~flag); }
};
static_assert(sizeof(OutEdge) == 20, "an edge is 20 bytes");


// How the executor fires a node.
enum class NodeKind : uint8_t {
  kKernel,
  kPlaceholder,
  kSwitch,
  kMerge,
  kEnter,
  kExit,
  kNextIteration,
  kCall,
  kReturn,
  kInvoke,   // dynamic mode
  kArg,      // dynamic mode: a function argument (fires at instantiation)
  kRetval,   // dynamic mode: delivers a result to the Invoke's consumers
  kNoOutput, // NoOp
  // Distributed runs (docs/distributed.md): the two ends of a cut edge.
  // A Send hands its token to the run's RemoteChannel; a Recv never fires
  // locally: its token arrives (Worker::DeliverArrival).
  kSend,
  kRecv,
  // A LoopCond of a cut loop on a rank that holds no NextIteration of it:
  // a live true predicate makes the next iteration exist here too, so the
  // iteration chain waits for its tokens (Worker::FireRemoteLoopCond).
  kRemoteLoopCond,
};

// Node shapes with a lean firing path (Worker::FireLean).
enum class LeanKind : uint8_t {
  kNone,
  kScalarBinary,  // a scalar op on two data inputs, nothing else
  kSwitch,        // data and predicate, nothing else
  kPassThrough,   // Identity or LoopCond of one data input (CPU)
  kConst,         // a Const fired by control inputs only (a Cond branch's)
  kThreadCall,    // a one-input Call whose site has a compiled unit (Worker::FireThreadCall)
};

// What every firing reads, in one cache line per node; the rest of what
// the executor knows about a node is its NodeInfo (exe.info[id]). A large
// main graph (chain(10^6)) streams its nodes from memory: with every field
// in one 384-byte record, each firing pulled in a line whose neighbours
// were never read, and a chain's firings paid 6 ns each in misses.
struct alignas(64) ExecNode {
  NodeKind kind = NodeKind::kKernel;
  ScalarOp scalar_op = ScalarOp::kNone;  // the executor's inline scalar path
  // Eligible for the executor's fast path (Worker::FireFast): a scalar
  // kernel (a function's result included), Const, Switch, Merge, Call or
  // Return, without loop invariants.
  bool fast = false;
  bool is_const = false;        // Const: the value is emitted without a kernel call
  bool has_invariants = false;  // some input reads a loop invariant
  bool is_result = false;       // a function's result (return_edges_by_label)
  // Static mode (no copied bodies): the common shapes Worker::FireLean
  // fires without FireFast's generality. In main, a run's fetched and
  // target nodes still take the recording path (RunState::root_watch).
  LeanKind lean = LeanKind::kNone;
  int32_t id = 0;         // global
  int32_t index = 0;      // dense index inside the block (pending counters)
  int32_t slot_base = 0;  // first input slot in the frame
  int32_t num_inputs = 0; // data + control: one slot each
  int32_t num_data_inputs = 0;
  int32_t num_outputs = 0;
  int32_t op_id = 0;      // dense id of the op name (stats)
  // Switch in a function body: its dead-region group (ExecBlock::dead_regions), or -1.
  int32_t switch_group = -1;
  // The out edges, in ExecutableGraph::edge_pool (node order: a chain's
  // edges are contiguous), ordered so that Return edges of one label are
  // contiguous.
  const OutEdge* out_begin = nullptr;
  int32_t num_out = 0;
  int32_t block = 0;
  int32_t pending_init = 0;  // inputs to wait for (excludes loop invariants)
  absl::Span<const OutEdge> out() const { return {out_begin, static_cast<size_t>(num_out)}; }
};
static_assert(sizeof(ExecNode) == 64, "ExecNode is one cache line");

// How a node's input edges make it ready (OutEdge::dst_mode).
inline DstMode DstModeOf(NodeKind kind, int32_t pending_init, int32_t block) {
  if (kind == NodeKind::kMerge) return DstMode::kMerge;
  if (pending_init > 1) return DstMode::kCounted;
  return block == 0 ? DstMode::kSingleInMain : DstMode::kSingle;
}

// Lists that only some nodes have, out of line (NodeInfo::lists): a graph of
// 10^6 plain ops kept three empty vectors per node, 72 MB.
struct NodeLists {
  // Inputs that read a loop invariant instead of a slot (-1: a slot); empty
  // unless ExecNode::has_invariants.
  std::vector<int16_t> invariant_input;
  // Call: (Return node id, its data slot) of the site, for dead sites.
  std::vector<std::pair<int32_t, int32_t>> site_returns;
  // Call: (argument Merge id, slot) of the callee's arguments that this site
  // does not supply (a partial invocation, e.g. a forward-only call of an
  // extended function f_ext(x, dy)). They receive a dead token when the
  // invocation is created, so the part of the body that needs them drains
  // as dead and the frame is reclaimed.
  std::vector<std::pair<int32_t, int32_t>> missing_arg_merges;
  // A grouped Switch of a function body whose data arrives dead while its
  // predicate is live (a gradient draining dead: SessionOptions::
  // evaluate_without_gradients): per taken port, the edges that leave what
  // that port's dead token would make dead, one dead token each, instead
  // of firing it node by node (NodeInfo::dead_data_ports).
  std::vector<OutEdge> dead_data_frontier[2];
};
inline const NodeLists kNoNodeLists{};

// The parts of a split call site (NodeInfo::split_role).
enum class SplitRole : uint8_t { kIndependent, kForward, kGradient };

// The rest of a node: read by kernels, control-flow nodes other than the
// lean shapes, error messages and traces. Whole cache lines, so that a
// node's fields that calls read together do not straddle two of them.
struct alignas(64) NodeInfo {
  const NodeDef* def = nullptr;  // owned by ExecutableGraph::graph
  OpKernel* kernel = nullptr;  // not owned
  Device device;               // where the kernel runs
  void* device_context = nullptr;  // the device's stream (GPU kernels)
  bool folded = false;         // a Const written into its consumers' slots at frame creation
  Tensor const_value;
  // Merge: inputs expected in iteration 0 (or outside loops) and later ones.
  int32_t merge_expected[2] = {0, 0};
  // Enter: the child slot of its loop, the loop block, constant or not.
  // Call / Invoke: the child slot of its site, the callee block, the label.
  int32_t child_slot = -1;
  int32_t target_block = -1;
  int32_t label = -1;
  int32_t site_num_calls = 1;        // Call: the Call nodes of this site
  // Call: its child slot is one of the block's tail_child_slots.
  bool tail_site = false;
  int32_t num_call_edges = 0;        // Call: out edges [0, this) enter the callee
  bool is_constant_enter = false;
  int32_t parallel_iterations = 10;
  // An argument Merge whose Calls deliver to its consumers directly
  // (SessionOptions::forward_call_arguments): it never fires.
  bool forwarded = false;
  // A kernel feeding a function's result Merge whose other input is dead
  // whenever this one is live (the two branches of one Cond): it delivers
  // its live value to the caller's Returns itself, and the Merge fires only
  // when every input is dead. Its dead tokens go only to the Merge.
  bool returns_only_live = false;
  // A function result whose edges in its own frame all go to such a Merge
  // (DstMode::kMergeMark): a live firing has nothing to deliver there.
  bool local_edges_only_merge_marks = false;
  // A Switch that took over the control edges of its Cond's pivot Switch
  // (same predicate, data = the predicate), which then never fires:
  // OutEdge::kPivot marks them.
  bool has_pivot_edges = false;
  // Bit p: NodeLists::dead_data_frontier[p] stands for port p's edges.
  uint8_t dead_data_ports = 0;
  // Call: the Call nodes of the site (this one is site_call_nodes[site_call_index]).
  // When some arguments of an invocation are live and some dead, the dead
  // ones enter too once the site's last Call has arrived: the body part that
  // needs them drains as dead instead of waiting forever. Inline: a site of
  // several Calls walks it on every invocation.
  std::vector<int32_t> site_call_nodes;
  int32_t site_call_index = 0;
  // Call of a split site: the site_calls bits of this Call's part; its
  // site_returns are then the part's Returns only.
  bool split_site = false;
  uint64_t part_mask = 0;
  // A split site of two parts, the forward part (the callee's first
  // arguments) and its gradient part: which this Call is in, and the other
  // part's site_calls bits. A gradient part that arrives all dead before
  // any live argument waits for the forward part instead of returning dead
  // at once (Worker::FinishSplitCall): a gradient entering an invocation
  // dead reaches its nested sites' gradient parts before their forward
  // arguments are computed.
  SplitRole split_role = SplitRole::kIndependent;
  uint64_t other_part_mask = 0;
  std::unique_ptr<NodeLists> lists;  // null: every list empty
  const std::vector<int16_t>& invariant_input() const { return (lists ? *lists : kNoNodeLists).invariant_input; }
  const std::vector<std::pair<int32_t, int32_t>>& site_returns() const {
    return (lists ? *lists : kNoNodeLists).site_returns;
  }
  const std::vector<std::pair<int32_t, int32_t>>& missing_arg_merges() const {
    return (lists ? *lists : kNoNodeLists).missing_arg_merges;
  }
  const std::vector<OutEdge>& dead_data_frontier(int port) const {
    return (lists ? *lists : kNoNodeLists).dead_data_frontier[port];
  }
  const std::vector<int32_t>& site_calls() const { return site_call_nodes; }
  NodeLists& mutable_lists() {
    if (lists == nullptr) lists = std::make_unique<NodeLists>();
    return *lists;
  }
  // Retval identity of a function (static mode): edges [begin, end) per
  // label; the edges before first_return_edge stay in the function.
  std::vector<std::pair<int32_t, int32_t>> return_edges_by_label;
  int32_t first_return_edge = 0;
  // kArg / kRetval: the argument or result index; kPlaceholder: feed ordinal;
  // constant Enter: the invariant index; Exit: its index in the loop's exits.
  int32_t io_index = -1;
  // Variable handle (kKernel Variable): index in the session's variables.
  int32_t variable = -1;
  // A Merge that OutEdge::kReturnTail edges skip, or a result node they
  // skip (DstMode::kSingleTail): the function's result node whose Return
  // edges take the value on.
  int32_t tail_result = -1;
  // A node with Return edges (return_edges_by_label): the index of the
  // function result it delivers (the Returns' result_index).
  int32_t result_index = -1;
  // Call: its site's compiled unit (ExecutableGraph::threads), or -1.
  int32_t thread = -1;
  // Call of a site with a unit, of at most 4 Calls whose argument slots fit
  // int16: those slots in site order (RunSiteThread reads them here, not
  // through every Call's node); else none (CompileThreads).
  int16_t site_arg_slots[4] = {};
  int32_t num_site_arg_slots = 0;
};

// Dead-branch skipping. The Switches of a function body that share one
// predicate output form a group; whatever a group's port p makes dead (its
// region: every op with an input from that port or from the region, Merges
// whose inputs all come from it, call sites whose arguments all do) would
// only pass dead tokens on. Instead of firing the region node by node, the
// group's Switches hold back their port-p tokens and the last of them to fire
// delivers one dead token along each edge that leaves the region (its
// frontier). Results and every node outside regions are unchanged; region
// nodes simply never fire dead (fewer dead firings in RunStats and traces).
struct DeadRegionGroup {
  int32_t members = 0;       // Switches in the group; the frame counter's start
  int32_t counter_index = 0; // index in the frame's pending array
  std::vector<OutEdge> frontier[2];  // per dead port
};

struct ExecBlock {
  enum class Kind : uint8_t { kMain, kLoop, kFunction };
  Kind kind = Kind::kMain;
  int32_t id = 0;
  int32_t parent = -1;   // loops: enclosing block
  std::string name;      // loop frame name or function name
  std::vector<int32_t> nodes;    // global ids, in block-index order
  std::vector<int32_t> sources;  // fire when a frame of this block is created
  std::vector<int32_t> pending_template;  // per block index
  std::vector<DeadRegionGroup> dead_regions;
  // Slots pre-filled at frame creation with folded constants.
  std::vector<std::pair<int32_t, Tensor>> prefilled;
  // Slots [0, this) hold every pre-filled slot (their nodes come first).
  int32_t prefilled_slots_end = 0;
  // When not empty: the initial bytes of a frame from pending_offset on
  // (pending counts, zeroed child slots and tokens, inline constants).
  std::vector<char> image;
  int32_t num_slots = 0;
  int32_t num_child_slots = 0;
  std::vector<uint8_t> child_is_loop;  // per child slot: a LoopState (1) or a Frame (0)
  // Per child slot: several nodes of this block feed the child (a loop's
  // Enters, a call site's Calls), so a worker that fires any of them may
  // touch it: it is shared whenever its parent frame is.
  std::vector<uint8_t> child_fed_by_several;
  // Per child slot of a call site: its Calls (a split site's parts arrive
  // apart: the maximum int32, never complete).
  std::vector<int32_t> child_site_calls;
  // Loops: Enter counts from the parent block and the Exit nodes.
  int32_t num_enters = 0;      // non-constant
  int32_t num_invariants = 0;  // constant Enters
  std::vector<int32_t> exits;
  int32_t parallel_iterations = 10;
  // Static mode, SessionOptions::release_tail_callers: the child slots of
  // the call sites whose callee's results all go, along one
  // OutEdge::kReturnTail edge each, to this function's result of the same
  // index. The callee's results are then the caller's: once nothing but
  // the callee holds the caller's frame, the callee returns to the
  // caller's caller in its place (Frame::may_have_tail_child).
  std::vector<int32_t> tail_child_slots;
  // Static mode functions: per result index, a node that delivers it
  // (its Returns for every label), or -1. A frame handed over to its
  // caller's caller delivers through these (Frame::return_block).
  std::vector<int32_t> result_nodes;
  // Dynamic mode functions: arguments and results.
  int32_t num_args = 0;
  int32_t num_results = 0;
  // Distributed runs (docs/distributed.md): arrivals every frame of this
  // block expects from other ranks, one per Recv of the block and one per
  // loop inside it that no local Enter starts (the loop's first token
  // creates it); the loop's label on the wire (its LoopCond's _frame_id,
  // -1 if none); the loops and call sites below this block that tokens
  // may name.
  int32_t remote_expected = 0;
  int64_t wire_id = -1;
  // A loop or a call site of this block (its Calls create its frames).
  struct RemoteLoop {
    int64_t wire_id;
    int32_t block;
    int32_t child_slot;
    bool started_here;  // loops: a local Enter starts it (else an arrival does)
    bool is_call = false;
  };
  std::vector<RemoteLoop> remote_loops;
  // Frame layout (bytes).
  size_t pending_offset = 0, children_offset = 0, slots_offset = 0, args_offset = 0, frame_bytes = 0;
};

// A compiled unit (issue #28; threads in the Threaded Abstract Machine's
// sense): the scalar work a function body does once a call site's
// arguments have all arrived (predicate, Switch routing, arithmetic, the
// body's own calls), as straight-line code on registers, run by the caller
// (Worker::RunThread). A path that reaches the function's result without
// calling anything (a recursion's base case) returns it to the caller
// without a frame; a path that ends in calls creates the frame, stores what
// the nodes left waiting need (the values, pending counts, Merge states the
// node-by-node run would have left) and makes the calls, whose results then
// meet in the frame as usual. Any other path (a value that is not an inline
// scalar, an op the thread does not cover) gives up before it has changed
// anything, and the invocation runs node by node.
struct ThreadInstr {
  enum class Op : uint8_t {
    kCompute,   // regs[dst] = scalar_op(regs[a], regs[b]) (b < 0: unary)
    kConst,     // regs[dst] = consts[arg]
    kBranch,    // regs[a] is a bool: true -> pc += arg, false -> the next one
    kFallback,  // the path needs what the thread does not do
    kEnd,       // paths[arg] is done
  };
  Op op = Op::kFallback;
  ScalarOp scalar_op = ScalarOp::kNone;
  int16_t dst = -1, a = -1, b = -1;
  int32_t arg = -1;
};
// A call site a path calls, with every argument: its Calls (in site
// order) and their arguments' registers.
struct ThreadCall {
  std::vector<int32_t> calls;
  std::vector<int16_t> regs;
  std::vector<int32_t> slots;  // each Call's argument slot (slot_base)
  int32_t thread = -1;  // the callee's thread for this site, or -1
  // Only some of the site's Calls have their arguments: each fires on its own.
  bool partial = false;
  // A partial site the path's continuation makes whole: its Calls only get
  // their arguments in their slots (CompiledThread::held_calls).
  bool held = false;
  // Not held, at most kMaxFastArgs Calls, one of them or a thread (fib's,
  // ack's and tak's sites): MakeCall stores the arguments and queues the
  // first Call from these, without the vectors above (CompileThreads sets
  // them last, from them). num_fast 0: the general way.
  static constexpr int kMaxFastArgs = 4;
  int32_t num_fast = 0;
  int32_t call0 = -1;
  int32_t fast_slots[kMaxFastArgs] = {};
  int16_t fast_regs[kMaxFastArgs] = {};
};
// A path of a thread that ends: either the result node it fires and the
// register of its value (a base case), or the frame it leaves (slot writes,
// pending counts) and the sites it calls. The ops of the nodes it fires
// (live, once each), which RunStats count as if they had fired one by one.
struct ThreadPath {
  int32_t result_node = -1;
  int16_t reg = -1;
  std::vector<std::pair<int32_t, int16_t>> writes;    // slot <- register
  std::vector<std::pair<int32_t, int32_t>> pendings;  // pending index <- value
  std::vector<ThreadCall> sites;
  std::vector<int32_t> op_ids;
  // op_ids as (op, firings), one entry per op, with the Calls after the
  // first of each site with a thread (its first Call fires later, taking
  // them all: MakeCall): what RunStats add, num_fired in all.
  std::vector<std::pair<int32_t, int32_t>> op_counts;
  int64_t num_fired = 0;
  // Its index among every thread's paths: a worker counts the path's runs
  // there and adds op_counts times them to RunStats when it flushes.
  int32_t id = -1;
  // The registers the path's end reads (result, writes, call arguments).
  std::vector<int16_t> out_regs;
  // A path that calls: the thread that runs in its frame when every result
  // of its calls has returned (ExecutableGraph::threads), or -1.
  int32_t continuation = -1;
};
// Where one result of a call returns into a continuation's frame (the
// Threaded Abstract Machine's inlet): the slot it is stored in (its first
// edge's), the result's edges there, and their output port.
struct ContinuationInlet {
  int32_t slot = -1;
  int16_t port = 0;
  const OutEdge* edges = nullptr;  // in ExecutableGraph::edge_pool
  int32_t num_edges = 0;
};
// Typed code: the thread's code when its arguments are inline scalars of
// the dtypes the body implies (CompiledThread::arg_dtypes), on raw values
// instead of Tensors, one instruction per op and dtype (the untyped code
// decides the dtype and the op on every instruction). Integer division or
// modulo by zero returns false (the kernel reports it), as the untyped
// code does; ops whose typed result could differ from the scalar path's
// are not typed (the thread then has no typed code).
struct TypedInstr {
  enum class Op : uint8_t {
    kFallback, kEnd, kBranch, kConst, kMove,
    // int64; the K forms take b as the immediate imm
    kAddI, kSubI, kMulI, kDivI, kModI, kMaxI, kMinI, kNegI,
    kLtI, kLeI, kGtI, kGeI, kEqI, kNeI,
    kAddIK, kSubIK, kMulIK, kLtIK, kLeIK, kGtIK, kGeIK, kEqIK, kNeIK,
    // double
    kAddF, kSubF, kMulF, kDivF, kNegF, kLtF, kLeF, kGtF, kGeF, kEqF, kNeF,
    // bool
    kAnd, kOr, kNot, kEqB, kNeB,
  };
  Op op = Op::kFallback;
  int8_t dst = -1, a = -1, b = -1;
  // kBranch: relative target if true; kEnd: the path; an op that makes a
  // bool: > 0 when it is also the branch that follows it (that offset), 0.
  int32_t arg = -1;
  int64_t imm = 0;   // kConst: the value's bits; K forms: b
};
union ThreadReg {
  int64_t i;
  double f;
  bool b;
  int32_t i32;
  float f32;
};
struct CompiledThread {
  int32_t block = -1;
  int32_t num_regs = 1;
  int32_t num_args = 0;  // registers [0, this) are loaded at its start
  std::vector<int32_t> site_calls;  // the Calls of the site it was built for, in site order
  // The Calls of the sites it serves have control edges (to their Returns
  // in the caller: RunThread delivers them); the same for every such site.
  bool calls_signal = false;
  std::vector<ThreadInstr> code;
  std::vector<Tensor> consts;
  std::vector<ThreadPath> paths;
  // Typed code (empty: none) and the dtypes it assumes: of each argument
  // (checked at entry) and of each register (how a value leaves it).
  std::vector<TypedInstr> typed;
  std::vector<DType> arg_dtypes;
  std::vector<DType> reg_dtypes;
  // A continuation (compiler/continuations.cc; Worker::RunContinuation):
  // the results it waits for, and the frame slot each argument register is
  // loaded from (the inlets' slots first, then values its path left).
  std::vector<ContinuationInlet> inlets;
  int32_t num_inlets = 0;  // inlets.size(), what a frame's cont_join starts at
  std::vector<int16_t> arg_slots;
  // The Calls of partial sites its path left unfired, their arguments in
  // their slots (ThreadCall::held): it fires them; going node by node, they
  // are queued then.
  std::vector<int32_t> held_calls;
};
constexpr int kMaxThreadRegs = 16;
// Nested threads (a thread's calls running their threads) use the stack;
// past this many, calls go through FireCall and the ready stack.
constexpr int kMaxThreadNesting = 48;

struct ExecutableGraph {
  Graph graph;  // the graph that runs (owns every NodeDef)
  std::vector<std::unique_ptr<NodeDef>> extra_defs;  // dynamic mode: function body nodes
  std::vector<ExecNode> nodes;     // by global id
  std::vector<NodeInfo> info;      // by global id
  std::vector<OutEdge> edge_pool;  // every node's out edges (ExecNode::out)
  std::vector<ExecBlock> blocks;  // blocks[0] is main
  std::vector<std::unique_ptr<OpKernel>> kernels;
  std::vector<std::string> op_names;  // by op_id
  std::vector<int32_t> placeholders;  // node ids, by feed ordinal
  std::vector<int32_t> variables;     // Variable node ids, by handle
  // The GPUs that nodes, variables or copies name: a run that used them
  // ends by waiting for their streams, so that errors their kernels
  // recorded fail the run that caused them.
  std::vector<Device> gpu_devices;
  ExecutionMode mode = ExecutionMode::kStatic;

  int32_t FindMainNode(absl::string_view name) const;  // -1 if none
  // An Exit of a loop of the main graph (not nested in another loop): its
  // results arrive in the root frame, so it can be fetched. -1 if none.
  int32_t FindMainLoopExit(absl::string_view name) const;
  // Static mode: the main graph's Invokes, which the transformation replaced
  // by Call and Return nodes, by name: the Return node of each output port.
  // A fetch or target naming such an Invoke resolves to them, so that it
  // gives the call's results as in dynamic mode.
  base::FlatHashMap<std::string, std::vector<int32_t>> invoke_results;
  // The Return nodes of main-graph Invoke `name` (null if none).
  const std::vector<int32_t>* FindInvokeResults(absl::string_view name) const;
  // Distributed runs: the Send and Recv nodes of a partition (NodeInfo::
  // io_index indexes remote_ends) and the Recvs by their pair's key.
  struct RemoteEnd {
    int32_t node = -1;
    int64_t key = 0;
    int32_t peer_rank = -1;  // a Send's recv_rank, a Recv's send_rank
    bool control = false;
    DType dtype = DType::kInvalid;
  };
  std::vector<RemoteEnd> remote_ends;
  base::FlatHashMap<int64_t, int32_t> recv_by_key;  // key -> index in remote_ends
  // Names of graph.node: feeds and fetches are resolved on every run, and a
  // scan is linear in the graph (chain(10^5): 9% of a run).
  NodeIndex main_index;
  // Compiled units (SessionOptions::compile_threads): NodeInfo::thread.
  std::vector<CompiledThread> threads;
  int32_t num_thread_paths = 0;  // ThreadPath::id < this
};

// Compiles the entry threads of function bodies (compiler/threads.cc) and
// points the Calls that can run them at them.
// `continuations`: and the threads that run when a path's calls return.
void CompileThreads(ExecutableGraph* exe, bool continuations);

// Builds the executable form. In static mode `graph` must be transformed
// (no Invoke); in dynamic mode it keeps its Invoke nodes and library. The
// executable keeps `graph` (its NodeDefs name nodes in errors and traces).
absl::StatusOr<std::unique_ptr<ExecutableGraph>> Compile(Graph graph, ExecutionMode mode,
                                                         const SessionOptions& options);
// The same with the main graph's index when its maker has it
// (StaticizeRecursionIndexed; taken): not built again.
absl::StatusOr<std::unique_ptr<ExecutableGraph>> Compile(Graph graph, NodeIndex* main_index, ExecutionMode mode,
                                                         const SessionOptions& options);

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_EXECUTABLE_H_
