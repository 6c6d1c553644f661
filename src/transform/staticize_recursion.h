// File: transform/staticize_recursion.h (internal)
//
// StaticizeRecursion with the index of the graph it makes: the pass emits
// every input knowing its producer's position, so Session::Create need not
// hash every name and resolve every input of the transformed graph again
// (NodeIndex::Build; issue #26, item 5).
#ifndef TDF_TRANSFORM_STATICIZE_RECURSION_H_
#define TDF_TRANSFORM_STATICIZE_RECURSION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/node_index.h"
#include "tdf/graph.h"

namespace tdf {

struct StaticizedGraph {
  Graph graph;
  // Of graph.node, as NodeIndex::Build would make it. It views the nodes'
  // names: moving the Graph keeps them in place; adding nodes does not.
  NodeIndex index;
  // Each Invoke of the main graph, in graph order: its name and the
  // positions in graph.node of the Returns that give its results, in the
  // order of the results it receives (a fetch of the Invoke resolves to
  // them; Session::Create's table of them needs no name built or looked up).
  std::vector<std::pair<std::string, std::vector<int32_t>>> main_invoke_returns;
};

absl::StatusOr<StaticizedGraph> StaticizeRecursionIndexed(const Graph& graph);

}  // namespace tdf

#endif  // TDF_TRANSFORM_STATICIZE_RECURSION_H_
