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
// A body's Const sources fire on the model first (they fire when a frame is
// created). The model and its builder are in thread_builder.h; a path that
// ends in calls may also get a continuation (continuations.cc).
// Pinned by tests/runtime/compiled_threads_test.cc.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "base/hash_tables.h"
#include "runtime/compiler/thread_builder.h"
#include "runtime/executable.h"

namespace tdf {
namespace runtime {
namespace {

using thread_compiler::ThreadBuilder;

// The typed form of a thread's code (TypedInstr): false when some op or
// dtype has none (the thread then runs untyped).
class ThreadTyper {
 public:
  explicit ThreadTyper(CompiledThread* t) : t_(t) {}

  bool Type() {
    const int num_args = t_->num_args;
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
    absl::InlinedVector<TypedInstr, 32> typed;
    absl::InlinedVector<int8_t, kMaxThreadRegs> is_const(t_->num_regs, 0);
    absl::InlinedVector<int64_t, kMaxThreadRegs> const_value(t_->num_regs, 0);
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
    t_->typed = DropUnusedConsts(typed);
    FuseBranches(&t_->typed);
    t_->arg_dtypes.assign(dtype_.begin(), dtype_.begin() + num_args);
    t_->reg_dtypes.assign(dtype_.begin(), dtype_.end());
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

  // An op that makes a bool, followed by the branch on it, branches itself
  // (its `arg` becomes the branch's offset; RunTypedCode): one dispatch
  // less per branch. The branch stays, for code that jumps to it.
  static void FuseBranches(std::vector<TypedInstr>* code) {
    using O = TypedInstr::Op;
    for (size_t i = 0; i < code->size(); ++i) {
      TypedInstr& in = (*code)[i];
      const bool makes_bool = (in.op >= O::kLtI && in.op <= O::kNeI) || (in.op >= O::kLtIK && in.op <= O::kNeIK) ||
                              (in.op >= O::kLtF && in.op <= O::kNeF) || in.op >= O::kAnd;
      if (!makes_bool) continue;
      const TypedInstr* next = i + 1 < code->size() ? &(*code)[i + 1] : nullptr;
      in.arg = next != nullptr && next->op == O::kBranch && next->a == in.dst && next->arg >= 1 ? next->arg : 0;
    }
  }

  // Constants that only immediates read are not loaded; branch offsets
  // are remapped over the removed instructions.
  std::vector<TypedInstr> DropUnusedConsts(absl::Span<const TypedInstr> code) const {
    absl::InlinedVector<int8_t, kMaxThreadRegs> read(t_->num_regs, 0);
    for (const TypedInstr& in : code) {
      if (in.op == TypedInstr::Op::kConst) continue;
      if (in.a >= 0) read[in.a] = 1;
      if (in.b >= 0) read[in.b] = 1;
    }
    for (const ThreadPath& p : t_->paths)
      for (int16_t r : p.out_regs) read[r] = 1;
    absl::InlinedVector<int32_t, 64> new_index(code.size() + 1);
    int32_t kept = 0;
    for (size_t i = 0; i < code.size(); ++i) {
      new_index[i] = kept;
      if (code[i].op != TypedInstr::Op::kConst || read[code[i].dst]) ++kept;
    }
    new_index[code.size()] = kept;
    std::vector<TypedInstr> out;
    out.reserve(kept);
    for (size_t i = 0; i < code.size(); ++i) {
      TypedInstr in = code[i];
      if (in.op == TypedInstr::Op::kConst && !read[in.dst]) continue;
      if (in.op == TypedInstr::Op::kBranch) in.arg = new_index[i + in.arg] - new_index[i];
      out.push_back(in);
    }
    return out;
  }

  CompiledThread* t_;
  // Per register (at most kMaxThreadRegs): inline, as the other per-thread
  // buffers, allocated per thread they were a third of the step's allocations.
  absl::InlinedVector<DType, kMaxThreadRegs> dtype_;
};

}  // namespace

namespace thread_compiler {

bool TypeThread(CompiledThread* t) { return ThreadTyper(t).Type(); }

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

}  // namespace thread_compiler

void CompileThreads(ExecutableGraph* exe, bool continuations) {
  // One thread per callee and argument edges: the sites of a function
  // deliver its arguments along the same edges.
  // Hashed, not a tree: one lookup per site (10^5 functions: 10^5 string
  // keys compared log2(10^5) times each).
  base::FlatHashMap<std::pair<int32_t, std::string>, int32_t> built;
  // Mostly a thread per called function: sized for that once, as the
  // vector of 272-byte threads copied itself at each doubling (10^5
  // functions: 1% of Create). Sites of one callee whose argument edges
  // differ get more, by growth.
  {
    std::vector<uint8_t> called(exe->blocks.size(), 0);
    size_t callees = 0;
    for (size_t id = 0; id < exe->nodes.size(); ++id) {
      if (exe->nodes[id].kind != NodeKind::kCall) continue;
      const int32_t b = exe->info[id].target_block;
      if (b >= 0 && b < static_cast<int32_t>(called.size()) && called[b] == 0) {
        called[b] = 1;
        ++callees;
      }
    }
    exe->threads.reserve(exe->threads.size() + callees);
  }
  for (size_t id = 0; id < exe->nodes.size(); ++id) {
    const ExecNode& n = exe->nodes[id];
    if (n.kind != NodeKind::kCall || exe->info[id].thread >= 0 ||
        !ThreadBuilder::CallableIn(*exe, static_cast<int32_t>(id)))
      continue;
    const std::vector<int32_t> calls = ThreadBuilder::SiteCallsIn(*exe, static_cast<int32_t>(id));
    std::pair<int32_t, std::string> key{exe->info[id].target_block, {}};
    bool ok = true;
    bool signal = false;
    for (int32_t c : calls) {
      ok &= exe->nodes[c].kind == NodeKind::kCall && exe->nodes[c].num_data_inputs == 1;
      signal |= exe->info[c].num_call_edges != exe->nodes[c].num_out;
      const OutEdge* begin = exe->nodes[c].out_begin;
      for (const OutEdge* e = begin; e != begin + exe->info[c].num_call_edges; ++e) {
        const int32_t fields[] = {e->dst, e->dst_slot, e->src_port, static_cast<int32_t>(e->kind),
                                  static_cast<int32_t>(e->dst_mode), e->flags};
        key.second.append(reinterpret_cast<const char*>(fields), sizeof(fields));
      }
      key.second.push_back('|');
    }
    key.second.push_back(signal ? 'S' : '-');  // sites that share a thread agree on calls_signal
    if (!ok) continue;
    auto it = built.find(key);
    if (it == built.end()) {
      CompiledThread thread;
      int32_t index = -1;
      ThreadBuilder builder(*exe, exe->blocks[key.first], &thread);
      if (builder.Build(calls)) {
        thread.calls_signal = signal;
        thread_compiler::FinishPaths(&thread);
        if (!thread_compiler::TypeThread(&thread)) thread.typed.clear();
        index = static_cast<int32_t>(exe->threads.size());
        exe->threads.push_back(std::move(thread));
        if (continuations) thread_compiler::AddContinuations(exe, index, builder.ends());
      }
      it = built.emplace(std::move(key), index).first;
    }
    bool slots_fit = it->second >= 0 && calls.size() <= 4;
    for (int32_t c : calls) slots_fit &= exe->nodes[c].slot_base >= 0 && exe->nodes[c].slot_base <= INT16_MAX;
    for (int32_t c : calls) {
      NodeInfo& info = exe->info[c];
      info.thread = it->second;
      info.num_site_arg_slots = 0;
      if (!slots_fit) continue;
      for (size_t i = 0; i < calls.size(); ++i)
        info.site_arg_slots[i] = static_cast<int16_t>(exe->nodes[calls[i]].slot_base);
      info.num_site_arg_slots = static_cast<int32_t>(calls.size());
    }
  }
  // A Call popped from the ready stack (a site a unit's path made, a
  // parked site's first Call) goes straight to its unit.
  for (size_t id = 0; id < exe->nodes.size(); ++id) {
    ExecNode& n = exe->nodes[id];
    if (n.kind == NodeKind::kCall && exe->info[id].thread >= 0 && n.fast && n.lean == LeanKind::kNone &&
        n.num_inputs == 1 && n.num_data_inputs == 1 && !n.has_invariants)
      n.lean = LeanKind::kThreadCall;
  }
  // The sites a path calls, with their threads (every thread is built now).
  exe->num_thread_paths = 0;
  for (CompiledThread& t : exe->threads) {
    t.num_inlets = static_cast<int32_t>(t.inlets.size());
    for (ThreadPath& p : t.paths) {
      p.id = exe->num_thread_paths++;
      // The ops the path fires, sorted, then counted by op (a map per path
      // cost an allocation per op).
      absl::InlinedVector<int32_t, 32> fired(p.op_ids.begin(), p.op_ids.end());
      p.num_fired = static_cast<int64_t>(p.op_ids.size());
      for (ThreadCall& site : p.sites) {
        site.thread = site.partial ? -1 : exe->info[site.calls[0]].thread;
        site.slots.clear();
        for (int32_t c : site.calls) site.slots.push_back(exe->nodes[c].slot_base);
        const size_t n = site.calls.size();
        site.num_fast = 0;
        if (!site.held && n >= 1 && n <= static_cast<size_t>(ThreadCall::kMaxFastArgs) && site.regs.size() == n &&
            (site.thread >= 0 || n == 1)) {
          site.num_fast = static_cast<int32_t>(n);
          site.call0 = site.calls[0];
          for (size_t i = 0; i < n; ++i) {
            site.fast_slots[i] = site.slots[i];
            site.fast_regs[i] = site.regs[i];
          }
        }
        if (site.thread < 0) continue;
        for (size_t i = 1; i < site.calls.size(); ++i) fired.push_back(exe->nodes[site.calls[i]].op_id);
        p.num_fired += static_cast<int64_t>(site.calls.size()) - 1;
      }
      std::sort(fired.begin(), fired.end());
      p.op_counts.clear();
      size_t distinct = 0;
      for (size_t i = 0; i < fired.size(); ++i) distinct += i == 0 || fired[i] != fired[i - 1];
      p.op_counts.reserve(distinct);
      for (size_t i = 0; i < fired.size();) {
        size_t j = i;
        while (j < fired.size() && fired[j] == fired[i]) ++j;
        p.op_counts.push_back({fired[i], static_cast<int32_t>(j - i)});
        i = j;
      }
    }
  }
}

}  // namespace runtime
}  // namespace tdf
