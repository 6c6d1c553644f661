// tdf run under mpirun (mpi_run.h). Only this file of the tool names MPI:
// the tool links tdf_distributed only in a build with MPI.
#include "mpi_run.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tdf/distributed.h"
#include "tdf/status.h"

namespace tdf_cli {
namespace {

absl::StatusOr<tdf::SpreadPolicy> ParseSpread(const std::string& spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  tdf::SpreadPolicy p;
  p.function = parts[0];
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--spread ", spec, ": ", why, " (expected FUNCTION[:DEPTH[:hash|round-robin]])"));
  };
  if (p.function.empty() || parts.size() > 3) return bad("malformed");
  if (parts.size() >= 2 && (!absl::SimpleAtoi(parts[1], &p.max_depth) || p.max_depth < 1))
    return bad("the depth is not a positive integer");
  if (parts.size() == 3) {
    if (parts[2] == "hash") {
      p.kind = tdf::SpreadPolicy::Kind::kHashOfTag;
    } else if (parts[2] == "round-robin") {
      p.kind = tdf::SpreadPolicy::Kind::kRoundRobin;
    } else {
      return bad("unknown policy '" + parts[2] + "'");
    }
  }
  return p;
}

}  // namespace

bool UnderMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_SIZE") != nullptr;
}

absl::Status RunAcrossRanks(const tdf::Graph& graph, const std::vector<std::pair<std::string, tdf::Tensor>>& feeds,
                            const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                            const tdf::SessionOptions& options,
                            const std::vector<std::string>& spread, int runs,
                            const std::function<std::string(const tdf::Tensor&)>& print,
                            const std::function<void(const tdf::RunStats&)>& print_stats) {
  tdf::DistributedOptions d;
  d.session = options;
  d.gather_fetches = true;
  for (const std::string& spec : spread) {
    TDF_ASSIGN_OR_RETURN(tdf::SpreadPolicy p, ParseSpread(spec));
    d.spread.push_back(std::move(p));
  }
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<tdf::DistributedSession> session, tdf::DistributedSession::Create(graph, d));
  tdf::RunStats stats;
  tdf::DistributedRunStats remote;
  absl::StatusOr<std::vector<tdf::Tensor>> outputs;
  for (int i = 0; i < runs; ++i) {
    outputs = session->Run(tdf::RunOptions(), feeds, fetches, targets, &stats, &remote);
    if (!outputs.ok()) {
      (void)session->Close();
      return outputs.status();
    }
  }
  if (session->rank() == 0) {
    for (size_t i = 0; i < fetches.size() && i < outputs->size(); ++i)
      std::cout << fetches[i] << " = " << print((*outputs)[i]) << "\n";
    if (print_stats) {
      print_stats(stats);
      // Every rank's share of the last run (exchanged at its end).
      std::vector<tdf::RankRunStats> rows = remote.ranks;
      rows.push_back(remote.total);
      for (const tdf::RankRunStats& r : rows)
        std::cout << (r.rank < 0 ? std::string("all ranks") : "rank " + std::to_string(r.rank)) << ": "
                  << r.firings << " firings, " << r.frames_created << " frames, " << r.remote_invocations
                  << " remote invocations, " << r.tokens_sent << " tokens sent (" << r.bytes_sent << " bytes), "
                  << r.tokens_received << " received (" << r.bytes_received << " bytes, "
                  << r.tokens_received_while_busy << " while busy, " << r.tokens_received_beside_other_workers
                  << " of them beside other workers)\n";
    }
  }
  return session->Close();
}

}  // namespace tdf_cli
