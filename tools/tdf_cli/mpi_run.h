// `tdf run` under mpirun (tools/tdf_cli/mpi_run.cc, built only with MPI):
// every rank runs the graph collectively in a tdf::DistributedSession, with
// the graph's rank placement and any --spread policies; rank 0 prints the
// fetched values (gathered there).
#ifndef TDF_TOOLS_TDF_CLI_MPI_RUN_H_
#define TDF_TOOLS_TDF_CLI_MPI_RUN_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tdf/graph.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf_cli {

// True when this process was started by mpirun (Open MPI's or a PMI
// launcher's environment).
bool UnderMpirun();

// `spread`: "FUNCTION[:DEPTH[:hash|round-robin]]" each (depth 6, hash by
// default); a malformed one is InvalidArgument. `print` formats a tensor;
// `print_stats`, when set, prints rank 0's RunStats.
absl::Status RunAcrossRanks(const tdf::Graph& graph, const std::vector<std::pair<std::string, tdf::Tensor>>& feeds,
                            const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                            const tdf::SessionOptions& options,
                            const std::vector<std::string>& spread, int runs,
                            const std::function<std::string(const tdf::Tensor&)>& print,
                            const std::function<void(const tdf::RunStats&)>& print_stats);

}  // namespace tdf_cli

#endif  // TDF_TOOLS_TDF_CLI_MPI_RUN_H_
