#include "tdf/kernel.h"

namespace tdf {
// Filled in by the CPU kernel files (one Register*Kernels per file).
void RegisterCpuKernels(KernelRegistry& registry) {}
}  // namespace tdf
