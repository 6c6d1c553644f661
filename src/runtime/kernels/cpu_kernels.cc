#include "runtime/kernels/kernel_util.h"
#include "tdf/kernel.h"

namespace tdf {

// Each kernel file registers its own ops. The state ops (Variable, Read,
// Assign, AssignAdd, AssignSub) are not registered here: they need the
// session's variable storage, which the runtime owns. Placeholder has no
// kernel (the executor feeds it).
void RegisterCpuKernels(KernelRegistry& registry) {
  RegisterElementwiseBinaryKernels(registry);
  RegisterElementwiseUnaryKernels(registry);
  RegisterElementwiseNaryKernels(registry);
  RegisterGraphOpKernels(registry);
  RegisterReductionKernels(registry);
  RegisterMatMulKernels(registry);
  RegisterArrayKernels(registry);
  RegisterNnKernels(registry);
  RegisterIndexedRowsKernels(registry);
}

}  // namespace tdf
