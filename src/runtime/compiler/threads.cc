// Compiler step: compiled units (issue #28, SessionOptions::compile_threads).
// Requires: a linked static-mode executable (edges in the pool, slots laid
// out, dead regions built).
// Ensures: for each whole call site (not split, every argument supplied),
// a CompiledThread that computes on registers what the callee's nodes
// would from its arguments' arrival on, and the site's Calls pointing at it
// (NodeInfo::thread). The thread is found by running the body's nodes on a
// model of a fresh frame (pending counts, Merge states, dead-region
// counters) exactly as the executor would: a Switch whose predicate is not
// known yet forks the model, one branch per outcome. A path that ends with
// the function's result fired live once (or its value forwarded to the
// caller past Merges: a tail result), and nothing else made ready that the
// model does not run, returns (a base case); a path that ends with call
// sites made, and no result, leaves the frame's state (slot values and
// counts that differ from a fresh frame's) and its sites (a site whose
// other arguments come later gets the Calls that have theirs, which wait for
// the rest: FireCallWhenComplete). Any
// other path (a node fired dead, a Merge of all-dead inputs, a Return, a
// loop, a kernel without a scalar path) falls back to the node-by-node
// run. The nodes a path fires are recorded with it, so RunStats count them.
// Pinned by tests/runtime/compiled_threads_test.cc.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executable.h"

namespace tdf {
namespace runtime {
namespace {

// The frame's Merge states, as the executor keeps them (run_state.inc).
constexpr int32_t kModelMergeFired = 1 << 30;
constexpr int32_t kModelMergeCountMask = 0xFFFF;
// Bodies larger than this are not modelled (Session::Create stays linear).
constexpr size_t kMaxModelNodes = 256;
constexpr size_t kMaxThreadCode = 256;

struct Model {
  std::vector<int32_t> pending;      // the frame's pending array
  std::vector<int16_t> reg_of_slot;  // per input slot: the register it holds, or -1
  std::vector<int8_t> decided;       // per register: a predicate's outcome on this path, or -1
  std::vector<int32_t> ready;        // node ids
  std::vector<int32_t> op_ids;       // fired, in order
  std::vector<uint8_t> fired;        // per block index
  std::vector<std::pair<int32_t, int16_t>> calls;  // Calls fired: node, argument register
  int32_t result_node = -1;
  int16_t result_reg = -1;
};

class ThreadBuilder {
 public:
  ThreadBuilder(const ExecutableGraph& exe, const ExecBlock& blk, CompiledThread* out)
      : exe_(exe), blk_(blk), out_(out) {
    for (const auto& [slot, value] : blk.prefilled) prefilled_[slot] = &value;
  }

  // The thread for a site whose Calls are `calls` (in site order): Call i
  // delivers argument register i into the callee. False: nothing worth
  // compiling.
  bool Build(const std::vector<int32_t>& calls) {
    if (blk_.kind != ExecBlock::Kind::kFunction || !blk_.sources.empty() || blk_.remote_expected != 0 ||
        blk_.nodes.size() > kMaxModelNodes || blk_.result_nodes.size() != 1 ||
        calls.size() >= static_cast<size_t>(kMaxThreadRegs))
      return false;
    Model m;
    m.pending = blk_.pending_template;
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
    std::vector<ThreadInstr> code;
    if (!Run(std::move(m), &code) || code.size() > kMaxThreadCode) return false;
    if (code.size() == 1 && code[0].op == ThreadInstr::Op::kFallback) return false;  // no path returns
    out_->block = blk_.id;
    out_->num_regs = num_regs_;
    out_->site_calls = calls;
    out_->code = std::move(code);
    return true;
  }

 private:
  int16_t NewReg() { return num_regs_ < kMaxThreadRegs ? static_cast<int16_t>(num_regs_++) : -1; }

  int16_t Const(const Tensor& value, std::vector<ThreadInstr>* code) {
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
  int16_t InputReg(Model& m, int32_t slot, std::vector<ThreadInstr>* code) {
    if (m.reg_of_slot[slot] >= 0) return m.reg_of_slot[slot];
    auto it = prefilled_.find(slot);
    if (it == prefilled_.end()) return -1;
    return m.reg_of_slot[slot] = Const(*it->second, code);
  }

  // DeliverEdge on the model; false: the path leaves the model.
  bool Deliver(Model& m, const OutEdge& e, int16_t reg, bool dead) {
    if (e.kind != EdgeKind::kLocal && e.kind != EdgeKind::kCall) return false;
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
  bool Run(Model m, std::vector<ThreadInstr>* code) {
    std::vector<ThreadInstr> prefix;
    while (!m.ready.empty()) {
      const int32_t id = m.ready.back();
      const ExecNode& n = exe_.nodes[id];
      if (n.kind == NodeKind::kSwitch && n.num_inputs == 2) {
        const int16_t p = InputReg(m, n.slot_base + 1, &prefix);
        if (p >= 0 && m.decided[p] < 0) {
          std::vector<ThreadInstr> on_false, on_true;
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
    } else if (m.result_node >= 0) {
      path.result_node = m.result_node;
      path.reg = m.result_reg;
    } else {
      code->push_back(FallbackInstr());
      return true;
    }
    path.op_ids = std::move(m.op_ids);
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
  // from a fresh frame's.
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
        if (m.reg_of_slot[slot] >= 0 && !prefilled_.count(slot)) path->writes.push_back({slot, m.reg_of_slot[slot]});
    }
    for (size_t i = 0; i < m.pending.size(); ++i)
      if (m.pending[i] != blk_.pending_template[i]) path->pendings.push_back({static_cast<int32_t>(i), m.pending[i]});
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
  static bool Fallback(const std::vector<ThreadInstr>& code) {
    return code.size() == 1 && code[0].op == ThreadInstr::Op::kFallback;
  }

  // Fires node `id` live on the model: 1 done, 0 the path leaves the
  // model, -1 out of registers.
  int Fire(Model& m, int32_t id, std::vector<ThreadInstr>* code) {
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

  const ExecutableGraph& exe_;
  const ExecBlock& blk_;
  CompiledThread* out_;
  std::map<int32_t, const Tensor*> prefilled_;
  int num_regs_ = 1;
};

// The typed form of a thread's code (TypedInstr): false when some op or
// dtype has none (the thread then runs untyped).
class ThreadTyper {
 public:
  explicit ThreadTyper(CompiledThread* t) : t_(t) {}

  bool Type() {
    const int num_args = static_cast<int>(t_->site_calls.size());
    const std::vector<ThreadInstr>& code = t_->code;
    dtype_.assign(t_->num_regs, DType::kInvalid);
    for (const ThreadInstr& in : code)
      if (in.op == ThreadInstr::Op::kConst) dtype_[in.dst] = t_->consts[in.arg].dtype();
    // An argument takes the dtype of what it meets in a binary op (the
    // scalar path needs both the same) or what a branch or Not needs; one
    // that meets nothing of a known dtype is taken as int64.
    for (bool changed = true; changed;) {
      changed = false;
      auto fix = [&](int16_t r, DType d) {
        if (r >= 0 && r < num_args && dtype_[r] == DType::kInvalid && d != DType::kInvalid) {
          dtype_[r] = d;
          changed = true;
        }
      };
      for (const ThreadInstr& in : code) {
        if (in.op == ThreadInstr::Op::kBranch) fix(in.a, DType::kBool);
        if (in.op != ThreadInstr::Op::kCompute) continue;
        if (in.scalar_op == ScalarOp::kLogicalNot || in.scalar_op == ScalarOp::kLogicalAnd ||
            in.scalar_op == ScalarOp::kLogicalOr) {
          fix(in.a, DType::kBool);
          fix(in.b, DType::kBool);
        } else if (in.b >= 0) {
          fix(in.a, dtype_[in.b]);
          fix(in.b, dtype_[in.a]);
        }
        // What the op gives, for what it meets later.
        const bool compares = in.scalar_op >= ScalarOp::kLess && in.scalar_op <= ScalarOp::kLogicalNot;
        const DType d = compares ? DType::kBool : dtype_[in.a];
        if (dtype_[in.dst] == DType::kInvalid && d != DType::kInvalid) {
          dtype_[in.dst] = d;
          changed = true;
        }
      }
    }
    for (int r = 0; r < num_args; ++r)
      if (dtype_[r] == DType::kInvalid) dtype_[r] = DType::kInt64;
    std::vector<TypedInstr> typed;
    std::vector<int8_t> is_const(t_->num_regs, 0);
    std::vector<int64_t> const_value(t_->num_regs, 0);
    for (const ThreadInstr& in : code) {
      TypedInstr out;
      out.dst = static_cast<int8_t>(in.dst);
      out.a = static_cast<int8_t>(in.a);
      out.b = static_cast<int8_t>(in.b);
      out.arg = in.arg;
      switch (in.op) {
        case ThreadInstr::Op::kFallback: out.op = TypedInstr::Op::kFallback; break;
        case ThreadInstr::Op::kEnd: out.op = TypedInstr::Op::kEnd; break;
        case ThreadInstr::Op::kBranch:
          if (dtype_[in.a] != DType::kBool) return false;
          out.op = TypedInstr::Op::kBranch;
          break;
        case ThreadInstr::Op::kConst: {
          const Tensor& v = t_->consts[in.arg];
          if (!Bits(v, &out.imm)) return false;
          out.op = TypedInstr::Op::kConst;
          is_const[in.dst] = 1;
          const_value[in.dst] = out.imm;
          break;
        }
        case ThreadInstr::Op::kCompute: {
          DType result = DType::kInvalid;
          if (!Compute(in, &out.op, &result)) return false;
          dtype_[in.dst] = result;
          if (in.b >= 0 && is_const[in.b] && dtype_[in.b] == DType::kInt64) {
            const TypedInstr::Op k = WithImmediate(out.op);
            if (k != out.op) {
              out.op = k;
              out.imm = const_value[in.b];
              out.b = -1;
            }
          }
          break;
        }
      }
      typed.push_back(out);
    }
    for (DType d : dtype_)
      if (d != DType::kInvalid && !Storable(d)) return false;
    t_->typed = DropUnusedConsts(std::move(typed));
    t_->arg_dtypes.assign(dtype_.begin(), dtype_.begin() + num_args);
    t_->reg_dtypes = dtype_;
    return true;
  }

 private:
  static bool Storable(DType d) {
    return d == DType::kInt64 || d == DType::kFloat64 || d == DType::kBool || d == DType::kInt32 ||
           d == DType::kFloat32;
  }
  static bool Bits(const Tensor& v, int64_t* bits) {
    if (!v.is_inline_scalar() || !Storable(v.dtype())) return false;
    ThreadReg r;
    r.i = 0;
    switch (v.dtype()) {
      case DType::kInt64: r.i = v.scalar<int64_t>(); break;
      case DType::kFloat64: r.f = v.scalar<double>(); break;
      case DType::kBool: r.b = v.scalar<bool>(); break;
      case DType::kInt32: r.i32 = v.scalar<int32_t>(); break;
      default: r.f32 = v.scalar<float>(); break;
    }
    *bits = r.i;
    return true;
  }

  // The typed op of a kCompute on its operands' dtypes, as ComputeScalar
  // computes it; false where ComputeScalar would return false or the op
  // has no typed form.
  bool Compute(const ThreadInstr& in, TypedInstr::Op* op, DType* result) const {
    using O = TypedInstr::Op;
    const DType a = dtype_[in.a];
    if (in.scalar_op == ScalarOp::kIdentity) {
      *op = O::kMove;
      *result = a;
      return Storable(a);
    }
    if (in.b < 0) {
      *result = a;
      if (in.scalar_op == ScalarOp::kNeg && a == DType::kInt64) return *op = O::kNegI, true;
      if (in.scalar_op == ScalarOp::kNeg && a == DType::kFloat64) return *op = O::kNegF, true;
      if (in.scalar_op == ScalarOp::kLogicalNot && a == DType::kBool) return *op = O::kNot, true;
      return false;
    }
    if (dtype_[in.b] != a) return false;
    *result = DType::kBool;
    if (a == DType::kInt64) {
      static constexpr std::pair<ScalarOp, O> kOps[] = {
          {ScalarOp::kAdd, O::kAddI}, {ScalarOp::kSub, O::kSubI},         {ScalarOp::kMul, O::kMulI},
          {ScalarOp::kDiv, O::kDivI}, {ScalarOp::kMod, O::kModI},         {ScalarOp::kMaximum, O::kMaxI},
          {ScalarOp::kMinimum, O::kMinI}, {ScalarOp::kLess, O::kLtI},     {ScalarOp::kLessEqual, O::kLeI},
          {ScalarOp::kGreater, O::kGtI}, {ScalarOp::kGreaterEqual, O::kGeI}, {ScalarOp::kEqual, O::kEqI},
          {ScalarOp::kNotEqual, O::kNeI}};
      for (const auto& [s, t] : kOps)
        if (s == in.scalar_op) {
          *op = t;
          if (t <= O::kMinI) *result = DType::kInt64;
          return true;
        }
      return false;
    }
    if (a == DType::kFloat64) {
      // Maximum and Minimum of doubles stay with the kernel (NaN).
      static constexpr std::pair<ScalarOp, O> kOps[] = {
          {ScalarOp::kAdd, O::kAddF}, {ScalarOp::kSub, O::kSubF},          {ScalarOp::kMul, O::kMulF},
          {ScalarOp::kDiv, O::kDivF}, {ScalarOp::kLess, O::kLtF},          {ScalarOp::kLessEqual, O::kLeF},
          {ScalarOp::kGreater, O::kGtF}, {ScalarOp::kGreaterEqual, O::kGeF}, {ScalarOp::kEqual, O::kEqF},
          {ScalarOp::kNotEqual, O::kNeF}};
      for (const auto& [s, t] : kOps)
        if (s == in.scalar_op) {
          *op = t;
          if (t <= O::kDivF) *result = DType::kFloat64;
          return true;
        }
      return false;
    }
    if (a == DType::kBool) {
      static constexpr std::pair<ScalarOp, O> kOps[] = {{ScalarOp::kLogicalAnd, O::kAnd},
                                                         {ScalarOp::kLogicalOr, O::kOr},
                                                         {ScalarOp::kEqual, O::kEqB},
                                                         {ScalarOp::kNotEqual, O::kNeB}};
      for (const auto& [s, t] : kOps)
        if (s == in.scalar_op) return *op = t, true;
    }
    return false;
  }

  static TypedInstr::Op WithImmediate(TypedInstr::Op op) {
    using O = TypedInstr::Op;
    switch (op) {
      case O::kAddI: return O::kAddIK;
      case O::kSubI: return O::kSubIK;
      case O::kMulI: return O::kMulIK;
      case O::kLtI: return O::kLtIK;
      case O::kLeI: return O::kLeIK;
      case O::kGtI: return O::kGtIK;
      case O::kGeI: return O::kGeIK;
      case O::kEqI: return O::kEqIK;
      case O::kNeI: return O::kNeIK;
      default: return op;
    }
  }

  // Constants that only immediates read are not loaded; branch offsets
  // are remapped over the removed instructions.
  std::vector<TypedInstr> DropUnusedConsts(std::vector<TypedInstr> code) const {
    std::vector<int8_t> read(t_->num_regs, 0);
    for (const TypedInstr& in : code) {
      if (in.op == TypedInstr::Op::kConst) continue;
      if (in.a >= 0) read[in.a] = 1;
      if (in.b >= 0) read[in.b] = 1;
    }
    for (const ThreadPath& p : t_->paths)
      for (int16_t r : p.out_regs) read[r] = 1;
    std::vector<int32_t> new_index(code.size() + 1);
    int32_t kept = 0;
    for (size_t i = 0; i < code.size(); ++i) {
      new_index[i] = kept;
      if (code[i].op != TypedInstr::Op::kConst || read[code[i].dst]) ++kept;
    }
    new_index[code.size()] = kept;
    std::vector<TypedInstr> out;
    for (size_t i = 0; i < code.size(); ++i) {
      TypedInstr in = code[i];
      if (in.op == TypedInstr::Op::kConst && !read[in.dst]) continue;
      if (in.op == TypedInstr::Op::kBranch) in.arg = new_index[i + in.arg] - new_index[i];
      out.push_back(in);
    }
    return out;
  }

  CompiledThread* t_;
  std::vector<DType> dtype_;
};

// What a path's end needs beyond its code: its firings per op and the
// registers it reads.
void FinishPaths(CompiledThread* t) {
  for (ThreadPath& p : t->paths) {
    std::vector<int16_t> regs;
    if (p.reg >= 0) regs.push_back(p.reg);
    for (const auto& [slot, reg] : p.writes) regs.push_back(reg);
    for (const ThreadCall& site : p.sites) regs.insert(regs.end(), site.regs.begin(), site.regs.end());
    std::sort(regs.begin(), regs.end());
    regs.erase(std::unique(regs.begin(), regs.end()), regs.end());
    p.out_regs = std::move(regs);
  }
}

}  // namespace

void CompileThreads(ExecutableGraph* exe) {
  // One thread per callee and argument edges: the sites of a function
  // deliver its arguments along the same edges.
  std::map<std::pair<int32_t, std::string>, int32_t> built;
  for (size_t id = 0; id < exe->nodes.size(); ++id) {
    const ExecNode& n = exe->nodes[id];
    if (n.kind != NodeKind::kCall || exe->info[id].thread >= 0 ||
        !ThreadBuilder::CallableIn(*exe, static_cast<int32_t>(id)))
      continue;
    const std::vector<int32_t> calls = ThreadBuilder::SiteCallsIn(*exe, static_cast<int32_t>(id));
    std::pair<int32_t, std::string> key{exe->info[id].target_block, {}};
    bool ok = true;
    for (int32_t c : calls) {
      ok &= exe->nodes[c].kind == NodeKind::kCall && exe->nodes[c].num_data_inputs == 1;
      const OutEdge* begin = exe->nodes[c].out_begin;
      for (const OutEdge* e = begin; e != begin + exe->info[c].num_call_edges; ++e) {
        const int32_t fields[] = {e->dst, e->dst_slot, e->src_port, static_cast<int32_t>(e->kind),
                                  static_cast<int32_t>(e->dst_mode), e->flags};
        key.second.append(reinterpret_cast<const char*>(fields), sizeof(fields));
      }
      key.second.push_back('|');
    }
    if (!ok) continue;
    auto it = built.find(key);
    if (it == built.end()) {
      CompiledThread thread;
      int32_t index = -1;
      if (ThreadBuilder(*exe, exe->blocks[key.first], &thread).Build(calls)) {
        FinishPaths(&thread);
        if (!ThreadTyper(&thread).Type()) thread.typed.clear();
        index = static_cast<int32_t>(exe->threads.size());
        exe->threads.push_back(std::move(thread));
      }
      it = built.emplace(std::move(key), index).first;
    }
    for (int32_t c : calls) exe->info[c].thread = it->second;
  }
  // The sites a path calls, with their threads (every thread is built now).
  exe->num_thread_paths = 0;
  for (CompiledThread& t : exe->threads)
    for (ThreadPath& p : t.paths) {
      p.id = exe->num_thread_paths++;
      std::map<int32_t, int32_t> counts;
      for (int32_t op : p.op_ids) ++counts[op];
      p.num_fired = static_cast<int64_t>(p.op_ids.size());
      for (ThreadCall& site : p.sites) {
        site.thread = site.partial ? -1 : exe->info[site.calls[0]].thread;
        site.slots.clear();
        for (int32_t c : site.calls) site.slots.push_back(exe->nodes[c].slot_base);
        if (site.thread < 0) continue;
        for (size_t i = 1; i < site.calls.size(); ++i) ++counts[exe->nodes[site.calls[i]].op_id];
        p.num_fired += static_cast<int64_t>(site.calls.size()) - 1;
      }
      p.op_counts.assign(counts.begin(), counts.end());
    }
}

}  // namespace runtime
}  // namespace tdf
