#include "runtime/state_kernels.h"
#include "base/sync.h"

#include "absl/strings/str_cat.h"

namespace tdf {
namespace runtime {
namespace {

class VariableHandleKernel final : public OpKernel {
 public:
  explicit VariableHandleKernel(int32_t handle) : handle_(handle) {}
  absl::Status Compute(KernelContext& ctx) override {
    ctx.set_output(0, Tensor::Scalar<int64_t>(handle_));
    return absl::OkStatus();
  }

 private:
  int64_t handle_;
};

enum class StateOp { kRead, kAssign, kAssignAdd, kAssignSub };

template <typename T>
void Combine(T* dst, const T* a, const T* b, int64_t n, bool subtract) {
  for (int64_t i = 0; i < n; ++i) dst[i] = subtract ? static_cast<T>(a[i] - b[i]) : static_cast<T>(a[i] + b[i]);
}

class StateKernel final : public OpKernel {
 public:
  explicit StateKernel(StateOp op) : op_(op) {}

  absl::Status Compute(KernelContext& ctx) override {
    auto* store = static_cast<VariableStore*>(ctx.session_state());
    const Tensor& h = ctx.input(0);
    if (store == nullptr || h.dtype() != DType::kInt64 || !h.is_inline_scalar())
      return absl::InvalidArgumentError("input 0 is not a variable handle");
    const int64_t handle = h.scalar<int64_t>();
    if (handle < 0 || handle >= static_cast<int64_t>(store->slots.size()))
      return absl::InvalidArgumentError(absl::StrCat("invalid variable handle ", handle));
    VariableSlot& var = *store->slots[handle];
    base::MutexLock lock(&var.mu);
    if (op_ == StateOp::kRead) {
      ctx.set_output(0, var.value);
      return absl::OkStatus();
    }
    const Tensor& v = ctx.input(1);
    if (v.dtype() != var.dtype)
      return absl::InvalidArgumentError(absl::StrCat("variable '", var.name, "' is ", DTypeName(var.dtype),
                                                     ", value is ", DTypeName(v.dtype())));
    if (op_ == StateOp::kAssign) {
      var.value = v;
      ctx.set_output(0, v);
      return absl::OkStatus();
    }
    if (v.shape() != var.value.shape())
      return absl::InvalidArgumentError(absl::StrCat("variable '", var.name, "' has shape ",
                                                     var.value.shape().DebugString(), ", update has shape ",
                                                     v.shape().DebugString()));
    if (var.dtype == DType::kBool) return absl::InvalidArgumentError("cannot add to a bool variable");
    absl::StatusOr<Tensor> out = Tensor::Empty(var.dtype, var.value.shape());
    if (!out.ok()) return out.status();
    const bool subtract = op_ == StateOp::kAssignSub;
    DispatchDType(var.dtype, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!std::is_same_v<T, bool>) {
        Combine<T>(out->template mutable_data<T>(), var.value.template data<T>(), v.template data<T>(),
                   v.num_elements(), subtract);
      }
    });
    var.value = *out;
    ctx.set_output(0, *std::move(out));
    return absl::OkStatus();
  }

 private:
  StateOp op_;
};

}  // namespace

bool IsStateOp(const std::string& op) {
  return op == "Read" || op == "Assign" || op == "AssignAdd" || op == "AssignSub";
}

std::unique_ptr<OpKernel> MakeVariableHandleKernel(int32_t handle) {
  return std::make_unique<VariableHandleKernel>(handle);
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeStateKernel(const NodeDef& node) {
  if (node.op == "Read") return std::unique_ptr<OpKernel>(std::make_unique<StateKernel>(StateOp::kRead));
  if (node.op == "Assign") return std::unique_ptr<OpKernel>(std::make_unique<StateKernel>(StateOp::kAssign));
  if (node.op == "AssignAdd") return std::unique_ptr<OpKernel>(std::make_unique<StateKernel>(StateOp::kAssignAdd));
  if (node.op == "AssignSub") return std::unique_ptr<OpKernel>(std::make_unique<StateKernel>(StateOp::kAssignSub));
  return NodeError(node, absl::StatusCode::kInternal, "not a state op");
}

}  // namespace runtime
}  // namespace tdf
