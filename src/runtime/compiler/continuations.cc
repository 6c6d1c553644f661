// Compiler step: continuations of compiled units (issue #28,
// SessionOptions::compile_continuations), the Threaded Abstract Machine's
// inlets and the thread they start.
// Requires: CompileThreads' entry threads, with the model of their frame at
// the end of each path that calls (ThreadBuilder::ends).
// Ensures: for such a path whose sites are whole, not tail sites, and whose
// Calls signal nothing in the frame (or partial: their other arguments come
// from the results, and they wait unfired for the continuation to make them
// whole: ThreadCall::held), a CompiledThread that computes on
// registers what the frame's nodes would once every result of those calls
// has returned, and the path's ThreadPath::continuation pointing at it. It
// is found by running the model on from the path's end, each result
// delivered along its edges into the frame as a register of its own (the
// join: fib's Add, nth's Switches on isprime's answer, tak's outer site):
// dataflow is confluent, so delivering them all and then firing reaches
// the state any order of arrival would. Its arguments are loaded from the
// frame: each result from its inlet's slot (where it was stored on
// arrival), then the values the path left in slots, then the held Calls'
// arguments. Its paths end as an
// entry thread's do: the frame's result, or more calls (the slots and
// counts that changed since the path's end). A result must reach the
// frame along the same edges whichever node of the callee delivers it (a
// base case's Const, the Add of the recursive case, a handed-over tail
// callee standing in): its first edge's slot names its inlet.
// Pinned by tests/runtime/compiled_continuations_test.cc.
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "runtime/compiler/thread_builder.h"
#include "runtime/executable.h"

namespace tdf {
namespace runtime {
namespace thread_compiler {
namespace {

// Result `index` of `callee`'s invocations for call site `label`: the
// edges of its canonical node (ExecBlock::result_nodes) into the caller,
// when every node of the callee that delivers it has the same ones.
bool ResultEdges(const ExecutableGraph& exe, int32_t callee, int32_t label, int32_t index, const OutEdge** begin,
                 int32_t* count) {
  const ExecBlock& blk = exe.blocks[callee];
  const int32_t canonical = blk.result_nodes[index];
  if (canonical < 0) return false;
  auto edges_of = [&](int32_t id, const OutEdge** b, int32_t* n) {
    const auto& by_label = exe.info[id].return_edges_by_label;
    if (label < 0 || label >= static_cast<int32_t>(by_label.size())) return false;
    *b = exe.nodes[id].out_begin + by_label[label].first;
    *n = by_label[label].second - by_label[label].first;
    return true;
  };
  if (!edges_of(canonical, begin, count)) return false;
  for (int32_t id : blk.nodes) {
    if (id == canonical || !exe.nodes[id].is_result || exe.info[id].result_index != index) continue;
    const OutEdge* b;
    int32_t n;
    if (!edges_of(id, &b, &n) || n != *count) return false;
    for (int32_t k = 0; k < n; ++k) {
      const OutEdge& x = (*begin)[k];
      const OutEdge& y = b[k];
      if (x.dst != y.dst || x.dst_slot != y.dst_slot || x.src_port != y.src_port || x.kind != y.kind ||
          x.dst_mode != y.dst_mode || x.flags != y.flags)
        return false;
    }
  }
  return true;
}

}  // namespace

bool ThreadBuilder::BuildContinuation(const PathEnd& end, const ThreadPath& path) {
  if (path.sites.empty()) return false;
  Model m;
  m.pending = end.model.pending;
  m.reg_of_slot.assign(blk_.num_slots, -1);
  m.decided.assign(kMaxThreadRegs, -1);
  m.fired = end.model.fired;
  num_regs_ = 0;
  std::vector<ContinuationInlet> inlets;
  std::set<int32_t> inlet_slots;
  std::vector<int32_t> held;
  for (const ThreadCall& site : path.sites) {
    if (site.calls.empty()) return false;
    if (site.partial) {
      // Its other arguments come from the results (ack's outer call
      // ack(m - 1, ack(m, n - 1))): its Calls wait with their arguments in
      // their slots, unfired, and the continuation makes the whole site.
      for (int32_t c : site.calls) {
        if (exe_.info[c].num_call_edges != exe_.nodes[c].num_out || exe_.nodes[c].slot_base > INT16_MAX) return false;
        held.push_back(c);
      }
      continue;
    }
    for (int32_t c : site.calls) {
      // A tail site's results pass the frame by (ForwardTailResult, or the
      // callee takes its place); a Call's control edges would change the
      // frame while its results are out.
      const NodeInfo& info = exe_.info[c];
      if (info.tail_site || info.num_call_edges != exe_.nodes[c].num_out) return false;
    }
    const NodeInfo& first = exe_.info[site.calls[0]];
    const ExecBlock& callee = exe_.blocks[first.target_block];
    for (int32_t k = 0; k < static_cast<int32_t>(callee.result_nodes.size()); ++k) {
      ContinuationInlet inlet;
      if (!ResultEdges(exe_, first.target_block, first.label, k, &inlet.edges, &inlet.num_edges)) return false;
      if (inlet.num_edges == 0) continue;  // the caller does not read it: it never arrives
      inlet.slot = inlet.edges[0].dst_slot;
      inlet.port = inlet.edges[0].src_port;
      for (int32_t e = 0; e < inlet.num_edges; ++e) {
        const OutEdge& edge = inlet.edges[e];
        if (edge.kind != EdgeKind::kReturn || edge.src_port != inlet.port || edge.return_tail()) return false;
      }
      if (inlet.port < 0 || inlet.port > 1 || inlet.slot > INT16_MAX || !inlet_slots.insert(inlet.slot).second)
        return false;
      inlets.push_back(inlet);
    }
  }
  if (inlets.empty() || inlets.size() + path.writes.size() + held.size() >= static_cast<size_t>(kMaxThreadRegs))
    return false;
  // Registers: the results, then the values the path left in the frame.
  out_->arg_slots.clear();
  for (const ContinuationInlet& inlet : inlets) {
    NewReg();
    out_->arg_slots.push_back(static_cast<int16_t>(inlet.slot));
  }
  for (const auto& [slot, reg] : path.writes) {
    if (slot > INT16_MAX) return false;
    m.reg_of_slot[slot] = NewReg();
    out_->arg_slots.push_back(static_cast<int16_t>(slot));
  }
  for (int32_t c : held) {
    const ExecNode& call = exe_.nodes[c];
    m.reg_of_slot[call.slot_base] = NewReg();
    out_->arg_slots.push_back(static_cast<int16_t>(call.slot_base));
    m.fired[call.index] = 0;  // it fires in the continuation
    m.ready.push_back(c);
  }
  out_->num_args = num_regs_;
  for (size_t i = 0; i < inlets.size(); ++i)
    for (int32_t e = 0; e < inlets[i].num_edges; ++e)
      if (!Deliver(m, inlets[i].edges[e], static_cast<int16_t>(i), false)) return false;
  start_pending_ = &end.model.pending;
  Code code;
  if (!Run(std::move(m), &code) || code.size() > kMaxThreadCode) return false;
  if (code.size() == 1 && code[0].op == ThreadInstr::Op::kFallback) return false;
  out_->block = blk_.id;
  out_->num_regs = num_regs_;
  out_->code.assign(code.begin(), code.end());
  out_->inlets = std::move(inlets);
  out_->held_calls = std::move(held);
  return true;
}

void AddContinuations(ExecutableGraph* exe, int32_t index, const std::vector<PathEnd>& ends) {
  for (const PathEnd& end : ends) {
    CompiledThread cont;
    ThreadBuilder builder(*exe, exe->blocks[exe->threads[index].block], &cont);
    if (!builder.BuildContinuation(end, exe->threads[index].paths[end.path])) continue;
    FinishPaths(&cont);
    if (!TypeThread(&cont)) cont.typed.clear();
    ThreadPath& path = exe->threads[index].paths[end.path];
    path.continuation = static_cast<int32_t>(exe->threads.size());
    for (ThreadCall& site : path.sites) site.held = site.partial;
    exe->threads.push_back(std::move(cont));
  }
}

}  // namespace thread_compiler
}  // namespace runtime
}  // namespace tdf
