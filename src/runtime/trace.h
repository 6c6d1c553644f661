// Chrome trace JSON (chrome://tracing, Perfetto) of node firings.
#ifndef TDF_SRC_RUNTIME_TRACE_H_
#define TDF_SRC_RUNTIME_TRACE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tdf/session.h"

namespace tdf {
namespace runtime {

class TraceWriter {
 public:
  // Thread-safe.
  void Add(const FiringEvent& event);
  // One "X" (complete) event per firing: name = node, cat = op, tid = worker,
  // args = {tag, dead}, and {batch: n} for an instance of a batched firing.
  absl::Status WriteChromeJson(const std::string& path) const;
  std::string ToChromeJson() const;

 private:
  struct Event {
    std::string node, op, tag;
    int worker;
    bool dead;
    int64_t start_ns, end_ns;
    int batch;
  };
  mutable absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_TRACE_H_
