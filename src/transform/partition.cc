// The partition pass (tdf/partition.h; the argument behind its replicas is
// in docs/distributed.md).
#include "tdf/partition.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/hash_tables.h"
#include "graph/frames.h"
#include "graph/node_index.h"
#include "tdf/op_registry.h"
#include "tdf/status.h"
#include "tdf/transform.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

bool IsStateOp(const std::string& op) {
  return op == "Read" || op == "Assign" || op == "AssignAdd" || op == "AssignSub" || op == "ScatterAdd";
}

// Out-edges by producer: (consumer, is_control), in consumer order.
std::vector<std::vector<std::pair<int, bool>>> Consumers(const NodeIndex& index) {
  std::vector<std::vector<std::pair<int, bool>>> out(index.size());
  for (size_t i = 0; i < index.size(); ++i)
    for (const ResolvedInput& in : index.inputs(i)) out[in.src].push_back({static_cast<int>(i), in.is_control});
  return out;
}

absl::StatusOr<std::vector<int>> AssignRanksIndexed(const std::vector<NodeDef>& nodes, const NodeIndex& index,
                                                    int num_ranks) {
  if (num_ranks < 1) return absl::InvalidArgumentError(absl::StrCat("num_ranks must be >= 1, is ", num_ranks));
  std::vector<int> rank(nodes.size(), DeviceName::kAnyRank);
  for (size_t i = 0; i < nodes.size(); ++i) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(nodes[i].device);
    if (!d.ok()) return NodeError(nodes[i], absl::StatusCode::kInvalidArgument, d.status().message());
    if (d->rank >= num_ranks)
      return NodeError(nodes[i], absl::StatusCode::kInvalidArgument,
                       absl::StrCat("placed on rank ", d->rank, " ('", nodes[i].device, "') but the run has ",
                                    num_ranks, num_ranks == 1 ? " rank" : " ranks"));
    rank[i] = d->rank;
  }
  const auto consumers = Consumers(index);
  auto first_placed_consumer = [&](size_t i) {
    for (const auto& [consumer, is_control] : consumers[i])
      if (rank[consumer] != DeviceName::kAnyRank) return rank[consumer];
    return static_cast<int>(DeviceName::kAnyRank);
  };
  // Sources (Const, Placeholder, Variable) go where they are used, so that a
  // constant is never shipped; then everything else unplaced to rank 0;
  // then the sources whose consumers were unplaced; last, state ops, with
  // their variable.
  for (size_t i = 0; i < nodes.size(); ++i)
    if (rank[i] == DeviceName::kAnyRank && nodes[i].input.empty()) rank[i] = first_placed_consumer(i);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (rank[i] == DeviceName::kAnyRank && !nodes[i].input.empty() && !IsStateOp(nodes[i].op)) rank[i] = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (rank[i] != DeviceName::kAnyRank || !nodes[i].input.empty()) continue;
    rank[i] = std::max(0, first_placed_consumer(i));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (rank[i] != DeviceName::kAnyRank) continue;
    const absl::Span<const ResolvedInput> in = index.inputs(i);
    rank[i] = !in.empty() && rank[in[0].src] != DeviceName::kAnyRank ? rank[in[0].src] : 0;
  }
  return rank;
}

// How a node is present on a rank.
enum class Presence : uint8_t {
  kAbsent,
  kOriginal,        // the node's own rank
  kReplica,         // a copy with all its inputs
  kControlReplica,  // a Call copy that only announces the original's firing
};

struct Cut {
  int producer;
  int port;  // -1: a control edge
  int dst_rank;
  int block;  // the code block the token lives in on both ranks
  std::string send_name;
  std::string recv_name;
  int64_t key = 0;
};

struct CallSite {
  int block;                  // where its Calls fire
  std::string function;
  std::vector<int> calls;     // node indices
};

class Partitioner {
 public:
  Partitioner(const Graph& graph, int num_ranks) : graph_(graph), nodes_(graph.node), num_ranks_(num_ranks) {}

  absl::StatusOr<PartitionedGraph> Run() {
    if (!graph_.library.empty())
      return absl::FailedPreconditionError(
          "partition: the graph has a function library; transform it first (StaticizeRecursion, `tdf transform`)");
    for (const NodeDef& n : nodes_)
      if (n.op == "Invoke")
        return NodeError(n, absl::StatusCode::kFailedPrecondition,
                         "partition needs a transformed graph (StaticizeRecursion) without Invoke nodes");
    TDF_ASSIGN_OR_RETURN(index_, NodeIndex::Build(nodes_));
    TDF_ASSIGN_OR_RETURN(rank_, AssignRanksIndexed(nodes_, index_, num_ranks_));
    TDF_ASSIGN_OR_RETURN(frames_, InferFrames(nodes_, index_, ""));
    TDF_ASSIGN_OR_RETURN(types_, InferOutputTypes(nodes_, nullptr, graph_.library));
    TDF_RETURN_IF_ERROR(CheckVariables());
    CollectStructure();

    present_.assign(num_ranks_, std::vector<Presence>(nodes_.size(), Presence::kAbsent));
    inputs_.assign(num_ranks_, std::vector<std::vector<std::string>>(nodes_.size()));
    for (const NodeDef& n : nodes_) taken_.insert(n.name);
    for (size_t i = 0; i < nodes_.size(); ++i) Place(rank_[i], static_cast<int>(i), Presence::kOriginal);
    DrainWork();
    // Replicas of LoopConds and Calls may make ranks take part in more
    // blocks (their inputs' Recvs); repeat until the set is closed.
    for (;;) {
      TDF_ASSIGN_OR_RETURN(bool added, AddControlReplicas());
      if (!added) break;
      DrainWork();
    }
    return Emit();
  }

 private:
  absl::Status CheckVariables() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const ResolvedInput& in : index_.inputs(i)) {
        if (in.is_control || nodes_[in.src].op != "Variable" || rank_[in.src] == rank_[i]) continue;
        return NodeError(nodes_[i], absl::StatusCode::kInvalidArgument,
                         absl::StrCat("on rank ", rank_[i], " uses variable '", nodes_[in.src].name, "' on rank ",
                                      rank_[in.src], ": ", IsStateOp(nodes_[i].op) ? "state ops run" : "handles stay",
                                      " where their variable lives (place both on one rank)"));
      }
    }
    return absl::OkStatus();
  }

  void CollectStructure() {
    std::map<std::pair<std::string, int64_t>, int> site_index;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      const int block = frames_.block_of_node[i];
      if (n.op == "LoopCond") loop_conds_[block].push_back(static_cast<int>(i));
      if (n.op != "Call") continue;
      const std::string function = n.GetString("function").value_or("");
      const int64_t site = n.GetIntOr("call_site", -1);
      auto [it, inserted] = site_index.try_emplace({function, site}, static_cast<int>(sites_.size()));
      if (inserted) sites_.push_back(CallSite{block, function, {}});
      sites_[it->second].calls.push_back(static_cast<int>(i));
    }
    FindSiteParts(site_index);
    for (size_t b = 0; b < frames_.blocks.size(); ++b) {
      const BlockInfo& info = frames_.blocks[b];
      if (info.kind == BlockInfo::Kind::kFunction) function_block_[info.name] = static_cast<int>(b);
      if (info.kind == BlockInfo::Kind::kLoop) loop_block_[{info.parent, info.name}] = static_cast<int>(b);
    }
    // Rank-independent labels: call sites in (function, site) order, then
    // loops in block order.
    int64_t id = 0;
    for (const auto& [key, site] : site_index) site_id_[key] = id++;
    for (size_t b = 0; b < frames_.blocks.size(); ++b)
      if (frames_.blocks[b].kind == BlockInfo::Kind::kLoop) loop_id_[static_cast<int>(b)] = id++;
  }

  // A split site's parts: the Calls that control a common Return (as the
  // compiler finds them, runtime/compiler/call_sites.cc). A rank may hold
  // none of a part's Returns, so every Call of a split site is told its
  // part (kSitePartAttr): the first of the part's Calls in site order.
  void FindSiteParts(const std::map<std::pair<std::string, int64_t>, int>& site_index) {
    std::vector<std::vector<int>> part(sites_.size());  // [site][position]: the part's first position
    for (size_t k = 0; k < sites_.size(); ++k) {
      part[k].resize(sites_[k].calls.size());
      for (size_t p = 0; p < part[k].size(); ++p) part[k][p] = static_cast<int>(p);
    }
    auto root = [&](std::vector<int>& parts, int p) {
      while (parts[p] != p) p = parts[p] = parts[parts[p]];
      return p;
    };
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      if (n.op != "Return") continue;
      auto site = site_index.find({n.GetString("function").value_or(""), n.GetIntOr("call_site", -1)});
      if (site == site_index.end()) continue;
      const std::vector<int>& calls = sites_[site->second].calls;
      std::vector<int>& parts = part[site->second];
      int first = -1;
      for (const ResolvedInput& in : index_.inputs(i)) {
        if (!in.is_control) continue;
        auto c = std::find(calls.begin(), calls.end(), in.src);
        if (c == calls.end()) continue;
        const int p = root(parts, static_cast<int>(c - calls.begin()));
        if (first < 0) {
          first = p;
        } else if (p != first) {
          parts[std::max(p, first)] = std::min(p, first);
          first = std::min(p, first);
        }
      }
    }
    for (size_t k = 0; k < sites_.size(); ++k) {
      std::vector<int>& parts = part[k];
      bool split = false;
      for (size_t p = 0; p < parts.size(); ++p) split |= root(parts, static_cast<int>(p)) != root(parts, 0);
      if (!split) continue;
      for (size_t p = 0; p < parts.size(); ++p) site_part_[sites_[k].calls[p]] = root(parts, static_cast<int>(p));
    }
  }

  // Makes node i present on rank r (or upgrades a control replica) and
  // queues its inputs.
  void Place(int r, int i, Presence presence) {
    present_[r][i] = presence;
    work_.push_back({r, i});
  }

  void DrainWork() {
    while (!work_.empty()) {
      const auto [r, i] = work_.back();
      work_.pop_back();
      std::vector<std::string> inputs;
      if (present_[r][i] == Presence::kControlReplica) {
        inputs.push_back(absl::StrCat("^", CutFor(i, -1, r)));
      } else {
        for (const ResolvedInput& in : index_.inputs(i)) inputs.push_back(Resolve(r, in));
      }
      inputs_[r][i] = std::move(inputs);
    }
  }

  // Enter and NextIteration change the tag of everything they emit, a Call
  // the tag of its value: their consumers on other ranks get replicas.
  bool ChangesTag(int producer, bool is_control) const {
    const std::string& op = nodes_[producer].op;
    return op == "Enter" || op == "NextIteration" || (op == "Call" && !is_control);
  }

  // The input string that node (on rank r) uses for `in`.
  std::string Resolve(int r, const ResolvedInput& in) {
    const int p = in.src;
    const Presence here = present_[r][p];
    const bool usable = here == Presence::kOriginal || here == Presence::kReplica ||
                        (here == Presence::kControlReplica && in.is_control);
    if (!usable && ChangesTag(p, in.is_control)) Place(r, p, Presence::kReplica);
    if (usable || ChangesTag(p, in.is_control)) {
      if (in.is_control) return absl::StrCat("^", nodes_[p].name);
      return in.port == 0 ? nodes_[p].name : absl::StrCat(nodes_[p].name, ":", in.port);
    }
    const std::string recv = CutFor(p, in.is_control ? -1 : in.port, r);
    return in.is_control ? absl::StrCat("^", recv) : recv;
  }

  std::string UniqueName(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.contains(name); ++k) name = absl::StrCat(base, "_", k);
    taken_.insert(name);
    return name;
  }

  // The Recv (on rank r) of producer p's output `port` (-1: its firing).
  std::string CutFor(int p, int port, int r) {
    auto [it, inserted] = cut_index_.try_emplace(std::make_tuple(p, port, r), static_cast<int>(cuts_.size()));
    if (!inserted) return cuts_[it->second].recv_name;
    Cut cut;
    cut.producer = p;
    cut.port = port;
    cut.dst_rank = r;
    // An Exit's token lives in the loop's parent; every other producer cut
    // here (never an Enter, NextIteration or a Call's value) keeps its tag.
    const int block = frames_.block_of_node[p];
    cut.block = nodes_[p].op == "Exit" ? frames_.blocks[block].parent : block;
    const std::string base = absl::StrCat(nodes_[p].name, port < 0 ? "/ctl" : port > 0 ? absl::StrCat("/out", port) : "");
    cut.send_name = UniqueName(absl::StrCat(base, "/send_to_", r));
    cut.recv_name = UniqueName(absl::StrCat(base, "/recv_on_", r));
    cuts_.push_back(std::move(cut));
    return cuts_.back().recv_name;
  }

  // Ranks that take part in each block: hold a node or a Recv of it, or of a
  // block inside it (a loop's parent; a function's callers' blocks).
  std::vector<std::vector<bool>> Participants() const {
    std::vector<std::vector<bool>> in(frames_.blocks.size(), std::vector<bool>(num_ranks_, false));
    for (int r = 0; r < num_ranks_; ++r)
      for (size_t i = 0; i < nodes_.size(); ++i)
        if (present_[r][i] != Presence::kAbsent) in[frames_.block_of_node[i]][r] = true;
    for (const Cut& c : cuts_) in[c.block][c.dst_rank] = true;
    for (bool changed = true; changed;) {
      changed = false;
      auto merge = [&](int from, int into) {
        for (int r = 0; r < num_ranks_; ++r) {
          if (in[from][r] && !in[into][r]) {
            in[into][r] = true;
            changed = true;
          }
        }
      };
      for (size_t b = 0; b < frames_.blocks.size(); ++b)
        if (frames_.blocks[b].kind == BlockInfo::Kind::kLoop) merge(static_cast<int>(b), frames_.blocks[b].parent);
      for (const CallSite& site : sites_) {
        auto f = function_block_.find(site.function);
        if (f != function_block_.end()) merge(f->second, site.block);
      }
    }
    return in;
  }

  // LoopCond replicas for every rank in a loop, Call replicas for every rank
  // in a function. Returns whether anything was added.
  absl::StatusOr<bool> AddControlReplicas() {
    const std::vector<std::vector<bool>> in = Participants();
    bool added = false;
    for (size_t b = 0; b < frames_.blocks.size(); ++b) {
      if (frames_.blocks[b].kind != BlockInfo::Kind::kLoop) continue;
      auto conds = loop_conds_.find(static_cast<int>(b));
      for (int r = 0; r < num_ranks_; ++r) {
        if (!in[b][r]) continue;
        if (conds == loop_conds_.end()) {
          if (std::count(in[b].begin(), in[b].end(), true) < 2) break;
          return absl::UnimplementedError(absl::StrCat(
              "partition: ", DescribeBlock(frames_, static_cast<int>(b)),
              " spans several ranks but has no LoopCond node, whose value would tell every rank when the loop ends"));
        }
        for (int c : conds->second) {
          if (present_[r][c] != Presence::kAbsent) continue;
          Place(r, c, Presence::kReplica);
          added = true;
        }
      }
    }
    for (const CallSite& site : sites_) {
      auto f = function_block_.find(site.function);
      if (f == function_block_.end()) continue;
      for (int r = 0; r < num_ranks_; ++r) {
        if (!in[f->second][r]) continue;
        for (int c : site.calls) {
          if (present_[r][c] != Presence::kAbsent) continue;
          Place(r, c, Presence::kControlReplica);
          added = true;
        }
      }
    }
    return added;
  }

  // `_function` and `_loop_frames` for a Recv that fires in `block`.
  void SetBlockAttrs(int block, NodeDef& recv) const {
    std::vector<std::string> loops;
    while (block >= 0 && frames_.blocks[block].kind == BlockInfo::Kind::kLoop) {
      loops.push_back(frames_.blocks[block].name);
      block = frames_.blocks[block].parent;
    }
    if (block >= 0 && frames_.blocks[block].kind == BlockInfo::Kind::kFunction)
      recv.attr[std::string(kFunctionAttr)] = frames_.blocks[block].name;
    if (!loops.empty()) {
      std::reverse(loops.begin(), loops.end());
      recv.attr[kLoopFramesAttr] = loops;
    }
  }

  void StampFrameId(int i, NodeDef& n) const {
    const int block = frames_.block_of_node[i];
    int64_t id = -1;
    if (n.op == "Call" || n.op == "Return") {
      auto it = site_id_.find({n.GetString("function").value_or(""), n.GetIntOr("call_site", -1)});
      if (it != site_id_.end()) id = it->second;
    } else if (n.op == "Enter") {
      auto loop = loop_block_.find({block, n.GetString("frame_name").value_or("")});
      if (loop != loop_block_.end()) id = loop_id_.at(loop->second);
    } else if (n.op == "Exit" || n.op == "NextIteration" || n.op == "LoopCond") {
      auto it = loop_id_.find(block);
      if (it != loop_id_.end()) id = it->second;
    }
    if (id >= 0) n.attr[kFrameIdAttr] = id;
    if (auto part = site_part_.find(i); part != site_part_.end()) n.attr[kSitePartAttr] = int64_t{part->second};
  }

  static std::string OnRank(const std::string& device, int r) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(device);  // parsed before: valid
    DeviceName out = d.ok() ? *d : DeviceName{};
    out.rank = r;
    return out.ToString();
  }

  absl::StatusOr<PartitionedGraph> Emit() {
    PartitionedGraph out;
    out.rank_of_node = rank_;
    // Keys in a deterministic order: by producer, port, destination.
    std::vector<int> order(cuts_.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return std::make_tuple(cuts_[a].producer, cuts_[a].port, cuts_[a].dst_rank) <
             std::make_tuple(cuts_[b].producer, cuts_[b].port, cuts_[b].dst_rank);
    });
    for (size_t k = 0; k < order.size(); ++k) cuts_[order[k]].key = static_cast<int64_t>(k);

    out.partitions.resize(num_ranks_);
    for (int r = 0; r < num_ranks_; ++r) {
      std::vector<NodeDef>& nodes = out.partitions[r].node;
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (present_[r][i] == Presence::kAbsent) continue;
        NodeDef n = nodes_[i];
        n.input = inputs_[r][i];
        n.device = OnRank(n.device, r);
        if (present_[r][i] != Presence::kOriginal) {
          n.attr[kReplicaAttr] = true;
          ++out.num_replicas;
        }
        StampFrameId(static_cast<int>(i), n);
        nodes.push_back(std::move(n));
      }
    }
    out.pairs.resize(cuts_.size());
    for (int k : order) {
      const Cut& c = cuts_[k];
      const NodeDef& producer = nodes_[c.producer];
      const int src_rank = rank_[c.producer];
      SendRecvPair& pair = out.pairs[c.key];
      pair.key = c.key;
      pair.send_rank = src_rank;
      pair.recv_rank = c.dst_rank;
      pair.send_node = c.send_name;
      pair.recv_node = c.recv_name;
      pair.control = c.port < 0;
      pair.tensor_name = pair.control ? absl::StrCat("^", producer.name)
                         : c.port == 0 ? producer.name
                                       : absl::StrCat(producer.name, ":", c.port);
      if (!pair.control) pair.dtype = types_[c.producer][c.port];

      NodeDef send;
      send.name = c.send_name;
      send.op = "Send";
      send.input.push_back(pair.control ? absl::StrCat("^", producer.name) : pair.tensor_name);
      NodeDef recv;
      recv.name = c.recv_name;
      recv.op = "Recv";
      for (NodeDef* end : {&send, &recv}) {
        end->attr["key"] = c.key;
        end->attr["send_rank"] = src_rank;
        end->attr["recv_rank"] = c.dst_rank;
        end->attr["tensor_name"] = pair.tensor_name;
        if (pair.control) {
          end->attr["control"] = true;
        } else {
          end->attr["T"] = pair.dtype;
        }
      }
      send.device = OnRank("", src_rank);
      recv.device = OnRank("", c.dst_rank);
      SetBlockAttrs(c.block, recv);
      out.partitions[src_rank].node.push_back(std::move(send));
      out.partitions[c.dst_rank].node.push_back(std::move(recv));
    }
    return out;
  }

  const Graph& graph_;
  const std::vector<NodeDef>& nodes_;
  const int num_ranks_;
  NodeIndex index_;
  FrameInfo frames_;
  std::vector<int> rank_;
  std::vector<std::vector<DType>> types_;
  std::map<int, std::vector<int>> loop_conds_;  // loop block -> its LoopCond nodes
  std::vector<CallSite> sites_;
  std::map<std::string, int> function_block_;
  std::map<std::pair<int, std::string>, int> loop_block_;  // (parent, frame) -> block
  std::map<std::pair<std::string, int64_t>, int64_t> site_id_;
  std::map<int, int64_t> loop_id_;  // loop block -> id
  std::map<int, int> site_part_;    // Call of a split site -> its part (kSitePartAttr)

  std::vector<std::vector<Presence>> present_;                 // [rank][node]
  std::vector<std::vector<std::vector<std::string>>> inputs_;  // [rank][node]: rewritten inputs
  std::vector<std::pair<int, int>> work_;                      // (rank, node) to resolve
  std::vector<Cut> cuts_;
  std::map<std::tuple<int, int, int>, int> cut_index_;  // (producer, port, dst rank) -> cuts_
  base::FlatHashSet<std::string> taken_;
};

}  // namespace

absl::StatusOr<std::vector<int>> AssignRanks(const Graph& graph, int num_ranks) {
  TDF_ASSIGN_OR_RETURN(NodeIndex index, NodeIndex::Build(graph.node));
  return AssignRanksIndexed(graph.node, index, num_ranks);
}

absl::StatusOr<PartitionedGraph> PartitionGraph(const Graph& graph, const PartitionOptions& options) {
  if (options.num_ranks < 1)
    return absl::InvalidArgumentError(absl::StrCat("partition: num_ranks must be >= 1, is ", options.num_ranks));
  return Partitioner(graph, options.num_ranks).Run();
}

}  // namespace tdf
