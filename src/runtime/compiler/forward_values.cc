// Compiler step: forwarded values. Requires: dead regions built.
// Ensures: nodes that would only pass a value on never fire: a Call
// delivers to the callee's argument consumers, a result goes past its
// Identity and Return to the caller's consumers, pivot Identities and
// Switches are taken over by their producers or a Switch of the same
// predicate, an exclusive result Merge by its live input's kernel. Runs and
// RunStats' live values are unchanged; firing counts drop (fib: 11 -> 5 a
// call). Turned off by SessionOptions::forward_call_values. Pinned by
// tests/runtime/dead_branches_test.cc, api_regression_test.cc and the
// randomized tests (random_recursion_test.cc), which run every variant.
#include "base/hash_tables.h"
#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

// A function's argument Merge receives exactly one token per invocation
// (from the Call of the site that created it) and passes it on unchanged:
// the Calls can deliver to its consumers directly, one firing less per
// argument per call (fib 11 -> 10 per call, tak 15.7 -> 12.7). The Merge
// keeps its edges for the dead token of an argument a site does not
// supply (FireCall), but never fires. Only Merges whose every input is a
// Call, whose value_index output is unused and whose consumers are in the
// function's own frame.
void Compiler::ForwardCallArguments() {
  std::vector<NodeBuild>& nodes = nodes_;
  std::vector<int32_t> call_inputs(nodes.size(), 0);
  for (const NodeBuild& c : nodes) {
    if (c.kind != NodeKind::kCall) continue;
    for (const OutEdge& e : c.edges)
      if (e.kind == EdgeKind::kCall) ++call_inputs[e.dst];
  }
  for (NodeBuild& m : nodes) {
    if (m.kind != NodeKind::kMerge || exe_->blocks[m.block].kind != ExecBlock::Kind::kFunction) continue;
    bool ok = m.num_inputs > 0 && call_inputs[m.id] == m.num_inputs && Info(m).merge_expected[0] == 1 &&
              Info(m).merge_expected[1] == 1 && !m.edges.empty();
    for (const OutEdge& e : m.edges) ok &= e.kind == EdgeKind::kLocal && e.src_port <= 0;
    Info(m).forwarded = ok;
  }
  for (NodeBuild& c : nodes) {
    if (c.kind != NodeKind::kCall) continue;
    bool any = false;
    for (const OutEdge& e : c.edges) any |= e.kind == EdgeKind::kCall && Info(nodes[e.dst]).forwarded;
    if (!any) continue;
    EdgeList edges;
    for (const OutEdge& e : c.edges) {
      if (e.kind != EdgeKind::kCall || !Info(nodes[e.dst]).forwarded) {
        edges.push_back(e);
        continue;
      }
      for (OutEdge f : nodes[e.dst].edges) {
        f.kind = EdgeKind::kCall;
        f.src_port = e.src_port;
        edges.push_back(f);
      }
    }
    c.edges = std::move(edges);
  }
}

// The one node of `dst`'s block with an edge into `dst` (and that edge's
// index in its edges), or -1 when there are none or several. Reads the
// counts of CountLocalEdges, which its callers keep as they move edges:
// a scan of the block per Identity was quadratic in a body's Conds.
int32_t Compiler::SoleProducer(int32_t dst, int32_t* edge_index) const {
  if (local_in_count_[dst] != 1) return -1;
  const int32_t producer = static_cast<int32_t>(local_in_sum_[dst]);
  const EdgeList& edges = nodes_[producer].edges;
  for (int32_t k = 0; k < static_cast<int32_t>(edges.size()); ++k) {
    if (edges[k].dst != dst) continue;
    *edge_index = k;
    return producer;
  }
  return -1;
}

// Per node, the edges into it from nodes of its own block: how many, and
// the sum of their producers' ids (the producer, when there is one).
void Compiler::CountLocalEdges() {
  local_in_count_.assign(nodes_.size(), 0);
  local_in_sum_.assign(nodes_.size(), 0);
  for (const NodeBuild& p : nodes_)
    for (const OutEdge& e : p.edges) NoteLocalEdge(p, e, 1);
}

void Compiler::NoteLocalEdge(const NodeBuild& p, const OutEdge& e, int32_t sign) {
  if (nodes_[e.dst].block != p.block) return;
  local_in_count_[e.dst] += sign;
  local_in_sum_[e.dst] += sign * static_cast<int64_t>(p.id);
}

// `p` also sends, from its output `port`, everything result node `r`
// sends (r's local edges, then its Returns): r's label ranges, shifted
// past p's own edges, become p's.
void Compiler::TakeOverEdges(NodeBuild& p, const NodeBuild& r, int16_t port) {
  const int32_t shift = static_cast<int32_t>(p.edges.size());
  for (OutEdge e : r.edges) {
    e.src_port = port;
    p.edges.push_back(e);
  }
  Info(p).return_edges_by_label = Info(r).return_edges_by_label;
  Info(p).result_index = Info(r).result_index;
  for (auto& range : Info(p).return_edges_by_label) {
    if (range.first == range.second) continue;
    range.first += shift;
    range.second += shift;
  }
}

// A function's result Identity (the node with Return edges by label) only
// passes its input on: the node that computes the result takes over its
// edges, local ones and the Returns of every call site, and the Identity
// never fires (unless a dead region's frontier feeds it, when it still
// passes the dead token on). Only a kernel or Merge producer in the same
// frame that is not itself a result, feeding the Identity's only input.
void Compiler::ForwardResults() {
  std::vector<NodeBuild>& nodes = nodes_;
  CountLocalEdges();
  for (NodeBuild& r : nodes) {
    // The NodeBuild's fields first: NodeInfo is a cache miss per node of a large graph.
    if (r.kind != NodeKind::kKernel || r.num_inputs != 1 || exe_->blocks[r.block].kind != ExecBlock::Kind::kFunction ||
        Info(r).return_edges_by_label.empty() || absl::string_view(Info(r).def->op) != "Identity")
      continue;
    int32_t edge_index = -1;
    const int32_t producer = SoleProducer(r.id, &edge_index);
    if (producer < 0) continue;
    NodeBuild& p = nodes[producer];
    const OutEdge into = p.edges[edge_index];
    if ((p.kind != NodeKind::kKernel && p.kind != NodeKind::kMerge) || !Info(p).return_edges_by_label.empty() ||
        into.kind != EdgeKind::kLocal || into.src_port < 0 || p.block != r.block)
      continue;
    p.edges.erase(p.edges.begin() + edge_index);
    NoteLocalEdge(p, into, -1);
    const size_t taken_from = p.edges.size();
    TakeOverEdges(p, r, into.src_port);
    for (size_t k = taken_from; k < p.edges.size(); ++k) NoteLocalEdge(p, p.edges[k], 1);
    Info(r).forwarded = true;
  }
}

// Identities in a function body (a Cond's pivots: one fires per call) only
// pass their input on: their producer delivers to their consumers itself,
// from the same output port (a control consumer reads that port's
// deadness), and they never fire. Only Identities with one data input from
// a kernel, Switch or Merge of the same frame that is not a result.
void Compiler::ForwardIdentities() {
  std::vector<NodeBuild>& nodes = nodes_;
  CountLocalEdges();
  for (const ExecBlock& blk : exe_->blocks) {
    if (blk.kind != ExecBlock::Kind::kFunction) continue;
    for (int32_t id : blk.nodes) {
      NodeBuild& x = nodes[id];
      if (x.kind != NodeKind::kKernel || absl::string_view(Info(x).def->op) != "Identity" || x.num_inputs != 1 ||
          Info(x).forwarded || !Info(x).return_edges_by_label.empty())
        continue;
      bool local = true;
      for (const OutEdge& e : x.edges) local &= e.kind == EdgeKind::kLocal;
      if (!local) continue;
      int32_t edge_index = -1;
      const int32_t producer = SoleProducer(x.id, &edge_index);
      if (producer < 0) continue;
      NodeBuild& p = nodes[producer];
      const OutEdge into = p.edges[edge_index];
      const bool kind_ok =
          p.kind == NodeKind::kKernel || p.kind == NodeKind::kSwitch || p.kind == NodeKind::kMerge;
      if (!kind_ok || !Info(p).return_edges_by_label.empty() || into.kind != EdgeKind::kLocal || into.src_port < 0)
        continue;
      p.edges.erase(p.edges.begin() + edge_index);
      NoteLocalEdge(p, into, -1);
      for (OutEdge e : x.edges) {
        e.src_port = into.src_port;
        p.edges.push_back(e);
        NoteLocalEdge(p, e, 1);
      }
      Info(x).forwarded = true;
    }
  }
}

// A Cond's pivot Switch (data and predicate both the predicate) exists to
// trigger its branches' control inputs: one live token on the taken
// port. When another Switch of the frame routes a value on the same
// predicate (fib's Cond on n <= 1 routes n), that Switch sends those
// triggers itself, live exactly when the predicate is live and selects
// their port (OutEdge::kPivot; its own data may be dead), and the pivot
// never fires: fib, one firing fewer per call. Only a pivot outside any
// dead region whose every consumer is a control input in the frame, and a
// taker outside any region that is skipped.
void Compiler::ForwardPivotSwitches() {
  std::vector<NodeBuild>& nodes = nodes_;
  // Per Switch of the block, the edges that feed it (how many) and the
  // (producer, port) of its inputs 0 and 1 ({-1, -1}: none), the first
  // such edge in block and edge order. Taken once: forwarding a pivot
  // moves only edges into control inputs and into the pivot, and a
  // simple Switch (all a pivot or taker can be) has no control input.
  // (Collected again after each pivot, it was quadratic in the Conds.)
  struct Feed {
    int32_t edges = 0;
    std::pair<int32_t, int32_t> input[2] = {{-1, -1}, {-1, -1}};
  };
  // Cleared per block, not made: a static graph has a function block per
  // function, and the tables were allocations per block.
  base::FlatHashMap<int32_t, Feed> feeds;
  base::FlatHashMap<std::pair<int32_t, int32_t>, std::vector<int32_t>> by_predicate;
  for (ExecBlock& blk : exe_->blocks) {
    if (blk.kind != ExecBlock::Kind::kFunction) continue;
    // Without a Switch there is no pivot to forward.
    if (std::none_of(blk.nodes.begin(), blk.nodes.end(),
                     [&](int32_t id) { return nodes[id].kind == NodeKind::kSwitch; }))
      continue;
    feeds.clear();
    by_predicate.clear();
    for (int32_t id : blk.nodes) {
      for (const OutEdge& e : nodes[id].edges) {
        const NodeBuild& d = nodes[e.dst];
        if (d.kind != NodeKind::kSwitch || d.block != blk.id) continue;
        Feed& f = feeds[d.id];
        ++f.edges;
        const int32_t input = e.dst_slot - d.slot_base;
        if ((input == 0 || input == 1) && e.kind == EdgeKind::kLocal && e.src_port >= 0 && f.input[input].first < 0)
          f.input[input] = {id, e.src_port};
      }
    }
    auto simple = [&](const NodeBuild& w) {
      return w.kind == NodeKind::kSwitch && w.num_inputs == 2 && w.num_data_inputs == 2 && !w.has_invariants &&
             Info(w).return_edges_by_label.empty() && !Info(w).forwarded;
    };
    // The (producer, port) feeding input `input` of Switch `w`, or {-1, -1}.
    auto source = [&](const NodeBuild& w, int32_t input) -> std::pair<int32_t, int32_t> {
      auto it = feeds.find(w.id);
      return it == feeds.end() ? std::pair<int32_t, int32_t>{-1, -1} : it->second.input[input];
    };
    // The Switches of each predicate (input 1's source), in block order:
    // a pivot's taker is among its predicate's.
    for (int32_t id : blk.nodes)
      if (nodes[id].kind == NodeKind::kSwitch) by_predicate[source(nodes[id], 1)].push_back(id);
    // A body cut across ranks (it has Recvs; distributed sessions have no
    // dead regions, so every Switch has switch_group -1): the first Switch
    // of the predicate on this rank may be a split site's gradient part,
    // whose data (d_r) comes only after this invocation's forward result,
    // which waits for the pivot's triggers: a deadlock (exp's gradient
    // with its body cut, TDF_DISTRIBUTED_SEED=6 on 2 ranks). There a
    // taker's data must be an input of the predicate itself (fib's n for
    // n <= 1), which is there whenever the predicate is. The (producer,
    // port) pairs feeding each predicate's producer, locally:
    const bool cut = std::any_of(blk.nodes.begin(), blk.nodes.end(),
                                 [&](int32_t id) { return nodes[id].kind == NodeKind::kRecv; });
    base::FlatHashMap<int32_t, std::vector<std::pair<int32_t, int32_t>>> predicate_inputs;
    if (cut) {
      for (const auto& [pred, ids] : by_predicate)
        if (pred.first >= 0) predicate_inputs[pred.first];
      for (int32_t id : blk.nodes)
        for (const OutEdge& e : nodes[id].edges) {
          auto it = predicate_inputs.find(e.dst);
          if (it != predicate_inputs.end() && e.kind == EdgeKind::kLocal && e.src_port >= 0)
            it->second.emplace_back(id, e.src_port);
        }
    }
    auto feeds_predicate = [&](std::pair<int32_t, int32_t> data, std::pair<int32_t, int32_t> pred) {
      if (!cut) return true;
      if (data.first < 0) return false;
      auto it = predicate_inputs.find(pred.first);
      return it != predicate_inputs.end() && std::find(it->second.begin(), it->second.end(), data) != it->second.end();
    };
    for (int32_t sid : blk.nodes) {
      NodeBuild& pivot = nodes[sid];
      auto fed = feeds.find(sid);
      if (!simple(pivot) || fed == feeds.end() || fed->second.edges != 2 || dead_with_.count(sid) > 0) continue;
      const auto pred = source(pivot, 1);
      if (pred.first < 0 || source(pivot, 0) != pred) continue;
      bool controls = true;
      for (const OutEdge& e : pivot.edges) {
        const NodeBuild& d = nodes[e.dst];
        controls &= e.kind == EdgeKind::kLocal && e.src_port >= 0 && d.block == blk.id &&
                    e.dst_slot - d.slot_base >= d.num_data_inputs;
      }
      if (!controls) continue;
      int32_t taker = -1;
      for (int32_t tid : by_predicate[pred]) {
        const NodeBuild& t = nodes[tid];
        // Nor a taker that a dead region skips: the region's frontier,
        // made before this pass, does not hold the edges it would take
        // over, and the pivot (outside every region) must send them
        // whenever its predicate arrives. (A Cond whose data comes through
        // an untaken outer branch: its branches never started, and loops
        // in them never ended.)
        if (tid != sid && simple(t) && t.switch_group == pivot.switch_group && source(t, 1) == pred &&
            source(t, 0) != pred && feeds_predicate(source(t, 0), pred) &&
            !(options_.skip_dead_branches && dead_with_.count(tid) > 0)) {
          taker = tid;
          break;
        }
      }
      if (taker < 0) continue;
      NodeBuild& t = nodes[taker];
      for (OutEdge e : pivot.edges) {
        e.SetFlag(OutEdge::kPivot, true);
        t.edges.push_back(e);
      }
      Info(t).has_pivot_edges = true;
      pivot.edges.clear();
      Info(pivot).forwarded = true;
      // Its predicate no longer reaches it: it never becomes ready.
      EdgeList& from = nodes[pred.first].edges;
      from.erase(std::remove_if(from.begin(), from.end(), [&](const OutEdge& e) { return e.dst == sid; }),
                 from.end());
      if (pivot.switch_group >= 0) {
        --blk.dead_regions[pivot.switch_group].members;
        pivot.switch_group = -1;
      }
    }
  }
}

// A function's result Merge of two kernels that no predicate value lets
// both be live (the branches of one Cond: each is in the other's dead
// region) passes the live one on, once per call. The kernels deliver their
// live value to the caller's Returns themselves and send the Merge only
// dead tokens, which it counts: it fires, dead, only when all its inputs
// are (a dead invocation). fib: one firing fewer per call. When only one
// input is such a kernel (ack's n + 1 against its tail calls), that one
// delivers itself and the Merge fires only when the other input is live.
void Compiler::ForwardExclusiveResultMerges() {
  std::vector<NodeBuild>& nodes = nodes_;
  auto candidate = [&](const NodeBuild& r) {
    return r.kind == NodeKind::kMerge && !Info(r).return_edges_by_label.empty() && r.num_inputs == 2 &&
           !r.has_invariants && exe_->blocks[r.block].kind == ExecBlock::Kind::kFunction;
  };
  // The edges into each candidate from its frame, (producer, edge index)
  // in block and edge order, taken in one pass (a scan of the block per
  // result Merge was quadratic in a body's results). Forwarding one Merge
  // appends Return edges only, so the indices stay valid.
  // Inline for a Merge of two inputs (a Cond's): a vector each was two
  // allocations per result Merge.
  base::FlatHashMap<int32_t, absl::InlinedVector<std::pair<int32_t, int32_t>, 2>> into_candidate;
  for (const ExecBlock& blk : exe_->blocks) {
    if (blk.kind != ExecBlock::Kind::kFunction) continue;
    for (int32_t id : blk.nodes) {
      const EdgeList& edges = nodes[id].edges;
      for (int32_t k = 0; k < static_cast<int32_t>(edges.size()); ++k) {
        const NodeBuild& d = nodes[edges[k].dst];
        if (d.block == blk.id && candidate(d)) into_candidate[d.id].push_back({id, k});
      }
    }
  }
  for (NodeBuild& r : nodes) {
    if (!candidate(r)) continue;
    bool returns_only = true;  // a local consumer would get a dead token from each producer
    for (const OutEdge& e : r.edges) returns_only &= e.kind == EdgeKind::kReturn && e.src_port == 0;
    if (!returns_only) continue;
    // The producer of each input: one edge of a kernel of this frame.
    int32_t producer[2] = {-1, -1}, edge_of[2] = {-1, -1};
    int found = 0;
    bool ok = true;
    for (const auto& [id, k] : into_candidate[r.id]) {
      const int32_t input = nodes[id].edges[k].dst_slot - r.slot_base;
      if (input < 0 || input > 1 || producer[input] >= 0 || id == producer[1 - input]) {
        ok = false;
        continue;
      }
      producer[input] = id;
      edge_of[input] = k;
      ++found;
    }
    if (!ok || found != 2) continue;
    // A producer that is not such a kernel (a Merge of tail calls, a
    // Return) keeps its edge: the Merge passes its live value on as before.
    bool forward[2];
    for (int i = 0; i < 2; ++i) {
      const NodeBuild& p = nodes[producer[i]];
      const OutEdge& into = p.edges[edge_of[i]];
      forward[i] = p.kind == NodeKind::kKernel && !Info(p).folded && Info(p).return_edges_by_label.empty() &&
                   !p.has_invariants && p.block == r.block && into.kind == EdgeKind::kLocal && into.src_port >= 0;
    }
    if (!(forward[0] || forward[1]) || !Exclusive(producer[0], producer[1])) continue;
    for (int i = 0; i < 2; ++i) {
      if (!forward[i]) continue;
      NodeBuild& p = nodes[producer[i]];
      OutEdge& into = p.edges[edge_of[i]];
      into.dst_mode = DstMode::kMergeMark;
      TakeOverEdges(p, r, into.src_port);
      Info(p).returns_only_live = true;
    }
  }
}

// Whether one predicate group's opposite ports make `a` and `b` dead:
// then no frame has both live.
bool Compiler::Exclusive(int32_t a, int32_t b) const {
  auto ia = dead_with_.find(a), ib = dead_with_.find(b);
  if (ia == dead_with_.end() || ib == dead_with_.end()) return false;
  return ExclusiveDeadWith(ia->second, ib->second);
}

// A Return inside a function body only pops the tag: it passes the
// callee's result on, into the frame that holds it. The callee's result
// node delivers to the Return's consumers in that frame itself (its Return
// edges for the label become the Return's out edges), the site's Calls
// drop their control edges to it, and a dead site sends its dead token
// along the Return's edges (FireCall): one firing and one delivery less
// per call (fib 8 -> 7 firings per call). Main-graph Returns still fire:
// a run may fetch them or name them as targets.
void Compiler::ForwardReturns() {
  std::vector<NodeBuild>& nodes = nodes_;
  std::vector<uint8_t> forwardable(nodes.size(), 0);
  for (NodeBuild& r : nodes) {
    if (r.kind != NodeKind::kReturn || exe_->blocks[r.block].kind != ExecBlock::Kind::kFunction ||
        !Info(r).return_edges_by_label.empty() || r.has_invariants || r.edges.empty())
      continue;
    bool local = true;
    for (const OutEdge& e : r.edges) local &= e.kind == EdgeKind::kLocal;
    forwardable[r.id] = local;
  }
  // A Return that a dead region's frontier feeds must fire to pass the
  // dead token on.
  for (const ExecBlock& blk : exe_->blocks)
    for (const DeadRegionGroup& group : blk.dead_regions)
      for (const auto& frontier : group.frontier)
        for (const OutEdge& e : frontier) forwardable[e.dst] = 0;
  // Only the callee's result and the site's Calls may feed it: every
  // result node's edge into it is replaced below (a forwarded result
  // Identity's too: a frontier may still fire it), the Calls' edges dropped.
  for (const NodeBuild& p : nodes)
    for (const OutEdge& e : p.edges)
      if (e.kind != EdgeKind::kReturn && p.kind != NodeKind::kCall) forwardable[e.dst] = 0;
  for (NodeBuild& p : nodes) {
    // The edges first: most nodes have no Return edge, and their NodeInfo
    // (a cache miss per node of a large graph) is not read.
    bool any = false;
    for (const OutEdge& e : p.edges) any |= e.kind == EdgeKind::kReturn && forwardable[e.dst];
    if (!any || Info(p).return_edges_by_label.empty()) continue;
    // Rebuild p's edges, each label's range replaced in place.
    EdgeList edges;
    std::vector<std::pair<int32_t, int32_t>> ranges(Info(p).return_edges_by_label.size(), {0, 0});
    std::vector<int32_t> label_of(p.edges.size(), -1);
    for (size_t label = 0; label < Info(p).return_edges_by_label.size(); ++label)
      for (int32_t k = Info(p).return_edges_by_label[label].first; k < Info(p).return_edges_by_label[label].second; ++k)
        label_of[k] = static_cast<int32_t>(label);
    for (size_t k = 0; k < p.edges.size(); ++k) {
      const OutEdge& e = p.edges[k];
      const int32_t label = label_of[k];
      const int32_t begin = static_cast<int32_t>(edges.size());
      if (label >= 0 && e.kind == EdgeKind::kReturn && forwardable[e.dst]) {
        for (OutEdge f : nodes[e.dst].edges) {
          f.kind = EdgeKind::kReturn;
          f.src_port = e.src_port;
          edges.push_back(f);
        }
        Info(nodes[e.dst]).forwarded = true;
      } else {
        edges.push_back(e);
      }
      if (label < 0) continue;
      auto& range = ranges[label];
      if (range.first == range.second) range.first = begin;
      range.second = static_cast<int32_t>(edges.size());
    }
    p.edges = std::move(edges);
    Info(p).return_edges_by_label = std::move(ranges);
  }
  // The site's Calls no longer signal their forwarded Returns.
  for (NodeBuild& c : nodes) {
    if (c.kind != NodeKind::kCall) continue;
    c.edges.erase(std::remove_if(c.edges.begin(), c.edges.end(),
                                 [&](const OutEdge& e) {
                                   return e.kind == EdgeKind::kLocal && nodes[e.dst].kind == NodeKind::kReturn &&
                                          Info(nodes[e.dst]).forwarded;
                                 }),
                  c.edges.end());
  }
}

}  // namespace runtime
}  // namespace tdf
