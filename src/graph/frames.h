// File: graph/frames.h (internal)
//
// Frame inference: which code block every node of a graph fires in. A block
// is the main graph, a loop body (entered through Enter nodes with one
// frame_name) or a function body (entered through Call nodes). The executor
// allocates one activation record per block instance, and validation uses
// the same inference to reject graphs whose nodes would mix tokens of two
// different frames.
//
// Placement propagates from source nodes (nodes with no inputs) along every
// data and control edge:
//   * a source fires in block 0, or in the function block of its string attr
//     `_function` (a transformed function body's sourceless node), and then,
//     with a list(string) attr `_loop_frames`, in the loops of those frame
//     names nested in that order (outermost first): a Recv of a partitioned
//     graph fires in the block of its Send, which its rank may otherwise
//     not enter (tdf/partition.h);
//   * Enter(frame F) in block B puts its consumers in the loop block (B, F);
//   * Exit in loop block L puts its consumers in parent(L);
//   * NextIteration keeps its consumers in its (loop) block;
//   * Call puts its data consumers in the function block of its `function`
//     attr and its control consumers (the paired Return) in its own block;
//   * a Return's data input places nothing: the Return lives in its caller's
//     block, placed by the control edges from its Call nodes;
//   * any other edge keeps the consumer in the producer's block.
// Two edges that place one node in different blocks, an Exit or NextIteration
// outside a loop, and a node no source reaches are errors.
#ifndef TDF_GRAPH_FRAMES_H_
#define TDF_GRAPH_FRAMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tdf/graph.h"

namespace tdf {

class NodeIndex;

// The attribute that nests a source node in loop blocks (see above).
inline constexpr char kLoopFramesAttr[] = "_loop_frames";

struct BlockInfo {
  enum class Kind { kMain, kLoop, kFunction };
  Kind kind = Kind::kMain;
  int parent = -1;   // loops: the enclosing block; main and functions: -1
  std::string name;  // loop: frame_name; function: function name; main: ""
};

struct FrameInfo {
  // blocks[0] is the main block (or the function body when inferring a body
  // alone).
  std::vector<BlockInfo> blocks;
  // Per node (index into the node list): the block the node fires in.
  std::vector<int> block_of_node;
};

// `nodes` is a main graph (possibly transformed: Call/Return, no Invoke) or,
// when `body_name` is not empty, one untransformed function body (Arg/Retval);
// block 0 is then that body, of kind kFunction named `body_name`.
// Deterministic: the same nodes always give the same blocks in the same order.
absl::StatusOr<FrameInfo> InferFrames(const std::vector<NodeDef>& nodes, const std::string& body_name = "");
// The same with the nodes' inputs already resolved (`index` built from `nodes`).
absl::StatusOr<FrameInfo> InferFrames(const std::vector<NodeDef>& nodes, const NodeIndex& index,
                                      const std::string& body_name);

// "main", "loop 'while_2' in main", "function 'fib'": how errors name a block.
std::string DescribeBlock(const FrameInfo& info, int block);

}  // namespace tdf

#endif  // TDF_GRAPH_FRAMES_H_
