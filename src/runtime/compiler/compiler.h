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
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/hash_tables.h"
#include "graph/frames.h"
#include "graph/op_schema_cache.h"
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

// A Call's, Return's or Invoke's callee, not copied ("" when the attribute
// is missing or not a string: validation reports that).
inline absl::string_view CalleeOf(const NodeDef& def) {
  const AttrValue* v = def.FindAttr("function");
  const std::string* name = v != nullptr ? v->get_if<std::string>() : nullptr;
  return name != nullptr ? absl::string_view(*name) : absl::string_view();
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
// Out edges while compiling. One inline: most nodes have one consumer, and
// a vector per node was an allocation per node (and its free once the
// edges moved to the pool).
using EdgeList = absl::InlinedVector<OutEdge, 1>;
struct NodeBuild : ExecNode {
  EdgeList edges;
};

class Compiler {
 public:
  Compiler(ExecutableGraph* exe, const SessionOptions& options) : exe_(exe), options_(options) {}

  // A node's NodeInfo half (see NodeBuild).
  NodeInfo& Info(int32_t id) { return exe_->info[id]; }
  const NodeInfo& Info(int32_t id) const { return exe_->info[id]; }
  NodeInfo& Info(const NodeBuild& n) { return exe_->info[n.id]; }
  const NodeInfo& Info(const NodeBuild& n) const { return exe_->info[n.id]; }

  // `index`: of `nodes`, when its maker has it (taken); else built here.
  absl::Status AddUnit(const std::vector<NodeDef>& nodes, const std::string& body_name,
                       NodeIndex* index = nullptr);  // units.cc
  absl::Status Link();  // units.cc
  std::vector<NodeBuild> TakeNodes() { return std::move(nodes_); }
  // Whether some node added names a device or is a CopyToDevice (most
  // graphs: none, and Compile's scan of every NodeDef is skipped).
  bool may_name_devices() const { return may_name_devices_; }
  NodeIndex TakeMainIndex() { return std::move(units_.front().index); }

 private:
  struct Unit {
    std::vector<int32_t> ids;  // by position in the unit's node list
    NodeIndex index;           // inputs by position in the list
  };

  // The child slot of `block` for a loop (a: the loop's block), a call
  // site (a: the callee's block, b: the label) or an Invoke (a: its id).
  enum class ChildKind : int32_t { kLoop, kCall, kInvoke };
  int32_t ChildSlot(int32_t block, ChildKind kind, int32_t a, int32_t b);  // units.cc
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
  const std::vector<std::pair<int32_t, int64_t>>& ArgMerges(absl::string_view fn);  // call_sites.cc
  // The attributes of Calls and Returns that the linking steps read, read
  // once per node, by AddUnit (which has just read the node's attributes
  // for its types): looked up in each node's attribute tree by every step,
  // they were scattered reads of the whole graph's NodeDefs, most of them
  // cache misses (10^5 functions: 4% of Create in FindAttr).
  struct CallAttrs {
    absl::string_view callee;   // CalleeOf
    int32_t callee_block = -1;  // the callee's function block; -1: none; kUnresolved: not known yet
    int64_t index = -1;         // a Call's arg_index, a Return's result_index (GetIntOr(..., -1))
    int64_t call_site = -1;     // valid if has_call_site (else GetInt("call_site") gives the error)
    bool has_call_site = false;
  };
  static constexpr int32_t kUnresolved = -2;
  void NoteCallAttrs(const NodeBuild& n, const NodeDef& def);  // units.cc; AddUnit, per node
  void ResolveCallees();  // units.cc; Link: the callees of units added before theirs
  const CallAttrs* CallAttrsOf(int32_t id) const {
    const int32_t k = id < static_cast<int32_t>(call_attrs_of_.size()) ? call_attrs_of_[id] : -1;
    return k >= 0 ? &call_attrs_[k] : nullptr;
  }
  // As CalleeOf(def), a function block lookup, GetIntOr("arg_index", -1)
  // and GetIntOr("result_index", -1), from the index where it has the node.
  absl::string_view Callee(int32_t id) const {
    const CallAttrs* a = CallAttrsOf(id);
    return a != nullptr ? a->callee : CalleeOf(*Info(id).def);
  }
  int32_t CalleeBlock(int32_t id) const;  // units.cc
  int64_t ArgIndex(int32_t id) const {
    const CallAttrs* a = CallAttrsOf(id);
    return a != nullptr && nodes_[id].kind == NodeKind::kCall ? a->index : Info(id).def->GetIntOr("arg_index", -1);
  }
  int64_t ResultIndex(int32_t id) const {
    const CallAttrs* a = CallAttrsOf(id);
    return a != nullptr && nodes_[id].kind == NodeKind::kReturn ? a->index
                                                                : Info(id).def->GetIntOr("result_index", -1);
  }
  bool may_name_devices_ = false;
  bool any_invariant_input_ = false;  // some node's NodeLists::invariant_input is set (LinkUnit)
  std::vector<int32_t> call_attrs_of_;  // by node id: its entry in call_attrs_, or -1
  std::vector<CallAttrs> call_attrs_;
  // The Calls and Returns of call site (block, label, function), each in
  // block order: a Call finds its site's without scanning its block (a main
  // graph of 10^4 sites read every main node's attributes 10^4 times).
  struct SiteNodes {
    // Inline for a site of up to two arguments and results: two vectors
    // per site were two allocations per call site.
    absl::InlinedVector<int32_t, 2> calls, returns;
  };
  const SiteNodes& Site(int32_t block, int32_t label, absl::string_view fn);  // call_sites.cc
  // A function block's local graph as BuildDeadRegions reads it (by block
  // index): local inputs and consumers, call sites, predicate groups.
  struct RegionInputs {
    struct In {
      int32_t src;    // block index
      int16_t port;   // -1: control
      int32_t input;  // input index at the destination
    };
    // Node v's local inputs and consumers (in edge order), packed: two
    // lists per node cost two allocations each, most of the step's time
    // for bodies of one Cond.
    absl::Span<const In> ins(int32_t v) const {
      return absl::MakeConstSpan(in_list.data() + in_begin[v], in_begin[v + 1] - in_begin[v]);
    }
    absl::Span<const int32_t> outs(int32_t v) const {
      return absl::MakeConstSpan(out_list.data() + out_begin[v], out_begin[v + 1] - out_begin[v]);
    }
    std::vector<int32_t> in_begin, out_begin;  // per node, and one past the last
    std::vector<In> in_list;
    std::vector<int32_t> out_list;
    std::vector<uint8_t> eligible;  // may be in a region at all
    std::map<int32_t, std::vector<int32_t>> site_of_return;  // Return -> its site's Calls
    std::vector<std::vector<int32_t>> returns_of_call;       // the inverse
    std::vector<std::vector<int32_t>> groups;  // Switches by predicate producer, in (producer, port) order
    std::vector<int32_t> member_of;            // Switch -> its group, or -1
  };
  void BuildDeadRegions(ExecBlock& blk, bool skip);  // dead_branches.cc
  // BuildDeadRegions' and BuildRegionsOneByOne's buffers, kept across the
  // function blocks of one Compile: built afresh, they were dozens of
  // allocations per body (10^4 bodies of one Cond: most of the step).
  struct OneByOneRegion {
    int32_t group;
    int32_t port;
    std::vector<int32_t> in;  // block indices, ascending
  };
  struct RegionScratch {
    RegionInputs inputs;
    std::vector<int32_t> in_fill;
    std::vector<OneByOneRegion> regions;  // regions[2 * g + port]; only the first 2 * groups are live
    std::vector<uint8_t> enabled;
    std::vector<int32_t> mark, work, regions_begin, regions_list, fill, inside_stamp, inside, touch_stamp,
        touched_groups, sources;
  };
  RegionScratch region_scratch_;
  void BuildRegionsOneByOne(ExecBlock& blk, const RegionInputs& in, int32_t base, bool skip);  // dead_branches.cc
  bool BuildNestedRegions(ExecBlock& blk, const RegionInputs& in, int32_t base, bool skip);  // nested_regions.cc
  // Makes the group of Switches `members` (block indices) jump over its
  // regions, whose frontiers are given: the last step of both ways of
  // building them (dead_branches.cc).
  void InstallDeadRegionGroup(ExecBlock& blk, const std::vector<int32_t>& members, std::vector<OutEdge> frontier[2]);
  void Layout(ExecBlock& blk);  // slot_layout.cc
  ExecutableGraph* exe_;
  const SessionOptions& options_;
  std::vector<NodeBuild> nodes_;  // by global id
  // A region: what the dead port `port` of predicate group `group` of
  // `block` makes dead. A region nested in another (every member of its
  // group is in the other: a Cond in a branch of another) has that one as
  // its parent (BuildNestedRegions): whatever is in a region is in its
  // ancestors too. `jump`: an ancestor, for finding ancestors in
  // logarithmic steps (Myers' jump pointers); roots jump to themselves.
  struct RegionNode {
    int32_t block, group, port;
    int32_t parent = -1, jump = -1, depth = 0;
  };
  std::vector<RegionNode> regions_;
  std::vector<int32_t> region_base_;  // function block -> region id of its group 0, port 0
  int32_t RegionId(int32_t block, int32_t group, int32_t port) const {
    return region_base_[block] + 2 * group + port;
  }
  // The region tree (nested_regions.cc): a region's ancestor at a depth;
  // whether `outer` is `region` or one of its ancestors; the deepest
  // region that is or is an ancestor of both, or -1.
  void SetRegionParent(int32_t region, int32_t parent);
  int32_t RegionAncestorAt(int32_t region, int32_t depth) const;
  bool RegionWithin(int32_t outer, int32_t region) const;
  int32_t CommonRegion(int32_t a, int32_t b) const;
  // Node id -> the regions that hold it (BuildDeadRegions), each standing
  // for itself and its ancestors: the node is dead whenever one of those
  // regions' ports is.
  struct DeadWith {
    int32_t block, group, port;
    int32_t region;  // regions_ index
  };
  // Inline: most nodes are in one region (a vector each was an allocation
  // per node of a Cond's branches).
  base::FlatHashMap<int32_t, absl::InlinedVector<DeadWith, 1>> dead_with_;
  // Whether no frame has both a node dead with `a` and one dead with `b`
  // live: some group's opposite ports make them dead (nested_regions.cc).
  bool ExclusiveDeadWith(absl::Span<const DeadWith> a, absl::Span<const DeadWith> b) const;
  // Switch id -> its predicate group in its block (BuildDeadRegions).
  base::FlatHashMap<int32_t, int32_t> predicate_group_of_;
  int64_t num_call_return_nodes_ = 0;
  std::vector<Unit> units_;
  // Per op: its schema, id in exe_->op_names and node kind, found with
  // one lookup per node (a recent op's without hashing). Keys view the graph's
  // NodeDefs, which exe_ owns.
  struct OpEntry {
    const OpSchema* schema = nullptr;
    int32_t op_id = -1;
    NodeKind kind = NodeKind::kKernel;
  };
  const OpEntry* FindOp(const NodeDef& def);  // units.cc; null: unknown op
  base::FlatHashMap<absl::string_view, OpEntry> ops_;
  // The first few ops met, by value (ops_ moves its entries when it
  // grows), found by comparing names: a graph uses a handful of ops, and
  // hashing the name per node cost more than comparing it with a few.
  struct RecentOp {
    absl::string_view name;
    OpEntry entry;
  };
  static constexpr int kRecentOps = 8;
  RecentOp recent_ops_[kRecentOps];
  int num_recent_ops_ = 0;
  OpSchemaCache op_schemas_;
  // Hashed, found by string_view: a static graph has a function block per
  // function, looked up on every Call's and Return's edges.
  base::FlatHashMap<std::string, int32_t> function_blocks_;
  std::map<std::string, int32_t> invoke_sites_;
  // (block, kind, a, b) as ChildSlot takes them: ints, not a string built per Call.
  base::FlatHashMap<std::tuple<int32_t, int32_t, int32_t, int32_t>, int32_t> child_slots_;
  // Keyed by the callee's name as the nodes' attributes hold it (views: a
  // string built per Call and per lookup was an allocation each).
  base::FlatHashMap<absl::string_view, std::vector<std::pair<int32_t, int64_t>>> arg_merges_;
  bool arg_merges_built_ = false;
  base::FlatHashMap<std::tuple<int32_t, int32_t, absl::string_view>, SiteNodes> sites_;
  bool sites_built_ = false;
  std::vector<int32_t> call_read_by_;  // Call id -> the last Merge that read it (CheckCrossing)
  std::vector<int32_t> local_in_count_;  // CountLocalEdges
  std::vector<int64_t> local_in_sum_;
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_COMPILER_COMPILER_H_
