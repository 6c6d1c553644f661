/// \file
/// Graphviz DOT export, for looking at graphs before and after the Yaghi
/// transformation:
///
/// \code
///   std::string dot = tdf::GraphToDot(graph);   // then: dot -Tsvg g.dot -o g.svg
/// \endcode
///
/// * Every function body of the library is a cluster ("function fib(n) -> r").
/// * Nodes are grouped by the code block they fire in (graph/frames.h frame
///  inference): a transformed graph gets one cluster per function body
///  ("fib/...") and, nested inside its block, one per loop frame.
/// * Control edges are dashed; data edges from an output port other than 0
///  carry the port number; NextIteration back edges do not constrain ranks.
/// * Call and Return nodes are labelled with their site ("Call fib #0 arg 0",
///  "Return fib #1"); Switch, Merge, Enter, Exit and NextIteration have
///  distinct shapes and colors.
/// * Partitions (tdf/partition.h): PartitionsToDot draws one cluster per rank,
///  each with its frame clusters, replicas with a dashed outline, and every
///  Send -> Recv pair as a bold red edge between the ranks' clusters.
#ifndef TDF_DOT_H_
#define TDF_DOT_H_

#include <string>

#include "tdf/graph.h"
#include "tdf/partition.h"

namespace tdf {

/// What GraphToDot draws.
struct DotOptions {
  std::string graph_name = "tdf";  ///< the DOT graph's name
  /// Draw the library's function bodies (each in its own cluster).
  bool include_library = true;
  /// Cluster nodes by function body and loop frame.
  bool cluster_frames = true;
  /// Add the node name under the op in each label.
  bool show_node_names = true;
  /// Layout direction: "TB" (top to bottom) or "LR".
  std::string rankdir = "TB";
};

/// Never fails: a graph whose frames cannot be inferred (an invalid graph) is
/// drawn without loop/function clusters, with a comment saying why.
std::string GraphToDot(const Graph& graph, const DotOptions& options = {});

/// The partitions of a distributed run side by side (see the file comment).
std::string PartitionsToDot(const PartitionedGraph& parts, const DotOptions& options = {});

}  // namespace tdf

#endif  // TDF_DOT_H_
