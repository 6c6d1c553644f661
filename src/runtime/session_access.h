// Internal access to a Session for tdf_distributed: a DistributedSession
// (tdf/distributed.h) runs each rank's partition in an ordinary Session,
// with the run's RemoteChannel, which the public Session::Run never takes.
#ifndef TDF_SRC_RUNTIME_SESSION_ACCESS_H_
#define TDF_SRC_RUNTIME_SESSION_ACCESS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tdf/session.h"

namespace tdf {
namespace runtime {

struct RemoteNeeds;
class RemoteChannel;

class SessionAccess {
 public:
  // Session::Run, with `remote` (null: a one-process run) and what the run
  // needs of this partition (RunRequest::remote_needs; null: all of it).
  static absl::StatusOr<std::vector<Tensor>> Run(Session& session, const RunOptions& run_options,
                                                 const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                 const std::vector<std::string>& fetches,
                                                 const std::vector<std::string>& targets, RunStats* stats,
                                                 RemoteChannel* remote, const RemoteNeeds* remote_needs = nullptr);
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_SESSION_ACCESS_H_
