#include "tdf/kernel.h"

namespace tdf {
// A build without CUDA registers no GPU kernels.
void RegisterCudaKernels(KernelRegistry&) {}
}  // namespace tdf
