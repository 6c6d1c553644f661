#include "runtime/executor.h"
#include "base/sync.h"
#include "base/hash_tables.h"
#include "base/tasks.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <thread>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_group.h"
#include "cuda/device_backend.h"
#include "runtime/frame.h"
#include "runtime/out_of_memory.h"
#include "runtime/remote_channel.h"
#include "tdf/status.h"
#include "runtime/scalar_ops.h"
#include "runtime/trace.h"

namespace tdf {
namespace runtime {

// The executor is one translation unit in parts, one concept each
// (docs/architecture.md): the Worker and its helpers have internal linkage
// and the hot path (Fire -> Propagate -> DeliverEdge -> Release) inlines
// across parts exactly as it did in one file.
#include "runtime/executor/frame_pool.inc"  // NOLINT(build/include)
#include "runtime/executor/run_state.inc"  // NOLINT(build/include)

namespace {

#include "runtime/executor/batch_buckets.inc"  // NOLINT(build/include)
#include "runtime/executor/worker.inc"  // NOLINT(build/include)
#include "runtime/executor/frame_lifetime.inc"  // NOLINT(build/include)
#include "runtime/executor/delivery.inc"  // NOLINT(build/include)
#include "runtime/executor/control_flow.inc"  // NOLINT(build/include)
#include "runtime/executor/firing.inc"  // NOLINT(build/include)
#include "runtime/executor/threads.inc"  // NOLINT(build/include)
#include "runtime/executor/continuations.inc"  // NOLINT(build/include)
#include "runtime/executor/batching.inc"  // NOLINT(build/include)
#include "runtime/executor/remote.inc"  // NOLINT(build/include)
#include "runtime/executor/scheduling.inc"  // NOLINT(build/include)
#include "runtime/executor/free_frames.inc"  // NOLINT(build/include)

}  // namespace

#include "runtime/executor/run.inc"  // NOLINT(build/include)

}  // namespace runtime
}  // namespace tdf
