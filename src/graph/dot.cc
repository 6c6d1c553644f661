#include "tdf/dot.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/frames.h"

namespace tdf {
namespace {

// A DOT double-quoted string body. Labels use "\n" for line breaks; bytes
// outside printable ASCII become '?' so a strange name cannot break the file.
std::string Escape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u >= 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

std::string StringAttr(const NodeDef& n, absl::string_view name) {
  const AttrValue* v = n.FindAttr(name);
  const std::string* s = v ? v->get_if<std::string>() : nullptr;
  return s ? *s : "?";
}

std::string IntAttr(const NodeDef& n, absl::string_view name) {
  const AttrValue* v = n.FindAttr(name);
  const int64_t* i = v ? v->get_if<int64_t>() : nullptr;
  return i ? absl::StrCat(*i) : "?";
}

// The first line of a node's label: what the node does.
std::string OpLabel(const NodeDef& n) {
  if (n.op == "Call") {
    const std::string arg = IntAttr(n, "arg_index");
    std::string label = absl::StrCat("Call ", StringAttr(n, "function"), " #", IntAttr(n, "call_site"));
    if (arg != "-1") absl::StrAppend(&label, " arg ", arg);
    return label;
  }
  if (n.op == "Return") {
    const std::string result = IntAttr(n, "result_index");
    std::string label = absl::StrCat("Return ", StringAttr(n, "function"), " #", IntAttr(n, "call_site"));
    if (result != "0") absl::StrAppend(&label, " result ", result);
    return label;
  }
  if (n.op == "Invoke") return absl::StrCat("Invoke ", StringAttr(n, "function"));
  if (n.op == "Send") return absl::StrCat("Send #", IntAttr(n, "key"), " to rank ", IntAttr(n, "recv_rank"));
  if (n.op == "Recv") return absl::StrCat("Recv #", IntAttr(n, "key"), " from rank ", IntAttr(n, "send_rank"));
  if (n.op == "Enter") return absl::StrCat("Enter ", StringAttr(n, "frame_name"));
  if (n.op == "Arg" || n.op == "Retval") return absl::StrCat(n.op, " ", IntAttr(n, "index"));
  if (n.op == "Const") {
    if (const AttrValue* v = n.FindAttr("value")) {
      if (const Tensor* t = v->get_if<Tensor>()) {
        std::string value = t->DebugString();
        if (t->is_scalar()) {
          const size_t space = value.find(' ');
          if (space != std::string::npos) value = value.substr(space + 1);
        }
        if (value.size() > 24) value = absl::StrCat(value.substr(0, 21), "...");
        return absl::StrCat("Const ", value);
      }
    }
  }
  return n.op;
}

// shape, fill color, extra style.
struct Look {
  const char* shape;
  const char* fill;
  const char* style;
};

Look LookOf(const std::string& op) {
  static const std::map<std::string, Look>* const kLooks = new std::map<std::string, Look>{
      {"Switch", {"invtriangle", "#f4a261", "filled"}},
      {"Merge", {"triangle", "#2a9d8f", "filled"}},
      {"Enter", {"house", "#8ecae6", "filled"}},
      {"Exit", {"invhouse", "#8ecae6", "filled"}},
      {"NextIteration", {"diamond", "#e9c46a", "filled"}},
      {"LoopCond", {"octagon", "#e9c46a", "filled"}},
      {"Call", {"rarrow", "#90be6d", "filled"}},
      {"Return", {"larrow", "#f28482", "filled"}},
      {"Invoke", {"doubleoctagon", "#b5e48c", "filled"}},
      {"Arg", {"ellipse", "#dddddd", "filled"}},
      {"Retval", {"ellipse", "#dddddd", "filled"}},
      {"Placeholder", {"ellipse", "#cdb4db", "filled"}},
      {"Const", {"box", "#eeeeee", "rounded,filled"}},
      {"Send", {"cds", "#f7b2b7", "filled"}},
      {"Recv", {"cds", "#b7e4c7", "filled"}},
  };
  auto it = kLooks->find(op);
  if (it != kLooks->end()) return it->second;
  return {"box", "#ffffff", "rounded,filled"};
}

class DotWriter {
 public:
  explicit DotWriter(const DotOptions& options) : options_(options) {}

  std::string Write(const Graph& graph) {
    absl::StrAppend(&out_, "digraph \"", Escape(options_.graph_name), "\" {\n");
    absl::StrAppend(&out_, "  rankdir=", options_.rankdir == "LR" ? "LR" : "TB", ";\n",
                    "  node [fontname=\"Helvetica\", fontsize=10, penwidth=0.8];\n",
                    "  edge [fontname=\"Helvetica\", fontsize=9, arrowsize=0.7];\n");
    WriteScope(graph.node, "", "n", 1);
    if (options_.include_library) {
      int k = 0;
      for (const auto& [name, fn] : graph.library.functions()) WriteFunction(fn, k++);
    }
    out_ += edges_;
    out_ += "}\n";
    return std::move(out_);
  }

  std::string WritePartitions(const PartitionedGraph& parts) {
    absl::StrAppend(&out_, "digraph \"", Escape(options_.graph_name), "\" {\n");
    absl::StrAppend(&out_, "  rankdir=", options_.rankdir == "LR" ? "LR" : "TB", ";\n", "  compound=true;\n",
                    "  node [fontname=\"Helvetica\", fontsize=10, penwidth=0.8];\n",
                    "  edge [fontname=\"Helvetica\", fontsize=9, arrowsize=0.7];\n");
    std::vector<std::map<std::string, size_t>> ids(parts.partitions.size());
    for (size_t r = 0; r < parts.partitions.size(); ++r) {
      const std::vector<NodeDef>& nodes = parts.partitions[r].node;
      for (size_t i = 0; i < nodes.size(); ++i) ids[r].emplace(nodes[i].name, i);
      absl::StrAppend(&out_, "  subgraph \"cluster_rank", r, "\" {\n", "    label=\"rank ", r,
                      "\"; style=\"rounded\"; color=\"#555555\"; penwidth=1.5; fontname=\"Helvetica-Bold\"; "
                      "fontsize=13;\n");
      WriteScope(nodes, "", absl::StrCat("r", r, "_"), 2);
      out_ += "  }\n";
    }
    out_ += edges_;
    for (const SendRecvPair& pair : parts.pairs) {
      if (pair.send_rank < 0 || pair.recv_rank < 0 || pair.send_rank >= static_cast<int>(ids.size()) ||
          pair.recv_rank >= static_cast<int>(ids.size()))
        continue;
      auto send = ids[pair.send_rank].find(pair.send_node);
      auto recv = ids[pair.recv_rank].find(pair.recv_node);
      if (send == ids[pair.send_rank].end() || recv == ids[pair.recv_rank].end()) continue;
      absl::StrAppend(&out_, "  r", pair.send_rank, "_", send->second, " -> r", pair.recv_rank, "_", recv->second,
                      " [color=\"#d62828\", penwidth=2, fontcolor=\"#d62828\", label=\"#", pair.key, " ",
                      Escape(pair.tensor_name), "\"", pair.control ? ", style=\"bold,dashed\"" : "", "];\n");
    }
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  // Draws `nodes` (the main graph, or one function body when `body_name` is
  // set) with their clusters, and queues their edges.
  void WriteScope(const std::vector<NodeDef>& nodes, const std::string& body_name, const std::string& id_prefix,
                  int indent) {
    std::map<std::string, size_t> ids;  // node name -> index (the DOT id is prefix + index)
    for (size_t i = 0; i < nodes.size(); ++i) ids.emplace(nodes[i].name, i);

    FrameInfo frames;
    bool have_frames = false;
    if (options_.cluster_frames) {
      absl::StatusOr<FrameInfo> inferred = InferFrames(nodes, body_name);
      if (inferred.ok()) {
        frames = *std::move(inferred);
        have_frames = true;
      } else {
        absl::StrAppend(&out_, Indent(indent), "// no frame clusters: ", Escape(inferred.status().message()), "\n");
      }
    }
    if (!have_frames) {
      frames.blocks.assign(1, BlockInfo{});
      frames.block_of_node.assign(nodes.size(), 0);
    }
    std::vector<std::vector<int>> children(frames.blocks.size());
    std::vector<std::vector<int>> members(frames.blocks.size());
    std::vector<int> roots;
    for (size_t b = 1; b < frames.blocks.size(); ++b) {
      const int parent = frames.blocks[b].parent;
      if (parent >= 0 && parent < static_cast<int>(b)) {
        children[parent].push_back(static_cast<int>(b));
      } else {
        roots.push_back(static_cast<int>(b));  // function blocks of a transformed graph
      }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      int b = frames.block_of_node[i];
      if (b < 0 || b >= static_cast<int>(frames.blocks.size())) b = 0;  // unreached nodes: top level
      members[b].push_back(static_cast<int>(i));
    }
    WriteBlock(nodes, frames, members, children, 0, id_prefix, /*as_cluster=*/false, "", indent);
    for (int b : roots) WriteBlock(nodes, frames, members, children, b, id_prefix, true, "", indent);
    WriteEdges(nodes, ids, id_prefix);
  }

  void WriteBlock(const std::vector<NodeDef>& nodes, const FrameInfo& frames,
                  const std::vector<std::vector<int>>& members, const std::vector<std::vector<int>>& children, int b,
                  const std::string& id_prefix, bool as_cluster, const std::string& name_prefix, int indent) {
    const BlockInfo& block = frames.blocks[b];
    std::string prefix = name_prefix;
    if (as_cluster) {
      const bool loop = block.kind == BlockInfo::Kind::kLoop;
      absl::StrAppend(&out_, Indent(indent), "subgraph \"cluster_", id_prefix, "_b", b, "\" {\n", Indent(indent + 1),
                      "label=\"", loop ? "loop " : "function ", Escape(block.name), "\"; style=\"rounded,filled\"; ",
                      "fillcolor=\"", loop ? "#fff4d6" : "#eaf2fb", "\"; color=\"", loop ? "#d4a017" : "#5b8def",
                      "\"; fontname=\"Helvetica-Bold\"; fontsize=11;\n");
      // Transformed function bodies are named "f/<node>": show the rest.
      if (block.kind == BlockInfo::Kind::kFunction) prefix = absl::StrCat(block.name, "/");
      ++indent;
    }
    for (int i : members[b]) WriteNode(nodes[i], absl::StrCat(id_prefix, i), prefix, indent);
    for (int child : children[b]) WriteBlock(nodes, frames, members, children, child, id_prefix, true, prefix, indent);
    if (as_cluster) absl::StrAppend(&out_, Indent(indent - 1), "}\n");
  }

  void WriteNode(const NodeDef& n, const std::string& id, const std::string& name_prefix, int indent) {
    std::string label = OpLabel(n);
    if (options_.show_node_names) {
      absl::string_view shown = n.name;
      if (!name_prefix.empty() && absl::StartsWith(shown, name_prefix)) shown.remove_prefix(name_prefix.size());
      absl::StrAppend(&label, "\n", shown);
    }
    const Look look = LookOf(n.op);
    // A replica (tdf/partition.h) has a dashed outline.
    const bool replica = n.GetBoolOr(kReplicaAttr, false);
    absl::StrAppend(&out_, Indent(indent), id, " [label=\"", Escape(label), "\", tooltip=\"", Escape(NodeLabel(n)),
                    "\", shape=", look.shape, ", style=\"", look.style, replica ? ",dashed" : "", "\", fillcolor=\"",
                    look.fill, "\"];\n");
  }

  void WriteEdges(const std::vector<NodeDef>& nodes, const std::map<std::string, size_t>& ids,
                  const std::string& id_prefix) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::string dst = absl::StrCat(id_prefix, i);
      for (const std::string& in : nodes[i].input) {
        absl::StatusOr<InputRef> ref = InputRef::Parse(in);
        if (!ref.ok()) {
          absl::StrAppend(&edges_, "  // ", dst, ": ", Escape(ref.status().message()), "\n");
          continue;
        }
        std::string src;
        bool from_next_iteration = false;
        auto it = ids.find(ref->node);
        if (it != ids.end()) {
          src = absl::StrCat(id_prefix, it->second);
          from_next_iteration = nodes[it->second].op == "NextIteration";
        } else {
          // A dangling input: draw it, in red, rather than hide it.
          src = absl::StrCat(id_prefix, "_missing", missing_++);
          absl::StrAppend(&edges_, "  ", src, " [label=\"? ", Escape(ref->node),
                          "\", shape=plaintext, fontcolor=\"#d00000\"];\n");
        }
        std::vector<std::string> attrs;
        if (ref->is_control) {
          attrs.push_back("style=dashed");
          attrs.push_back("color=\"#888888\"");
          attrs.push_back("arrowhead=odot");
        } else if (ref->port != 0) {
          attrs.push_back(absl::StrCat("label=\"", ref->port, "\""));
        }
        // Back edges of loops would otherwise pull the loop head downwards.
        if (from_next_iteration) attrs.push_back("constraint=false");
        absl::StrAppend(&edges_, "  ", src, " -> ", dst);
        if (!attrs.empty()) absl::StrAppend(&edges_, " [", absl::StrJoin(attrs, ", "), "]");
        edges_ += ";\n";
      }
    }
  }

  void WriteFunction(const FunctionDef& fn, int k) {
    auto args = [](const std::vector<ArgDef>& list) {
      std::vector<std::string> parts;
      for (const ArgDef& a : list) parts.push_back(absl::StrCat(a.name, ": ", DTypeName(a.type)));
      return absl::StrJoin(parts, ", ");
    };
    const std::string id_prefix = absl::StrCat("f", k, "_");
    absl::StrAppend(&out_, "  subgraph \"cluster_lib_", k, "\" {\n", "    label=\"function ",
                    Escape(fn.signature.name), "(", Escape(args(fn.signature.inputs)), ") -> (",
                    Escape(args(fn.signature.outputs)), ")", fn.defined ? "" : " [declared only]",
                    "\"; style=\"rounded,filled\"; fillcolor=\"#eaf2fb\"; color=\"#5b8def\"; "
                    "fontname=\"Helvetica-Bold\"; fontsize=11;\n");
    if (fn.node.empty()) {
      absl::StrAppend(&out_, "    ", id_prefix, "empty [label=\"", fn.defined ? "(empty body)" : "(no body yet)",
                      "\", shape=plaintext];\n");
    } else {
      // The body's block 0 is this cluster; its loops nest inside.
      WriteScope(fn.node, fn.signature.name.empty() ? "?" : fn.signature.name, id_prefix, 2);
    }
    out_ += "  }\n";
  }

  static std::string Indent(int n) { return std::string(2 * n, ' '); }

  const DotOptions& options_;
  std::string out_;
  std::string edges_;  // after every node, so clusters hold only nodes
  int missing_ = 0;
};

}  // namespace

std::string GraphToDot(const Graph& graph, const DotOptions& options) { return DotWriter(options).Write(graph); }

std::string PartitionsToDot(const PartitionedGraph& parts, const DotOptions& options) {
  return DotWriter(options).WritePartitions(parts);
}

}  // namespace tdf
