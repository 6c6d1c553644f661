#include "runtime/state_kernels.h"
#include "base/sync.h"

#include <type_traits>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "cuda/copy_kernels.h"
#include "cuda/device_backend.h"
#include "tdf/status.h"

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

enum class StateOp { kRead, kAssign, kAssignAdd, kAssignSub, kScatterAdd };

// dst = a +/- b over n elements (dst may be a). Integers wrap (two's
// complement) as the elementwise kernels do; floats go through Eigen, which
// vectorizes.
template <typename T>
void Combine(T* dst, const T* a, const T* b, int64_t n, bool subtract) {
  if constexpr (std::is_floating_point_v<T>) {
    using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
    Eigen::Map<Arr> d(dst, n);
    Eigen::Map<const Arr> x(a, n), y(b, n);
    if (subtract) {
      d = x - y;
    } else {
      d = x + y;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<T>(subtract ? static_cast<U>(a[i]) - static_cast<U>(b[i])
                                       : static_cast<U>(a[i]) + static_cast<U>(b[i]));
  }
}

// The tensor an update of `var` writes into: the variable's own buffer when
// nothing else shares it (no Read's value, fetch or earlier output is alive:
// the caller holds the variable's lock, so no new copy can appear), else a
// fresh one (`copy`: initialized with the current value). Values already
// handed out never change.
absl::StatusOr<Tensor> UpdateTarget(VariableSlot& var, bool copy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
  if (!var.value.is_inline_scalar() && var.value.device().is_cpu() && var.value.RefCountIsOne()) return var.value;
  if (copy) {
    Tensor t = var.value.Clone();
    if (!t.valid()) return absl::ResourceExhaustedError(absl::StrCat("cannot copy variable '", var.name, "'"));
    return t;
  }
  return Tensor::Empty(var.dtype, var.value.shape());
}

// Runs `op`'s kernel for `device` once on `inputs` (on that device) and
// returns its output: a GPU variable's update is an ordinary GPU kernel,
// queued on the device's stream behind whatever produced its operands and
// ahead of whatever reads the new value.
absl::StatusOr<Tensor> RunDeviceKernel(const char* op, std::vector<const Tensor*> inputs, Device device,
                                       AttrMap attrs = {}) {
  NodeDef node;
  node.name = op;
  node.op = op;
  node.device = device.ToString();
  node.attr = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) node.input.push_back(absl::StrCat("in", i));
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, KernelRegistry::Global()->Create(node, device.type));
  Tensor out;
  KernelContext ctx(inputs.data(), static_cast<int>(inputs.size()), &out, 1, device);
  ctx.set_device_context(DeviceBackend::Stream(device));
  TDF_RETURN_IF_ERROR(kernel->Compute(ctx));
  return out;
}

// var[indices[j], ...] += updates[j, ...] along axis 0 (repeats accumulate).
template <typename T, typename I>
absl::Status ScatterAddRows(VariableSlot& var, const Tensor& indices, const Tensor& updates, KernelContext& ctx)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
  const Shape& vs = var.value.shape();
  const int64_t rows = vs.dim(0);
  const int64_t row_size = rows == 0 ? 0 : var.value.num_elements() / rows;
  const I* idx = indices.data<I>();
  const int64_t count = indices.num_elements();
  for (int64_t j = 0; j < count; ++j) {
    if (idx[j] < 0 || idx[j] >= rows)
      return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: index ", idx[j], " (at position ", j,
                                                     ") is out of range [0, ", rows, ") for variable '", var.name,
                                                     "' of shape ", vs.DebugString()));
  }
  TDF_ASSIGN_OR_RETURN(Tensor out, UpdateTarget(var, /*copy=*/true));
  T* dst = out.mutable_data<T>();
  const T* src = updates.data<T>();
  for (int64_t j = 0; j < count; ++j) {
    T* row = dst + static_cast<int64_t>(idx[j]) * row_size;
    Combine<T>(row, row, src + j * row_size, row_size, /*subtract=*/false);
  }
  var.value = out;
  ctx.set_output(0, std::move(out));
  return absl::OkStatus();
}

class StateKernel final : public OpKernel {
 public:
  StateKernel(StateOp op, DType dtype) : op_(op), dtype_(dtype) {}

  absl::Status Compute(KernelContext& ctx) override {
    const int arity = op_ == StateOp::kRead ? 1 : op_ == StateOp::kScatterAdd ? 3 : 2;
    if (ctx.num_inputs() != arity)
      return absl::InvalidArgumentError(absl::StrCat("expects ", arity, " inputs, got ", ctx.num_inputs()));
    auto* store = static_cast<VariableStore*>(ctx.session_state());
    const Tensor& h = ctx.input(0);
    if (store == nullptr || h.dtype() != DType::kInt64 || !h.is_inline_scalar())
      return absl::InvalidArgumentError("input 0 is not a variable handle");
    const int64_t handle = h.scalar<int64_t>();
    if (handle < 0 || handle >= static_cast<int64_t>(store->slots.size()))
      return absl::InvalidArgumentError(absl::StrCat("invalid variable handle ", handle));
    VariableSlot& var = *store->slots[handle];
    // Validation checks the attr against the Variable only where it can
    // trace the handle back to one; a handle fed through a Placeholder (or
    // arriving through a Merge or a call) is checked here, so that the
    // output always has the dtype the graph's type inference gave it.
    if (var.dtype != dtype_)
      return absl::InvalidArgumentError(absl::StrCat("variable '", var.name, "' is ", DTypeName(var.dtype),
                                                     ", attr dtype is ", DTypeName(dtype_)));
    base::MutexLock lock(&var.mu);
    if (op_ == StateOp::kRead) {
      ctx.set_output(0, var.value);
      return absl::OkStatus();
    }
    if (op_ == StateOp::kScatterAdd) return ScatterAdd(var, ctx);
    if (!ctx.input(1).valid()) return absl::InvalidArgumentError("input 1 is an invalid (empty) tensor");
    if (ctx.input(1).dtype() != var.dtype)
      return absl::InvalidArgumentError(absl::StrCat("variable '", var.name, "' is ", DTypeName(var.dtype),
                                                     ", value is ", DTypeName(ctx.input(1).dtype())));
    // The value comes to the variable's device (the placement pass inserts
    // no copies for state ops: a GPU variable takes GPU values as they are).
    TDF_ASSIGN_OR_RETURN(const Tensor v, CopyTensorTo(ctx.input(1), var.device));
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
    if (!var.value.device().is_cpu()) {
      TDF_ASSIGN_OR_RETURN(Tensor out, RunDeviceKernel(op_ == StateOp::kAssignSub ? "Sub" : "Add", {&var.value, &v},
                                                       var.value.device()));
      var.value = out;
      ctx.set_output(0, std::move(out));
      return absl::OkStatus();
    }
    absl::StatusOr<Tensor> out = UpdateTarget(var, /*copy=*/false);
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
  // ScatterAdd(handle, indices, updates): the sparse update of a Gather's
  // gradient, touching only the gathered rows.
  static absl::Status ScatterAdd(VariableSlot& var, KernelContext& ctx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    if (!ctx.input(1).valid() || !ctx.input(2).valid())
      return absl::InvalidArgumentError("ScatterAdd: indices and updates must be valid tensors");
    // Updates go where the variable is. A host variable's indices are
    // range-checked on the host; a GPU variable's on the device (the check
    // and the update queue behind each other, no wait), so host indices
    // stay where they are.
    const bool on_device = !var.device.is_cpu();
    TDF_ASSIGN_OR_RETURN(const Tensor indices,
                         on_device && (ctx.input(1).device().is_cpu() || ctx.input(1).device() == var.device)
                             ? absl::StatusOr<Tensor>(ctx.input(1))
                             : CopyTensorTo(ctx.input(1), Device::Cpu()));
    TDF_ASSIGN_OR_RETURN(const Tensor updates, CopyTensorTo(ctx.input(2), var.device));
    if (var.dtype != DType::kFloat32 && var.dtype != DType::kFloat64 && var.dtype != DType::kInt32 &&
        var.dtype != DType::kInt64)
      return absl::InvalidArgumentError(
          absl::StrCat("ScatterAdd: variable '", var.name, "' is ", DTypeName(var.dtype), ", not numeric"));
    if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32)
      return absl::InvalidArgumentError(
          absl::StrCat("ScatterAdd: indices must be int32 or int64, got ", DTypeName(indices.dtype())));
    if (updates.dtype() != var.dtype)
      return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: variable '", var.name, "' is ",
                                                     DTypeName(var.dtype), ", updates are ",
                                                     DTypeName(updates.dtype())));
    if (!var.value.valid() || var.value.rank() == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("ScatterAdd: variable '", var.name, "' must have rank >= 1, has shape ",
                       var.value.valid() ? var.value.shape().DebugString() : std::string("(none)")));
    Shape want;
    for (int64_t d : indices.shape().dims()) want.AddDim(d);
    for (int d = 1; d < var.value.rank(); ++d) want.AddDim(var.value.shape().dim(d));
    if (updates.shape() != want)
      return absl::InvalidArgumentError(absl::StrCat("ScatterAdd: updates have shape ", updates.shape().DebugString(),
                                                     ", indices ", indices.shape().DebugString(), " into variable '",
                                                     var.name, "' of shape ", var.value.shape().DebugString(),
                                                     " need ", want.DebugString()));
    if (on_device) {
      TDF_ASSIGN_OR_RETURN(Tensor out, DeviceBackend::ScatterAddRows(var.value, indices, updates, ctx));
      var.value = out;
      ctx.set_output(0, std::move(out));
      return absl::OkStatus();
    }
    absl::Status status;
    DispatchDType(var.dtype, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!std::is_same_v<T, bool>) {
        status = indices.dtype() == DType::kInt64 ? ScatterAddRows<T, int64_t>(var, indices, updates, ctx)
                                                  : ScatterAddRows<T, int32_t>(var, indices, updates, ctx);
      }
    });
    return status;
  }

  const StateOp op_;
  const DType dtype_;  // attr dtype
};

}  // namespace

bool IsStateOp(const std::string& op) {
  // string_views: compared by length first (every kernel node of a
  // Session::Create asks).
  const absl::string_view o = op;
  return o == "Read" || o == "Assign" || o == "AssignAdd" || o == "AssignSub" || o == "ScatterAdd";
}

std::unique_ptr<OpKernel> MakeVariableHandleKernel(int32_t handle) {
  return std::make_unique<VariableHandleKernel>(handle);
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeStateKernel(const NodeDef& node) {
  StateOp op;
  if (node.op == "Read") {
    op = StateOp::kRead;
  } else if (node.op == "Assign") {
    op = StateOp::kAssign;
  } else if (node.op == "AssignAdd") {
    op = StateOp::kAssignAdd;
  } else if (node.op == "AssignSub") {
    op = StateOp::kAssignSub;
  } else if (node.op == "ScatterAdd") {
    op = StateOp::kScatterAdd;
  } else {
    return NodeError(node, absl::StatusCode::kInternal, "not a state op");
  }
  TDF_ASSIGN_OR_RETURN(DType dtype, node.GetType("dtype"));
  return std::unique_ptr<OpKernel>(std::make_unique<StateKernel>(op, dtype));
}

}  // namespace runtime
}  // namespace tdf
