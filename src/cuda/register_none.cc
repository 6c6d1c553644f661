// Kernel registration of a build without CUDA: no GPU kernels, but the
// host-side copy kernels exist so that a graph with copy nodes still
// compiles (they fail with a clear Status if they ever run).
#include "cuda/copy_kernels.h"
#include "tdf/kernel.h"

namespace tdf {
void RegisterCudaKernels(KernelRegistry& registry) { RegisterCopyKernels(registry); }
}  // namespace tdf
