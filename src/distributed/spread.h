// Invocations placed by tag (issue #29 §2, docs/distributed.md "Spread
// invocations"): a graph pass that, before partitioning, unrolls each
// spread function's invocation tree down to its policy's depth into copies
// placed on the rank the policy picks for that tag, and below that depth
// calls a per-rank copy of the function placed wholly on that rank. The
// partition pass then turns each crossing call into a Send of its
// arguments and a Send of its results, and each rank runs the bodies
// placed on it in its own frames, with its own work stealing.
#ifndef TDF_SRC_DISTRIBUTED_SPREAD_H_
#define TDF_SRC_DISTRIBUTED_SPREAD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tdf/distributed.h"
#include "tdf/graph.h"

namespace tdf {
namespace distributed {

// `graph` with `policies` applied for `num_ranks` ranks. Unknown or
// undefined functions, a depth below 1, a body that already names ranks,
// or more than kMaxSpreadCopies copies are InvalidArgument. On one rank
// the graph is returned unchanged.
absl::StatusOr<Graph> SpreadInvocations(const Graph& graph, const std::vector<SpreadPolicy>& policies,
                                        int num_ranks);

// `message` with the spread copies' names (`f__rank<R>`, `f__spread_<path>`)
// replaced by the function's own, `f`: errors name the user's nodes (the
// rank and the tag say which invocation).
std::string OriginalNames(absl::string_view message, const std::vector<SpreadPolicy>& policies);

// The rank an invocation at `path` goes to (hash kind); exposed for tests.
int HashRank(const std::vector<int>& path, int num_ranks);

constexpr int kMaxSpreadCopies = 4096;

}  // namespace distributed
}  // namespace tdf

#endif  // TDF_SRC_DISTRIBUTED_SPREAD_H_
