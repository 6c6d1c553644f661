// The compiler from a Graph to an ExecutableGraph (executable.h): its
// state while compiling, and its steps, each in a file of its own
// (docs/architecture.md lists them in the order Link runs them). Internal
// to src/runtime: runtime::Compile is the entry point.
#ifndef TDF_SRC_RUNTIME_COMPILER_COMPILER_H_
#define TDF_SRC_RUNTIME_COMPILER_COMPILER_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "graph/frames.h"
#include "runtime/executable.h"
#include "tdf/session.h"

namespace tdf {
namespace runtime {

inline NodeKind KindOf(const NodeDef& def, OpKind op_kind) {
  switch (op_kind) {
    case OpKind::kSwitch: return NodeKind::kSwitch;
    case OpKind::kMerge: return NodeKind::kMerge;
    case OpKind::kEnter: return NodeKind::kEnter;
    case OpKind::kExit: return NodeKind::kExit;
    case OpKind::kNextIteration: return NodeKind::kNextIteration;
    case OpKind::kCall: return NodeKind::kCall;
    case OpKind::kReturn: return NodeKind::kReturn;
    case OpKind::kInvoke: return NodeKind::kInvoke;
    case OpKind::kArg: return NodeKind::kArg;
    case OpKind::kRetval: return NodeKind::kRetval;
    case OpKind::kSend: return NodeKind::kSend;
    case OpKind::kRecv: return NodeKind::kRecv;
    default: break;
  }
  if (def.op == "Placeholder") return NodeKind::kPlaceholder;
  if (def.op == "NoOp") return NodeKind::kNoOutput;
  return NodeKind::kKernel;
}

inline ExecBlock::Kind BlockKind(BlockInfo::Kind k) {
  switch (k) {
    case BlockInfo::Kind::kLoop: return ExecBlock::Kind::kLoop;
    case BlockInfo::Kind::kFunction: return ExecBlock::Kind::kFunction;
    default: return ExecBlock::Kind::kMain;
  }
}

inline size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Room for `more` elements, doubling the capacity when it must grow.
template <typename T>
void GrowFor(std::vector<T>& v, size_t more) {
  if (v.size() + more > v.capacity()) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
}

// A node while compiling: its ExecNode half, and its out edges before they
// move to the edge pool. Its NodeInfo half is built in place in the
// executable (Compiler::Info): a combined record copied out at the end cost
// 320 bytes a node while compiling (chain(10^6): 190 MB more peak memory)
// and the copy.
struct NodeBuild : ExecNode {
  std::vector<OutEdge> edges;
};

class Compiler {
 public:
  Compiler(ExecutableGraph* exe, const SessionOptions& options) : exe_(exe), options_(options) {}

  // A node's NodeInfo half (see NodeBuild).
  NodeInfo& Info(int32_t id) { return exe_->info[id]; }
  const NodeInfo& Info(int32_t id) const { return exe_->info[id]; }
  NodeInfo& Info(const NodeBuild& n) { return exe_->info[n.id]; }
  const NodeInfo& Info(const NodeBuild& n) const { return exe_->info[n.id]; }

  absl::Status AddUnit(const std::vector<NodeDef>& nodes, const std::string& body_name);  // units.cc
  absl::Status Link();  // units.cc
  std::vector<NodeBuild> TakeNodes() { return std::move(nodes_); }
  NodeIndex TakeMainIndex() { return std::move(units_.front().index); }

 private:
  struct Unit {
    std::vector<int32_t> ids;  // by position in the unit's node list
    NodeIndex index;           // inputs by position in the list
  };

  int32_t ChildSlot(int32_t block, const std::string& key, bool is_loop);  // units.cc
  absl::Status LinkUnit(const Unit& unit);  // units.cc
  absl::Status FoldConstants(const Unit& unit);  // fold_constants.cc
  absl::Status FinishUnit(const Unit& unit);  // call_sites.cc
  absl::Status AddRemoteEnd(NodeBuild& n, ExecBlock& blk);  // remote_ends.cc
  absl::Status LinkRemoteLoops();  // remote_ends.cc
  absl::Status CheckCrossing(const NodeBuild& c, const NodeBuild& p, EdgeKind kind, int32_t j);  // units.cc
  void ForwardCallArguments();  // forward_values.cc
  int32_t SoleProducer(int32_t dst, int32_t* edge_index) const;  // forward_values.cc
  void CountLocalEdges();  // forward_values.cc
  void NoteLocalEdge(const NodeBuild& p, const OutEdge& e, int32_t sign);  // forward_values.cc
  void TakeOverEdges(NodeBuild& p, const NodeBuild& r, int16_t port);  // forward_values.cc
  void ForwardResults();  // forward_values.cc
  void ForwardIdentities();  // forward_values.cc
  void ForwardPivotSwitches();  // forward_values.cc
  void ForwardExclusiveResultMerges();  // forward_values.cc
  bool Exclusive(int32_t a, int32_t b) const;  // forward_values.cc
  void ForwardReturns();  // forward_values.cc
  void ForwardTailResults();  // tail_calls.cc
  void MarkTailSites();  // tail_calls.cc
  void CompactSlots();  // slot_layout.cc
  void BuildDeadDataFrontiers();  // dead_branches.cc
  const std::vector<std::pair<int32_t, int64_t>>& ArgMerges(const std::string& fn);  // call_sites.cc
  // The Calls and Returns of call site (block, label, function), each in
  // block order: a Call finds its site's without scanning its block (a main
  // graph of 10^4 sites read every main node's attributes 10^4 times).
  struct SiteNodes {
    std::vector<int32_t> calls, returns;
  };
  const SiteNodes& Site(int32_t block, int32_t label, const std::string& fn);  // call_sites.cc
  void BuildDeadRegions(ExecBlock& blk, bool skip);  // dead_branches.cc
  void Layout(ExecBlock& blk);  // slot_layout.cc
  ExecutableGraph* exe_;
  const SessionOptions& options_;
  std::vector<NodeBuild> nodes_;  // by global id
  // Node id -> the (block, predicate group, Switch port) whose dead port
  // makes the node dead (BuildDeadRegions).
  struct DeadWith {
    int32_t block, group, port;
  };
  absl::flat_hash_map<int32_t, std::vector<DeadWith>> dead_with_;
  // Switch id -> its predicate group in its block (BuildDeadRegions).
  absl::flat_hash_map<int32_t, int32_t> predicate_group_of_;
  int64_t num_call_return_nodes_ = 0;
  std::vector<Unit> units_;
  absl::flat_hash_map<std::string, int32_t> op_ids_;
  std::map<std::string, int32_t> function_blocks_;
  std::map<std::string, int32_t> invoke_sites_;
  std::map<int32_t, std::map<std::string, int32_t>> child_slots_;
  std::map<std::string, std::vector<std::pair<int32_t, int64_t>>> arg_merges_;
  bool arg_merges_built_ = false;
  absl::flat_hash_map<std::tuple<int32_t, int32_t, std::string>, SiteNodes> sites_;
  bool sites_built_ = false;
  std::vector<int32_t> call_read_by_;  // Call id -> the last Merge that read it (CheckCrossing)
  std::vector<int32_t> local_in_count_;  // CountLocalEdges
  std::vector<int64_t> local_in_sum_;
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_COMPILER_COMPILER_H_
