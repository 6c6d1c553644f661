/// \file
/// Cuts a transformed graph (after StaticizeRecursion: Switch, Merge, Enter,
/// Exit, NextIteration, Call, Return; no library) into one partition per rank
/// of a distributed run, with a Send/Recv pair on every edge between ranks
/// (design.md §8, docs/distributed.md). Function and loop bodies may be cut
/// anywhere: parts of one invocation or one iteration then run on different
/// ranks, and tokens that cross carry their tag.
///
/// \code
///   absl::StatusOr<tdf::Graph> g = tdf::StaticizeRecursion(graph);
///   tdf::PartitionOptions options;
///   options.num_ranks = 4;
///   absl::StatusOr<tdf::PartitionedGraph> parts = tdf::PartitionGraph(*g, options);
///   // parts->partitions[r] is what rank r runs.
/// \endcode
///
/// Ranks. A node's rank is the one its device names (tdf::DeviceName:
/// "rank:1", "rank:1/cuda:0", "/job:worker/task:1/..."). An unplaced node
/// runs on rank 0, as TensorFlow's unplaced nodes run on its default task,
/// except that a node without inputs (Const, Placeholder, Variable) runs
/// where its first consumer with a rank runs (a constant is never shipped),
/// and a state op (Read, Assign, ...) where its variable lives: a Variable
/// handle never crosses ranks (InvalidArgument naming both nodes).
///
/// What the partitions hold:
/// \code
///   * every node of the input exactly once, on its rank, under its own name
///     and with its device rewritten to name the rank ("rank:R[/device]");
///   * a Send (on the producer's rank) and a Recv (on the consumer's) for
///     every value, or control edge, that a node on one rank passes to a node
///     on another: one pair per (producer output, consumer rank), serving
///     every consumer there. Both ends carry the pair's `key` (unique in the
///     run), `send_rank`, `recv_rank`, `T` (data) or `control` = true, and
///     `tensor_name` ("producer:port" or "^producer"). Every edge between
///     two ranks is replaced: no input names a node of another partition.
///     A Recv fires in the code block of its Send: it carries `_function`
///     and `_loop_frames` (graph/frames.h) naming that block;
///   * replicas: copies of a node on another rank, under the same name, with
///     the bool attr `_replica` = true. They keep every Send/Recv pair inside
///     one code block, so that a token's tag means the same frame on both
///     ranks, and they tell each rank when a frame it takes part in starts
///     and ends (docs/distributed.md "Local termination"):
///       - Enter and NextIteration change the tag of what they emit, and a
///         Call the tag of its value: instead of cutting their outputs, the
///         node is replicated on the consumer's rank and its inputs are cut;
///       - every rank that takes part in a loop (holds a node of it, or of a
///         loop or function inside it) holds its LoopCond, replicated with
///         its input cut, so it learns every iteration's predicate;
///       - every rank that takes part in a function holds every Call node of
///         every call site of it, so it learns for every caller frame whether
///         the invocation starts. A replica that does not carry the argument
///         (its rank holds no consumer of it) has no data input, only a
///         control input from a control Recv of the original's firing.
///   * the int attr `_frame_id` on Call and Return nodes (one id per call
///     site of a function) and on Enter, Exit, NextIteration and LoopCond
///     (one id per loop, for an Enter the loop it enters): labels that mean
///     the same on every rank, for tags on the wire.
///   * the int attr `_site_part` on every Call (and replica) of a split
///     site (AddGradients' forward and gradient calls of one f_ext site):
///     Calls with the same value form one part. A part is found from the
///     Returns its Calls control, which a rank may not hold; without the
///     attribute a rank without them took each Call for a part of its own.
/// \endcode
///
/// Requires: a transformed graph (empty library) that passes Validate.
/// Ensures: every partition passes Validate (Send/Recv have no kernels yet:
/// the executor integration is issue #29's next step).
/// Errors: InvalidArgument for a rank outside [0, num_ranks) or a variable
/// used across ranks, FailedPrecondition for an untransformed graph,
/// Unimplemented for a loop with no LoopCond that spans ranks; each names
/// the node.
#ifndef TDF_PARTITION_H_
#define TDF_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tdf/graph.h"

namespace tdf {

/// The bool attribute that marks a replica in a partition.
inline constexpr char kReplicaAttr[] = "_replica";
/// The int attribute with a call site's or a loop's rank-independent id.
inline constexpr char kFrameIdAttr[] = "_frame_id";
/// The int attribute that groups a split site's Calls into parts.
inline constexpr char kSitePartAttr[] = "_site_part";

/// How PartitionGraph cuts.
struct PartitionOptions {
  int num_ranks = 1;  ///< partitions to make; every rank a node names must be below it
};

/// One Send/Recv pair: a value or a control edge that crosses ranks.
struct SendRecvPair {
  int64_t key = 0;     ///< unique per pair: matches a Send with its Recv
  int send_rank = 0;   ///< the rank of the Send
  int recv_rank = 0;   ///< the rank of the Recv
  std::string send_node;    ///< in partitions[send_rank]
  std::string recv_node;    ///< in partitions[recv_rank]
  std::string tensor_name;  ///< "producer:port" or "^producer" in the input graph
  bool control = false;  ///< a control edge (no value, only liveness)
  DType dtype = DType::kInvalid;  ///< kInvalid for control pairs
};

/// PartitionGraph's result: one graph per rank and the pairs that join them.
struct PartitionedGraph {
  std::vector<Graph> partitions;  ///< by rank
  std::vector<int> rank_of_node;  ///< by node of the input graph, defaults applied
  std::vector<SendRecvPair> pairs;  ///< by key
  int num_replicas = 0;  ///< nodes copied onto other ranks (Calls, LoopConds, Enters)
};

/// Every node's rank, with the defaults above. Errors name the node.
absl::StatusOr<std::vector<int>> AssignRanks(const Graph& graph, int num_ranks);

/// See the file comment.
absl::StatusOr<PartitionedGraph> PartitionGraph(const Graph& graph, const PartitionOptions& options);

}  // namespace tdf

#endif  // TDF_PARTITION_H_
