/// \file
/// A graph run across the ranks of an MPI job (docs/distributed.md): SPMD,
/// every rank creates the session over the same communicator with the same
/// graph and calls each Run with the same arguments. Each rank runs its
/// partition (tdf/partition.h: nodes placed by "rank:R" devices, unplaced
/// nodes on rank 0 by default); tokens that cross ranks go over MPI.
///
/// \code
///   auto s = tdf::DistributedSession::Create(graph, {}, MPI_COMM_WORLD);  // collective
///   auto out = (*s)->Run({{"x", x}}, {"y"});                             // collective
///   // out has one tensor per fetch: valid on the rank that holds the
///   // fetched node (and on rank 0 with gather_fetches), invalid (Tensor())
///   // on the others.
///   (*s)->Close();                                                       // collective
/// \endcode
///
/// Feeds and fetches live on the ranks of their nodes: a rank uses the feeds
/// of its own Placeholders and ignores the others. A run fires what its
/// fetches and targets need, on every rank, as Session::Run prunes: every
/// rank works out the same closure over the whole graph, so a Placeholder
/// nothing needed reads need not be fed (docs/distributed.md, "Pruning").
///
/// Errors: a failure on one rank (a kernel error, a deadline, a cancel)
/// ends the run on every rank with that rank's status, prefixed
/// "rank R: " and naming the node, op and tag. When several ranks fail
/// independently, every rank returns the lowest failing rank's. A rank that
/// never comes makes the others fail at their run's deadline
/// (DistributedOptions::default_deadline when SessionOptions::deadline is
/// not set), and the run's closing step waits at most `peer_timeout`: a
/// rank that is gone for good leaves the session unusable (FailedPrecondition
/// on later runs), never a hang. A failed run leaves the session usable.
///
/// What runs across ranks: docs/distributed.md, "What exists, what comes
/// next": the main graph and function and loop bodies cut anywhere, and
/// invocations spread over the ranks by their tag (DistributedOptions::spread).
///
/// MPI: if MPI is not initialized, Create initializes it (with
/// MPI_THREAD_MULTIPLE) and tdf finalizes it at exit; an application that
/// initialized MPI must have asked for MPI_THREAD_MULTIPLE.
#ifndef TDF_DISTRIBUTED_H_
#define TDF_DISTRIBUTED_H_

#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tdf/graph.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {

/// Invocations placed by tag (docs/distributed.md, "Spread invocations"):
/// every call of `function` down to `max_depth` levels of its recursion
/// (the outermost call is level 1) runs on the rank the policy picks for
/// its tag; below that depth, invocations run on their parent's rank. The
/// caller's rank sends the arguments, the callee's rank runs the body in
/// its own frames with its own workers and sends the results back.
struct SpreadPolicy {
  /// How an invocation's rank is chosen.
  enum class Kind {
    kHashOfTag,   ///< a hash of the tag's call-site labels, modulo the ranks
    kRoundRobin,  ///< the i-th invocation of a level (in tag order) on rank i % ranks
  };
  std::string function;          ///< the function whose invocations spread
  Kind kind = Kind::kHashOfTag;  ///< how their ranks are chosen
  /// The function's body is copied once per tag above this depth (sites^depth
  /// copies): 4 to 8 suits binary recursion such as fib.
  int max_depth = 6;
  /// The ranks to spread over, in the policy's order (a hash or counter i
  /// picks ranks[i % size]); empty: every rank of the session. With node
  /// placement: a main graph on rank 0 whose recursion runs on ranks 1-3.
  std::vector<int> ranks;
};

/// How a DistributedSession runs: each rank's session, timeouts, spreading.
struct DistributedOptions {
  /// Each rank's session (workers, deadline, ...). Static mode only.
  SessionOptions session;
  /// A run's deadline when session.deadline is infinite: waiting for a rank
  /// that never sends ends there.
  absl::Duration default_deadline = absl::Minutes(10);
  /// How long the collective end of a run waits for the other ranks.
  absl::Duration peer_timeout = absl::Seconds(60);
  /// After a successful run, every fetched value is sent to rank 0 too, so
  /// that rank 0's results are complete (other ranks keep their own).
  bool gather_fetches = false;
  /// Functions whose invocations spread over the ranks. The function's own
  /// body must name no rank; its callees other than itself keep their
  /// placement (rank 0 by default).
  std::vector<SpreadPolicy> spread;
};

/// One rank's figures of a run (DistributedRunStats).
struct RankRunStats {
  int rank = 0;                  ///< the rank (-1 in a sum over ranks)
  int64_t tokens_sent = 0;       ///< tokens to other ranks
  int64_t bytes_sent = 0;        ///< their bytes on the wire
  int64_t tokens_received = 0;   ///< tokens from other ranks
  /// Of those, the tokens a busy worker took in between two of its firings
  /// (the rest came while the rank had no work).
  int64_t tokens_received_while_busy = 0;
  /// Of tokens_received_while_busy, those taken in while other workers of
  /// the rank ran too (SessionOptions::num_workers > 1).
  int64_t tokens_received_beside_other_workers = 0;
  int64_t bytes_received = 0;    ///< their bytes on the wire
  /// Invocations this rank took part in for a call made on another rank:
  /// the call's first argument (or, without arguments, its announcement)
  /// arrived here live. Spread invocations and functions placed on other
  /// ranks count once on each rank that runs part of them.
  int64_t remote_invocations = 0;
  int64_t firings = 0;           ///< node firings, live and dead (RunStats::firings)
  int64_t live_firings = 0;      ///< RunStats::live_firings
  int64_t frames_created = 0;    ///< RunStats::frames_created
};

/// The figures of the last run, beside its RunStats: this rank's (the
/// fields it inherits), every rank's and their sum, exchanged in the run's
/// collective end, so that every rank (rank 0 among them) has all of them.
struct DistributedRunStats : RankRunStats {
  /// Every rank's figures, by rank; empty when the run's end itself failed
  /// (a rank that never ended its run).
  std::vector<RankRunStats> ranks;
  RankRunStats total;  ///< the sum over `ranks` (rank -1)
};

/// A graph cut across MPI ranks and run collectively: every rank creates
/// it and calls Run with the same arguments.
class DistributedSession {
 public:
  /// Collective over `comm`. Validates and transforms `graph`, cuts it into
  /// one partition per rank and compiles this rank's.
  static absl::StatusOr<std::unique_ptr<DistributedSession>> Create(const Graph& graph,
                                                                    DistributedOptions options = {},
                                                                    MPI_Comm comm = MPI_COMM_WORLD);
  ~DistributedSession();
  DistributedSession(const DistributedSession&) = delete;
  DistributedSession& operator=(const DistributedSession&) = delete;

  int rank() const;       ///< this process's rank in the communicator
  int num_ranks() const;  ///< the communicator's size
  /// Which rank holds a node of the (transformed) graph; -1 if none.
  int RankOf(const std::string& node) const;

  /// Collective: every rank calls it with the same feeds and fetches.
  /// The run fires what the fetches need, on every rank (as Session::Run
  /// prunes): a Placeholder nothing needed reads need not be fed.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches, RunStats* stats = nullptr,
                                          DistributedRunStats* remote_stats = nullptr,
                                          const RunOptions& run_options = {});
  /// The same with targets: nodes that run, on whichever rank holds them,
  /// with what they need, and return nothing (Session::Run's targets).
  absl::StatusOr<std::vector<Tensor>> Run(const RunOptions& run_options,
                                          const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets, RunStats* stats = nullptr,
                                          DistributedRunStats* remote_stats = nullptr);

  /// Collective: ends the session's use of MPI (the destructor does
  /// without it, detaching what is still in flight).
  absl::Status Close();

  class Impl;

 private:
  explicit DistributedSession(std::unique_ptr<Impl> impl);
  absl::Status Gather(const std::vector<std::string>& fetches, std::vector<Tensor>* results);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tdf

#endif  // TDF_DISTRIBUTED_H_
