// Which nodes batch (batch_plan.h).
#include "runtime/batching/batch_plan.h"

namespace tdf {
namespace runtime {
namespace batching {

std::unique_ptr<BatchPlan> BatchPlan::Create(const ExecutableGraph& exe, const SessionOptions& options) {
  if (!options.batching || options.batch_max_size < 2) return nullptr;
  auto plan = std::unique_ptr<BatchPlan>(new BatchPlan());
  plan->rules_.resize(exe.nodes.size());
  plan->max_batch_ = options.batch_max_size;
  plan->max_deferral_ = options.batch_max_deferral;
  bool any = false;
  for (size_t id = 0; id < exe.nodes.size(); ++id) {
    const ExecNode& n = exe.nodes[id];
    const NodeInfo& info = exe.info[id];
    if (n.kind != NodeKind::kKernel || n.is_const || n.block == 0 || info.kernel == nullptr ||
        !info.device.is_cpu() || info.def == nullptr || n.num_data_inputs == 0)
      continue;
    std::optional<BatchRule> rule = RuleFor(*info.def);
    if (!rule) continue;
    plan->rules_[id] = std::make_unique<BatchRule>(std::move(*rule));
    any = true;
  }
  if (!any) return nullptr;
  return plan;
}

}  // namespace batching
}  // namespace runtime
}  // namespace tdf
