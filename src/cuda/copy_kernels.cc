#include "cuda/copy_kernels.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cuda/device_backend.h"
#include "tdf/status.h"

namespace tdf {
namespace {

class CopyToDeviceKernel final : public OpKernel {
 public:
  explicit CopyToDeviceKernel(Device device) : device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    TDF_ASSIGN_OR_RETURN(std::string name, node.GetString("device"));
    TDF_ASSIGN_OR_RETURN(Device device, Device::Parse(name));
    if (device.type != Device::Type::kCuda)
      return absl::InvalidArgumentError(absl::StrCat("CopyToDevice: attr device '", name, "' is not a CUDA device"));
    return std::unique_ptr<OpKernel>(std::make_unique<CopyToDeviceKernel>(device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    if (ctx.num_inputs() != 1)
      return absl::InvalidArgumentError(absl::StrCat("expects 1 inputs, got ", ctx.num_inputs()));
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return absl::InvalidArgumentError("input 0 is an invalid (empty) tensor");
    if (x.device() == device_) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    Tensor host = x;
    if (!x.device().is_cpu()) {
      // Another GPU: through the host (peer copies are not worth it here).
      TDF_ASSIGN_OR_RETURN(host, Tensor::Empty(x.dtype(), x.shape()));
      TDF_RETURN_IF_ERROR(DeviceBackend::CopyDeviceToHost(host.raw_mutable_data(), x.raw_data(), x.bytes(), x.device()));
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), x.shape(), device_));
    TDF_RETURN_IF_ERROR(DeviceBackend::CopyHostToDeviceAsync(out.raw_mutable_data(), host.raw_data(), host.bytes(), device_));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

class CopyToHostKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    if (ctx.num_inputs() != 1)
      return absl::InvalidArgumentError(absl::StrCat("expects 1 inputs, got ", ctx.num_inputs()));
    const Tensor& x = ctx.input(0);
    if (!x.valid()) return absl::InvalidArgumentError("input 0 is an invalid (empty) tensor");
    if (x.device().is_cpu()) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    // A rank-0 result becomes an inline scalar: the executor's fast paths
    // (and a Switch predicate) want exactly that.
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), x.shape()));
    TDF_RETURN_IF_ERROR(DeviceBackend::CopyDeviceToHost(out.raw_mutable_data(), x.raw_data(), x.bytes(), x.device()));
    // The value is on the host; surface what the kernels that produced it
    // recorded (division by zero, bad Gather index) as a CPU kernel would.
    TDF_RETURN_IF_ERROR(DeviceBackend::Synchronize(x.device(), ctx.site() != nullptr ? ctx.site()->run_id() : 0));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<Tensor> CopyTensorTo(const Tensor& t, Device to) {
  if (!t.valid()) return absl::InvalidArgumentError("cannot copy an invalid (empty) tensor");
  if (t.device() == to) return t;
  Tensor host = t;
  if (!t.device().is_cpu()) {
    TDF_ASSIGN_OR_RETURN(host, Tensor::Empty(t.dtype(), t.shape()));
    TDF_RETURN_IF_ERROR(DeviceBackend::CopyDeviceToHost(host.raw_mutable_data(), t.raw_data(), t.bytes(), t.device()));
    if (to.is_cpu()) return host;
  }
  TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(t.dtype(), t.shape(), to));
  TDF_RETURN_IF_ERROR(DeviceBackend::CopyHostToDevice(out.raw_mutable_data(), host.raw_data(), host.bytes(), to));
  return out;
}

void RegisterCopyKernels(KernelRegistry& registry) {
  registry.Register("CopyToDevice", Device::Type::kCpu,
                    [](const NodeDef& node) { return CopyToDeviceKernel::Create(node); });
  registry.Register("CopyToHost", Device::Type::kCpu,
                    [](const NodeDef&) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
                      return std::unique_ptr<OpKernel>(std::make_unique<CopyToHostKernel>());
                    });
}

}  // namespace tdf
