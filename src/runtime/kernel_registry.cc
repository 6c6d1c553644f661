#include "base/sync.h"
#include "absl/strings/str_cat.h"
#include "tdf/kernel.h"

namespace tdf {

KernelRegistry* KernelRegistry::Global() {
  static KernelRegistry* const registry = [] {
    auto* r = new KernelRegistry;
    RegisterCpuKernels(*r);
    RegisterCudaKernels(*r);
    return r;
  }();
  return registry;
}

void KernelRegistry::Register(const std::string& op, Device::Type device, KernelFactory factory) {
  base::MutexLock lock(&mu_);
  factories_[{op, device}] = std::move(factory);
}

bool KernelRegistry::Has(const std::string& op, Device::Type device) const {
  base::MutexLock lock(&mu_);
  return factories_.count({op, device}) > 0;
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::Create(const NodeDef& node, Device::Type device) const {
  KernelFactory factory;
  {
    base::MutexLock lock(&mu_);
    auto it = factories_.find({node.op, device});
    if (it == factories_.end())
      return NodeError(node, absl::StatusCode::kUnimplemented,
                       absl::StrCat("no ", device == Device::Type::kCpu ? "CPU" : "CUDA", " kernel for op ", node.op));
    factory = it->second;
  }
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = factory(node);
  if (!kernel.ok()) return WithNodeLabel(node, kernel.status());
  return kernel;
}

}  // namespace tdf
