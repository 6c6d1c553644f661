#include <array>

#include "base/hash_tables.h"
#include "base/sync.h"
#include "absl/strings/str_cat.h"
#include "tdf/kernel.h"

namespace tdf {

// The factories by op, then by device type: found by the node's op as a
// string_view (the std::map's key built a std::string and compared strings
// down a tree, under a mutex, for every node of a Session::Create). A
// base::FlatHashMap: the first Create may build it while allocations fail.
struct KernelRegistry::Snapshot {
  base::FlatHashMap<std::string, std::array<std::shared_ptr<const KernelFactory>, 2>> by_op;
};

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
  factories_[{op, device}] = std::make_shared<const KernelFactory>(std::move(factory));
  // The next lookup builds a snapshot with it; readers of the old one
  // keep it (snapshots_ owns it).
  snapshot_.store(nullptr, std::memory_order_release);
}

bool KernelRegistry::Has(const std::string& op, Device::Type device) const {
  base::MutexLock lock(&mu_);
  return factories_.count({op, device}) > 0;
}

const KernelRegistry::Snapshot* KernelRegistry::CurrentSnapshot() const {
  if (const Snapshot* s = snapshot_.load(std::memory_order_acquire)) return s;
  base::MutexLock lock(&mu_);
  if (const Snapshot* s = snapshot_.load(std::memory_order_acquire)) return s;  // built meanwhile
  auto fresh = std::make_shared<Snapshot>();
  for (const auto& [key, factory] : factories_) {
    const size_t device = static_cast<size_t>(key.second);
    if (device < 2) fresh->by_op[key.first][device] = factory;
  }
  snapshots_.push_back(fresh);
  snapshot_.store(fresh.get(), std::memory_order_release);
  return fresh.get();
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::Create(const NodeDef& node, Device::Type device) const {
  const Snapshot* snapshot = CurrentSnapshot();
  const KernelFactory* factory = nullptr;
  const size_t d = static_cast<size_t>(device);
  if (auto it = snapshot->by_op.find(absl::string_view(node.op)); it != snapshot->by_op.end() && d < 2)
    factory = it->second[d].get();
  if (factory == nullptr)
    return NodeError(node, absl::StatusCode::kUnimplemented,
                     absl::StrCat("no ", device == Device::Type::kCpu ? "CPU" : "CUDA", " kernel for op ", node.op));
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = (*factory)(node);
  if (!kernel.ok()) return WithNodeLabel(node, kernel.status());
  return kernel;
}

}  // namespace tdf
