#include "graph/frames.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/hash_tables.h"
#include "graph/node_index.h"
#include "tdf/status.h"

namespace tdf {
namespace {

struct OutEdge {
  int dst;
  bool is_control;
};

// The ops that place their consumers in another frame, told apart once per
// node: compared as strings on every edge, they were a tenth of frame
// inference on a 10^6-node graph.
enum class FrameRole : uint8_t { kPlain, kEnter, kExit, kNextIteration, kCall, kReturn };

FrameRole RoleOf(absl::string_view op) {  // string_view: compared inline, not by compare()
  switch (op.size()) {
    case 4:
      return op == "Exit" ? FrameRole::kExit : op == "Call" ? FrameRole::kCall : FrameRole::kPlain;
    case 5:
      return op == "Enter" ? FrameRole::kEnter : FrameRole::kPlain;
    case 6:
      return op == "Return" ? FrameRole::kReturn : FrameRole::kPlain;
    case 13:
      return op == "NextIteration" ? FrameRole::kNextIteration : FrameRole::kPlain;
    default:
      return FrameRole::kPlain;
  }
}

class FrameInference {
 public:
  FrameInference(const std::vector<NodeDef>& nodes, const NodeIndex& index, const std::string& body_name)
      : nodes_(nodes), index_(index), body_name_(body_name) {}

  absl::StatusOr<FrameInfo> Run() {
    BlockInfo top;
    if (!body_name_.empty()) {
      top.kind = BlockInfo::Kind::kFunction;
      top.name = body_name_;  // block 0: FunctionBlock finds it without a table per body
    }
    info_.blocks.push_back(top);
    info_.block_of_node.assign(nodes_.size(), -1);
    roles_.resize(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) roles_[i] = RoleOf(nodes_[i].op);
    BuildEdges();

    // A FIFO as a vector and its head: a std::deque allocated twice per
    // function body validated.
    std::vector<int> work;
    work.reserve(nodes_.size());
    size_t head = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i].input.empty()) continue;
      int block = 0;
      if (const AttrValue* f = nodes_[i].FindAttr("_function")) {
        const std::string* fname = f->get_if<std::string>();
        if (fname == nullptr)
          return NodeError(nodes_[i], absl::StatusCode::kInvalidArgument, "attribute '_function' should be string");
        block = FunctionBlock(*fname);
      }
      if (const AttrValue* loops = nodes_[i].FindAttr(kLoopFramesAttr)) {
        const auto* frames = loops->get_if<std::vector<std::string>>();
        if (frames == nullptr)
          return NodeError(nodes_[i], absl::StatusCode::kInvalidArgument,
                           absl::StrCat("attribute '", kLoopFramesAttr, "' should be list(string)"));
        for (const std::string& frame : *frames) block = LoopBlock(block, frame);
      }
      info_.block_of_node[i] = block;
      work.push_back(static_cast<int>(i));
    }
    absl::Status misplaced;
    while (head < work.size()) {
      const int src = work[head++];
      const NodeDef& node = nodes_[src];
      const int block = info_.block_of_node[src];
      if ((roles_[src] == FrameRole::kExit || roles_[src] == FrameRole::kNextIteration) &&
          info_.blocks[block].kind != BlockInfo::Kind::kLoop) {
        // Reported after propagation: a misplaced Exit/NextIteration is
        // often the symptom of a node that mixes two frames upstream, and
        // that conflict is the better message.
        if (misplaced.ok())
          misplaced = NodeError(node, absl::StatusCode::kInvalidArgument,
                                absl::StrCat(node.op, " outside a loop frame (it fires in ",
                                             DescribeBlock(info_, block), ")"));
        continue;
      }
      for (const OutEdge& e : out_edges(src)) {
        const NodeDef& dst = nodes_[e.dst];
        if (roles_[e.dst] == FrameRole::kReturn && !e.is_control) continue;  // the value comes from the callee
        // A plain producer keeps its consumers in its block: no StatusOr per edge.
        int target = block;
        if (roles_[src] != FrameRole::kPlain) {
          TDF_ASSIGN_OR_RETURN(target, TargetBlock(src, e));
        }
        int& placed = info_.block_of_node[e.dst];
        if (placed < 0) {
          placed = target;
          work.push_back(e.dst);
        } else if (placed != target) {
          return NodeError(dst, absl::StatusCode::kInvalidArgument,
                           absl::StrCat("inputs from two different frames: ", DescribeBlock(info_, placed), " and ",
                                        DescribeBlock(info_, target), " (the latter through '", node.name, "')"));
        }
      }
    }
    TDF_RETURN_IF_ERROR(misplaced);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (info_.block_of_node[i] < 0)
        return NodeError(nodes_[i], absl::StatusCode::kInvalidArgument,
                         "is not reachable from any source node (a node without inputs); it would never fire");
    }
    return std::move(info_);
  }

 private:
  void BuildEdges() {
    std::vector<uint32_t> out_count(nodes_.size() + 1, 0);
    for (size_t i = 0; i < nodes_.size(); ++i)
      for (const ResolvedInput& in : index_.inputs(i)) ++out_count[in.src + 1];
    for (size_t i = 0; i < nodes_.size(); ++i) out_count[i + 1] += out_count[i];
    out_edges_.resize(out_count.back());
    // Filled through the offsets themselves, each then one entry ahead
    // (node i's end); shifted back after: no copy of the offsets.
    for (size_t i = 0; i < nodes_.size(); ++i)
      for (const ResolvedInput& in : index_.inputs(i))
        out_edges_[out_count[in.src]++] = {static_cast<int>(i), in.is_control};
    for (size_t i = nodes_.size(); i > 0; --i) out_count[i] = out_count[i - 1];
    out_count[0] = 0;
    out_offsets_ = std::move(out_count);
  }

  absl::Span<const OutEdge> out_edges(int node) const {
    return absl::MakeConstSpan(out_edges_.data() + out_offsets_[node], out_offsets_[node + 1] - out_offsets_[node]);
  }

  // `name` views a string that outlives the inference (an attribute of a
  // node, or the body's name).
  int FunctionBlock(absl::string_view name) {
    if (!body_name_.empty() && name == body_name_) return 0;
    auto it = function_blocks_.find(name);
    if (it != function_blocks_.end()) return it->second;
    BlockInfo b;
    b.kind = BlockInfo::Kind::kFunction;
    b.name = std::string(name);
    info_.blocks.push_back(std::move(b));
    const int id = static_cast<int>(info_.blocks.size()) - 1;
    function_blocks_.emplace(name, id);
    return id;
  }

  int LoopBlock(int parent, const std::string& frame) {
    auto key = std::make_pair(parent, frame);
    auto it = loop_blocks_.find(key);
    if (it != loop_blocks_.end()) return it->second;
    BlockInfo b;
    b.kind = BlockInfo::Kind::kLoop;
    b.parent = parent;
    b.name = frame;
    info_.blocks.push_back(std::move(b));
    const int id = static_cast<int>(info_.blocks.size()) - 1;
    loop_blocks_[key] = id;
    return id;
  }

  // The string attribute `name` of `node`, not copied: a Call's function
  // is read on each of its edges.
  static absl::StatusOr<const std::string*> StringAttr(const NodeDef& node, absl::string_view name) {
    const AttrValue* v = node.FindAttr(name);
    const std::string* s = v != nullptr ? v->get_if<std::string>() : nullptr;
    if (s == nullptr) return node.GetString(name).status();  // its error
    return s;
  }

  // The block that the edge src -> e.dst places e.dst in.
  absl::StatusOr<int> TargetBlock(int src, const OutEdge& e) {
    const NodeDef& node = nodes_[src];
    const int block = info_.block_of_node[src];
    if (roles_[src] == FrameRole::kEnter) {
      TDF_ASSIGN_OR_RETURN(const std::string* frame, StringAttr(node, "frame_name"));
      return LoopBlock(block, *frame);
    }
    if (roles_[src] == FrameRole::kExit) return info_.blocks[block].parent;  // a loop block: checked when src was popped
    if (roles_[src] == FrameRole::kCall && !e.is_control) {
      TDF_ASSIGN_OR_RETURN(const std::string* fname, StringAttr(node, "function"));
      return FunctionBlock(*fname);
    }
    return block;
  }

  const std::vector<NodeDef>& nodes_;
  const NodeIndex& index_;
  const std::string& body_name_;
  FrameInfo info_;
  // Out edges by producer, in consumer order (node i's: [out_offsets_[i], out_offsets_[i + 1])).
  std::vector<uint32_t> out_offsets_;
  std::vector<OutEdge> out_edges_;
  std::vector<FrameRole> roles_;  // by node
  // Hashed: a static graph's main unit holds every function's block, and
  // each Call's edge looks its callee's up.
  base::FlatHashMap<absl::string_view, int> function_blocks_;
  std::map<std::pair<int, std::string>, int> loop_blocks_;
};

}  // namespace

std::string DescribeBlock(const FrameInfo& info, int block) {
  if (block < 0 || block >= static_cast<int>(info.blocks.size())) return absl::StrCat("<block ", block, ">");
  const BlockInfo& b = info.blocks[block];
  switch (b.kind) {
    case BlockInfo::Kind::kMain: return "main";
    case BlockInfo::Kind::kFunction: return absl::StrCat("function '", b.name, "'");
    case BlockInfo::Kind::kLoop: return absl::StrCat("loop '", b.name, "' in ", DescribeBlock(info, b.parent));
  }
  return "";
}

absl::StatusOr<FrameInfo> InferFrames(const std::vector<NodeDef>& nodes, const NodeIndex& index,
                                      const std::string& body_name) {
  return FrameInference(nodes, index, body_name).Run();
}

absl::StatusOr<FrameInfo> InferFrames(const std::vector<NodeDef>& nodes, const std::string& body_name) {
  TDF_ASSIGN_OR_RETURN(NodeIndex index, NodeIndex::Build(nodes));
  return InferFrames(nodes, index, body_name);
}

}  // namespace tdf
