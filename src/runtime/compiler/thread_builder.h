// The model of a function body's frame that compiled units are found on
// (compiler/threads.cc: entry threads; compiler/continuations.cc: the
// threads that run when a call's results return), shared by both. Internal
// to src/runtime/compiler.
#ifndef TDF_SRC_RUNTIME_COMPILER_THREAD_BUILDER_H_
#define TDF_SRC_RUNTIME_COMPILER_THREAD_BUILDER_H_

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "runtime/executable.h"

namespace tdf {
namespace runtime {
namespace thread_compiler {

// The frame's Merge states, as the executor keeps them (run_state.inc).
constexpr int32_t kModelMergeFired = 1 << 30;
constexpr int32_t kModelMergeCountMask = 0xFFFF;
// Bodies larger than this are not modelled (Session::Create stays linear).
constexpr size_t kMaxModelNodes = 256;
constexpr size_t kMaxThreadCode = 256;

// A frame of the block as the model runs it. Inline up to the size of a
// small body: a model is built per call site and copied at every fork, and
// with std::vectors those copies were most of the step's allocations
// (10^4 functions: 12 per site).
struct Model {
  absl::InlinedVector<int32_t, 32> pending;      // the frame's pending array
  absl::InlinedVector<int16_t, 48> reg_of_slot;  // per input slot: the register it holds, or -1
  absl::InlinedVector<int8_t, kMaxThreadRegs> decided;  // per register: a predicate's outcome on this path, or -1
  absl::InlinedVector<int32_t, 16> ready;        // node ids
  absl::InlinedVector<int32_t, 32> op_ids;       // fired, in order
  absl::InlinedVector<uint8_t, 32> fired;        // per block index
  absl::InlinedVector<std::pair<int32_t, int16_t>, 4> calls;  // Calls fired: node, argument register
  int32_t result_node = -1;
  int16_t result_reg = -1;
};

// A path's code while it is built (forks build each branch's apart).
using Code = absl::InlinedVector<ThreadInstr, 16>;

// A path that ends in calls, and the model of its frame at its end: where
// its continuation starts (continuations.cc).
struct PathEnd {
  int32_t path;  // index in CompiledThread::paths
  Model model;
};

class ThreadBuilder {
 public:
  ThreadBuilder(const ExecutableGraph& exe, const ExecBlock& blk, CompiledThread* out)
      : exe_(exe), blk_(blk), out_(out) {
    prefilled_.reserve(blk.prefilled.size());
    for (const auto& [slot, value] : blk.prefilled) prefilled_.push_back({slot, &value});
    // By slot; of two entries for one slot the later counts (stable).
    std::stable_sort(prefilled_.begin(), prefilled_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }

  // The paths of the thread built that end in calls, with their models.
  const std::vector<PathEnd>& ends() const { return ends_; }

  // The continuation of a path that ends in calls (continuations.cc): the
  // thread that runs when every result of the path's calls has returned
  // into its frame (`end`); out_->inlets say where they arrive. False:
  // none (the results are delivered node by node).
  bool BuildContinuation(const PathEnd& end, const ThreadPath& path);

  // The thread for a site whose Calls are `calls` (in site order): Call i
  // delivers argument register i into the callee. False: nothing worth
  // compiling.
  // Not for a body that tokens from other ranks may name or pass through
  // (a Recv, or a loop or call site of remote_loops): its frames must come
  // from NewFrame, which shares them in runs with several workers.
  bool Build(const std::vector<int32_t>& calls) {
    if (blk_.kind != ExecBlock::Kind::kFunction || blk_.remote_expected != 0 || !blk_.remote_loops.empty() ||
        blk_.nodes.size() > kMaxModelNodes || blk_.result_nodes.size() != 1 ||
        calls.size() >= static_cast<size_t>(kMaxThreadRegs))
      return false;
    Model m;
    m.pending.assign(blk_.pending_template.begin(), blk_.pending_template.end());
    m.reg_of_slot.assign(blk_.num_slots, -1);
    m.decided.assign(kMaxThreadRegs, -1);
    m.fired.assign(blk_.nodes.size(), 0);
    num_regs_ = static_cast<int>(calls.size());  // registers 0..: the arguments
    for (size_t i = 0; i < calls.size(); ++i) {
      const ExecNode& call = exe_.nodes[calls[i]];
      const OutEdge* begin = call.out_begin;
      for (const OutEdge* e = begin; e != begin + exe_.info[calls[i]].num_call_edges; ++e)
        if (e->kind != EdgeKind::kCall || e->src_port != 0 || !Deliver(m, *e, static_cast<int16_t>(i), false))
          return false;
    }
    // A frame's sources fire when it is created: Consts only (nth's
    // isprime(c, 2)), fired by the model; the thread's frame never pushes them.
    for (int32_t src : blk_.sources) {
      const ExecNode& n = exe_.nodes[src];
      if (n.kind != NodeKind::kKernel || !n.is_const || n.num_inputs != 0) return false;
      m.ready.push_back(src);
    }
    Code code;
    if (!Run(std::move(m), &code) || code.size() > kMaxThreadCode) return false;
    if (code.size() == 1 && code[0].op == ThreadInstr::Op::kFallback) return false;  // no path returns
    out_->block = blk_.id;
    out_->num_regs = num_regs_;
    out_->num_args = static_cast<int32_t>(calls.size());
    out_->site_calls = calls;
    out_->code.assign(code.begin(), code.end());
    return true;
  }

 private:
  int16_t NewReg() { return num_regs_ < kMaxThreadRegs ? static_cast<int16_t>(num_regs_++) : -1; }

  int16_t Const(const Tensor& value, Code* code) {
    if (!value.is_inline_scalar()) return -1;
    const int16_t r = NewReg();
    if (r < 0) return -1;
    ThreadInstr in;
    in.op = ThreadInstr::Op::kConst;
    in.dst = r;
    in.arg = static_cast<int32_t>(out_->consts.size());
    out_->consts.push_back(value);
    code->push_back(in);
    return r;
  }

  // The register an input slot's value is in (a folded constant is loaded
  // into one), or -1.
  int16_t InputReg(Model& m, int32_t slot, Code* code) {
    if (m.reg_of_slot[slot] >= 0) return m.reg_of_slot[slot];
    const Tensor* value = Prefilled(slot);
    if (value == nullptr) return -1;
    return m.reg_of_slot[slot] = Const(*value, code);
  }

  // The constant folded into `slot`, or null.
  const Tensor* Prefilled(int32_t slot) const {
    auto it = std::upper_bound(prefilled_.begin(), prefilled_.end(), slot,
                               [](int32_t s, const auto& entry) { return s < entry.first; });
    return it == prefilled_.begin() || (it - 1)->first != slot ? nullptr : (it - 1)->second;
  }

  // DeliverEdge on the model; false: the path leaves the model. A Return
  // edge is a call's result arriving (a continuation's start).
  bool Deliver(Model& m, const OutEdge& e, int16_t reg, bool dead) {
    if (e.kind != EdgeKind::kLocal && e.kind != EdgeKind::kCall && e.kind != EdgeKind::kReturn) return false;
    const ExecNode& d = exe_.nodes[e.dst];
    if (d.block != blk_.id) return false;
    if (e.return_tail() && !dead) {
      // The value is the function's result, forwarded past the Merges that
      // would only pass it on (tak's z, ForwardTailResult): a base case.
      if (reg < 0 || m.result_node >= 0) return false;
      m.result_node = exe_.info[e.dst].tail_result;
      m.result_reg = reg;
      return true;
    }
    switch (e.dst_mode) {
      case DstMode::kSingle:
        if (dead) return false;
        m.reg_of_slot[e.dst_slot] = reg;
        m.ready.push_back(e.dst);
        return true;
      case DstMode::kCounted:
        if (dead) return false;
        m.reg_of_slot[e.dst_slot] = reg;
        if (--m.pending[e.dst_index] == 0) m.ready.push_back(e.dst);
        return true;
      case DstMode::kMerge:
      case DstMode::kMergeMark: {
        int32_t& state = m.pending[e.dst_index];
        if (!dead) {
          if (e.dst_mode == DstMode::kMergeMark || (state & kModelMergeFired)) return true;  // dropped
          state |= kModelMergeFired | ((e.dst_slot - d.slot_base) << 16);
          m.reg_of_slot[e.dst_slot] = reg;
          m.ready.push_back(e.dst);
          return true;
        }
        const int32_t prev = state++;
        // The Merge would fire dead: not modelled.
        return !((prev & kModelMergeCountMask) + 1 == exe_.info[e.dst].merge_expected[0] &&
                 !(prev & kModelMergeFired));
      }
      default:
        return false;
    }
  }

  // Runs the model to the end of its path (forking at Switches on a
  // predicate not yet decided), appending the path's code. False: the
  // thread cannot be built (too many registers).
  bool Run(Model m, Code* code) {
    Code prefix;
    while (!m.ready.empty()) {
      const int32_t id = m.ready.back();
      const ExecNode& n = exe_.nodes[id];
      if (n.kind == NodeKind::kSwitch && n.num_inputs == 2) {
        const int16_t p = InputReg(m, n.slot_base + 1, &prefix);
        if (p >= 0 && m.decided[p] < 0) {
          Code on_false, on_true;
          for (int outcome : {0, 1}) {
            Model fork = m;
            fork.decided[p] = static_cast<int8_t>(outcome);
            if (!Run(std::move(fork), outcome ? &on_true : &on_false)) return false;
          }
          if (Fallback(on_false) && Fallback(on_true)) {
            code->push_back(FallbackInstr());  // nothing before it matters
            return true;
          }
          ThreadInstr branch;
          branch.op = ThreadInstr::Op::kBranch;
          branch.a = p;
          branch.arg = static_cast<int32_t>(on_false.size()) + 1;  // relative
          code->insert(code->end(), prefix.begin(), prefix.end());
          code->push_back(branch);
          code->insert(code->end(), on_false.begin(), on_false.end());
          code->insert(code->end(), on_true.begin(), on_true.end());
          return true;
        }
      }
      m.ready.pop_back();
      int verdict = Fire(m, id, &prefix);
      if (verdict < 0) return false;
      if (verdict == 0) {
        code->push_back(FallbackInstr());
        return true;
      }
    }
    ThreadPath path;
    if (!m.calls.empty()) {
      // A frame that waits for its calls: what its waiting nodes hold.
      if (m.result_node >= 0 || !LeaveFrame(m, &path)) {
        code->push_back(FallbackInstr());
        return true;
      }
      ends_.push_back({static_cast<int32_t>(out_->paths.size()), m});
    } else if (m.result_node >= 0) {
      path.result_node = m.result_node;
      path.reg = m.result_reg;
    } else {
      code->push_back(FallbackInstr());
      return true;
    }
    path.op_ids.assign(m.op_ids.begin(), m.op_ids.end());
    ThreadInstr end;
    end.op = ThreadInstr::Op::kEnd;
    end.arg = static_cast<int32_t>(out_->paths.size());
    out_->paths.push_back(std::move(path));
    code->insert(code->end(), prefix.begin(), prefix.end());
    code->push_back(end);
    return true;
  }

  // The frame a path that calls leaves: its sites (whole, or the Calls of a
  // site that have their arguments), and the slots and counts that differ
  // from the frame's at the thread's start (a fresh frame's, for an entry
  // thread); slots a continuation loaded its registers from hold them.
  bool LeaveFrame(const Model& m, ThreadPath* path) {
    std::map<int32_t, ThreadCall> by_slot;
    for (const auto& [call, reg] : m.calls) {
      const NodeInfo& info = exe_.info[call];
      ThreadCall& site = by_slot[info.child_slot];
      const std::vector<int32_t> nodes = SiteCalls(call);
      if (site.calls.empty()) {
        site.calls = nodes;
        site.regs.assign(nodes.size(), -1);
      }
      site.regs[info.site_num_calls == 1 ? 0 : info.site_call_index] = reg;
    }
    for (auto& [slot, site] : by_slot) {
      if (std::find(site.regs.begin(), site.regs.end(), int16_t{-1}) != site.regs.end()) {
        // Some arguments come later (ack's outer call ack(m - 1, ack(m, n - 1))):
        // the Calls that have theirs fire on their own and wait in their
        // slots for the rest (FireCallWhenComplete).
        ThreadCall partial;
        partial.partial = true;
        for (size_t i = 0; i < site.calls.size(); ++i) {
          if (site.regs[i] < 0) continue;
          partial.calls.push_back(site.calls[i]);
          partial.regs.push_back(site.regs[i]);
        }
        site = std::move(partial);
      }
      path->sites.push_back(std::move(site));
    }
    for (size_t i = 0; i < blk_.nodes.size(); ++i) {
      // A forwarded argument Merge that nothing targets has no slots.
      if (m.fired[i] || exe_.info[blk_.nodes[i]].forwarded) continue;
      const ExecNode& n = exe_.nodes[blk_.nodes[i]];
      for (int32_t slot = n.slot_base; slot < n.slot_base + n.num_inputs && slot < blk_.num_slots; ++slot)
        if (m.reg_of_slot[slot] >= 0 && Prefilled(slot) == nullptr && !LoadedFrom(m.reg_of_slot[slot], slot))
          path->writes.push_back({slot, m.reg_of_slot[slot]});
    }
    const int32_t* base = start_pending_ != nullptr ? start_pending_->data() : blk_.pending_template.data();
    for (size_t i = 0; i < m.pending.size(); ++i)
      if (m.pending[i] != base[i]) path->pendings.push_back({static_cast<int32_t>(i), m.pending[i]});
    return true;
  }

  static ThreadInstr FallbackInstr() { return ThreadInstr{}; }

 public:
  // A Call whose site a thread may make: whole (not split, every argument
  // supplied), in a static-mode function frame.
  static bool CallableIn(const ExecutableGraph& exe, int32_t call) {
    const NodeInfo& info = exe.info[call];
    return !info.split_site && info.missing_arg_merges().empty() && info.target_block >= 0 &&
           info.num_call_edges >= 1 &&
           (info.site_num_calls == 1 || static_cast<int32_t>(info.site_calls().size()) == info.site_num_calls);
  }
  static std::vector<int32_t> SiteCallsIn(const ExecutableGraph& exe, int32_t call) {
    const NodeInfo& info = exe.info[call];
    return info.site_num_calls == 1 ? std::vector<int32_t>{call} : info.site_calls();
  }

 private:
  bool Callable(int32_t call) const { return CallableIn(exe_, call); }
  std::vector<int32_t> SiteCalls(int32_t call) const { return SiteCallsIn(exe_, call); }
  static bool Fallback(const Code& code) {
    return code.size() == 1 && code[0].op == ThreadInstr::Op::kFallback;
  }

  // Fires node `id` live on the model: 1 done, 0 the path leaves the
  // model, -1 out of registers.
  int Fire(Model& m, int32_t id, Code* code) {
    const ExecNode& n = exe_.nodes[id];
    const NodeInfo& info = exe_.info[id];
    if (n.has_invariants || n.block != blk_.id) return 0;
    int16_t port_reg[2] = {-1, -1};
    int dead_port = -1;
    switch (n.kind) {
      case NodeKind::kKernel: {
        if (n.num_outputs != 1) return 0;
        if (n.is_const) {
          port_reg[0] = Const(info.const_value, code);
          if (port_reg[0] < 0) return info.const_value.is_inline_scalar() ? -1 : 0;
          break;
        }
        if (n.scalar_op == ScalarOp::kNone || n.num_data_inputs < 1 || n.num_data_inputs > 2) return 0;
        ThreadInstr in;
        in.op = ThreadInstr::Op::kCompute;
        in.scalar_op = n.scalar_op;
        in.a = InputReg(m, n.slot_base, code);
        if (n.num_data_inputs > 1) in.b = InputReg(m, n.slot_base + 1, code);
        if (in.a < 0 || (n.num_data_inputs > 1 && in.b < 0)) return 0;
        in.dst = NewReg();
        if (in.dst < 0) return -1;
        code->push_back(in);
        port_reg[0] = in.dst;
        break;
      }
      case NodeKind::kSwitch: {
        if (n.num_inputs != 2) return 0;
        const int16_t d = InputReg(m, n.slot_base, code);
        const int16_t p = InputReg(m, n.slot_base + 1, code);
        if (d < 0 || p < 0 || m.decided[p] < 0) return 0;
        dead_port = m.decided[p] ? 0 : 1;
        port_reg[1 - dead_port] = d;
        break;
      }
      case NodeKind::kMerge: {
        const int32_t state = m.pending[n.index];
        if (!(state & kModelMergeFired)) return 0;
        const int32_t input = (state >> 16) & 0x3FFF;
        port_reg[0] = m.reg_of_slot[n.slot_base + input];
        if (port_reg[0] < 0) return 0;
        for (const OutEdge& e : n.out())
          if (e.src_port == 1) {
            port_reg[1] = Const(Tensor::Scalar<int32_t>(input), code);
            if (port_reg[1] < 0) return -1;
            break;
          }
        break;
      }
      case NodeKind::kCall: {
        // Its argument goes to the callee when the path ends; its control
        // edges to its site's Returns are delivered then too (RunThread).
        if (!Callable(id) || n.num_data_inputs != 1) return 0;
        const int16_t a = InputReg(m, n.slot_base, code);
        if (a < 0) return 0;
        // Counted when the path's end makes the call (RunThread).
        m.calls.push_back({id, a});
        m.fired[n.index] = 1;
        return 1;
      }
      default:
        return 0;  // Returns, loops, kernels: the node-by-node run
    }
    m.op_ids.push_back(n.op_id);
    m.fired[n.index] = 1;
    absl::Span<const OutEdge> edges = n.out();
    if (n.is_result) {
      if (m.result_node >= 0) return 0;
      m.result_node = id;
      m.result_reg = port_reg[0];
      edges = info.local_edges_only_merge_marks ? edges.subspan(0, 0) : edges.subspan(0, info.first_return_edge);
    }
    const bool grouped = n.kind == NodeKind::kSwitch && n.switch_group >= 0;
    for (const OutEdge& e : edges) {
      if (dead_port >= 0 && e.src_port == dead_port) {
        if (grouped) continue;  // the group's frontier stands in for it
        if (!Deliver(m, e, -1, true)) return 0;
        continue;
      }
      const bool control = e.src_port < 0 || e.pivot();
      if (!Deliver(m, e, control ? int16_t{-1} : port_reg[e.src_port], false)) return 0;
    }
    if (grouped) {
      const DeadRegionGroup& group = blk_.dead_regions[n.switch_group];
      if (--m.pending[group.counter_index] == 0) {
        for (const OutEdge& e : group.frontier[dead_port])
          if (!Deliver(m, e, -1, true)) return 0;
      }
    }
    return 1;
  }

  // A continuation's register `reg` is loaded from `slot` of the frame.
  bool LoadedFrom(int16_t reg, int32_t slot) const {
    return reg >= 0 && reg < out_->num_args && out_->arg_slots.size() == static_cast<size_t>(out_->num_args) &&
           out_->arg_slots[reg] == slot;
  }

  const ExecutableGraph& exe_;
  const ExecBlock& blk_;
  CompiledThread* out_;
  std::vector<std::pair<int32_t, const Tensor*>> prefilled_;  // by slot (Prefilled)
  int num_regs_ = 1;
  std::vector<PathEnd> ends_;
  // A continuation: the frame's pending counts when it starts.
  const absl::InlinedVector<int32_t, 32>* start_pending_ = nullptr;
};

// The typed form of a thread's code (threads.cc): false when some op or
// dtype has none (the thread then runs untyped).
bool TypeThread(CompiledThread* t);
// What a path's end needs beyond its code: the registers it reads (threads.cc).
void FinishPaths(CompiledThread* t);
// The continuations of the paths of exe->threads[index] that end in calls
// (continuations.cc): each appended to exe->threads, and its path's
// ThreadPath::continuation pointed at it.
void AddContinuations(ExecutableGraph* exe, int32_t index, const std::vector<PathEnd>& ends);

}  // namespace thread_compiler
}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_COMPILER_THREAD_BUILDER_H_
