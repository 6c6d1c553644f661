// Variables: state that outlives a run (seeds/001). A Variable node outputs
// an int64 handle; Read/Assign/AssignAdd/AssignSub/ScatterAdd take the
// handle as input 0. Tensors are immutable values, so a Read shares the
// current tensor and an Assign installs a new one; each update is atomic
// under the variable's lock. AssignAdd/AssignSub/ScatterAdd write into the
// variable's buffer only when no other tensor shares it (no value handed
// out can change), else into a fresh one.
#ifndef TDF_SRC_RUNTIME_STATE_KERNELS_H_
#define TDF_SRC_RUNTIME_STATE_KERNELS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tdf/kernel.h"

namespace tdf {
namespace runtime {

struct VariableSlot {
  std::string name;
  DType dtype = DType::kInvalid;
  // Where the value lives (the Variable node's device). A GPU variable's
  // updates run as GPU kernels on the device's stream; values assigned
  // from another device are copied here.
  Device device;
  mutable absl::Mutex mu;
  Tensor value ABSL_GUARDED_BY(mu);
};

// The session's variables, indexed by handle. Passed to kernels through
// KernelContext::session_state().
struct VariableStore {
  std::vector<std::unique_ptr<VariableSlot>> slots;
};

bool IsStateOp(const std::string& op);
std::unique_ptr<OpKernel> MakeVariableHandleKernel(int32_t handle);
absl::StatusOr<std::unique_ptr<OpKernel>> MakeStateKernel(const NodeDef& node);

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_STATE_KERNELS_H_
