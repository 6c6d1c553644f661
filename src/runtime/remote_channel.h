// The executor's view of other ranks (docs/distributed.md "The executor's
// side"): where a Send's token goes and where Recv tokens come from. libtdf
// defines the interface and never links MPI; tdf_distributed implements it
// over its MPI transport (distributed/remote_channel.h).
#ifndef TDF_SRC_RUNTIME_REMOTE_CHANNEL_H_
#define TDF_SRC_RUNTIME_REMOTE_CHANNEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/hash_tables.h"
#include "tdf/tensor.h"

namespace tdf {
namespace runtime {

// One token from another rank, as the executor delivers it.
// What a distributed run needs of one rank's partition, whatever that rank
// fetches (distributed/cut_pruning.h): the keys of the cut edges it needs,
// and its nodes of the main graph and its loops that the run needs, by
// name. A pruned run roots both.
struct RemoteNeeds {
  base::FlatHashSet<int64_t> keys;
  std::vector<std::string> nodes;
};

struct RemoteArrival {
  int source_rank = -1;
  int64_t key = 0;                 // the Send/Recv pair (tdf/partition.h)
  absl::Span<const int64_t> tag;   // labels from the root frame; empty: the root
  bool dead = false;
  bool control = false;
  Tensor value;                    // live data tokens: a CPU tensor
};

// Thread-safe: any worker may send and poll at once.
class RemoteChannel {
 public:
  virtual ~RemoteChannel() = default;
  virtual int rank() const = 0;
  // Starts sending; never waits for the receiver. An error fails the run.
  virtual absl::Status Send(int dst_rank, int64_t key, absl::Span<const int64_t> tag, bool dead, bool control,
                            const Tensor& value) = 0;
  // Who polls: the run's waiting thread, between rounds of work, or a
  // busy worker, alone on its rank or beside other workers (the channel
  // counts busy workers' tokens apart).
  enum class Poller { kWaitingThread, kBusyWorker, kBusyBesideOthers };
  // Hands every token that has arrived to `handler`; returns how many.
  // Never blocks. A non-OK status ends the run: a transport error, or a
  // failure another rank reported (its message names that rank).
  virtual absl::StatusOr<int> Poll(Poller poller, absl::FunctionRef<void(RemoteArrival&)> handler) = 0;
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_REMOTE_CHANNEL_H_
