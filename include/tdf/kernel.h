/// \file
/// Kernels compute tensor ops. The executor creates one OpKernel per node when
/// it compiles a graph (so attributes are parsed once, not per firing) and
/// calls Compute once per live firing. Control-flow ops have no kernels: the
/// executor implements them.
///
/// \code
///   class SquareKernel final : public tdf::OpKernel {
///    public:
///     absl::Status Compute(tdf::KernelContext& ctx) override { ... }
///   };
///   tdf::KernelRegistry::Global()->Register("Square", tdf::Device::Type::kCpu,
///       [](const tdf::NodeDef&) -> absl::StatusOr<std::unique_ptr<tdf::OpKernel>> {
///         return std::make_unique<SquareKernel>(); });
/// \endcode
#ifndef TDF_KERNEL_H_
#define TDF_KERNEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tdf/graph.h"
#include "tdf/tensor.h"

namespace tdf {

/// Who runs a kernel, for errors that surface after its Compute returned (a
/// GPU kernel's, found at the next synchronization): the executor's says
/// "node 'x' (Op) at tag [..]".
class KernelSite {
 public:
  /// "node 'x' (Op) at tag [..]".
  virtual std::string Describe() const = 0;
  /// The run the kernel works for (unique per Session::Run in the process;
  /// 0: none), so that errors found later fail that run and no other.
  virtual uint64_t run_id() const = 0;

 protected:
  ~KernelSite() = default;
};

/// What one firing gives a kernel: its inputs, its outputs to set, the
/// device, and the session's state.
class KernelContext {
 public:
  /// Over the executor's arrays (not owned).
  KernelContext(const Tensor* const* inputs, int num_inputs, Tensor* outputs, int num_outputs, Device device)
      : inputs_(inputs), num_inputs_(num_inputs), outputs_(outputs), num_outputs_(num_outputs), device_(device) {}

  /// \name Inputs and outputs
  /// @{

  /// How many data inputs the node has.
  int num_inputs() const { return num_inputs_; }
  int num_outputs() const { return num_outputs_; }
  const Tensor& input(int i) const { return *inputs_[i]; }
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  Tensor& output(int i) { return outputs_[i]; }
  /// @}
  /// The device the kernel runs on.
  Device device() const { return device_; }
  /// Opaque per-device state (the CUDA stream of the run); null on the CPU.
  void* device_context() const { return device_context_; }
  /// Set by the executor.
  void set_device_context(void* c) { device_context_ = c; }
  /// Variable storage of the session (for Read/Assign kernels).
  void* session_state() const { return session_state_; }
  /// Set by the executor.
  void set_session_state(void* s) { session_state_ = s; }
  /// The site's description; "" when the caller set none (a kernel run
  /// outside a Session).
  std::string DescribeSite() const { return site_ != nullptr ? site_->Describe() : std::string(); }
  /// Who runs the kernel; null outside a Session.
  const KernelSite* site() const { return site_; }
  /// Set by the executor.
  void set_site(const KernelSite* site) { site_ = site; }

 private:
  const Tensor* const* inputs_;
  int num_inputs_;
  Tensor* outputs_;
  int num_outputs_;
  Device device_;
  void* device_context_ = nullptr;
  void* session_state_ = nullptr;
  const KernelSite* site_ = nullptr;
};

/// A kernel: created once per node when a graph is compiled, its Compute
/// called once per live firing (possibly from several workers at once).
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  /// Errors need not name the node: the executor adds node, op and tag.
  virtual absl::Status Compute(KernelContext& ctx) = 0;
};

/// Creates a node's kernel (parsing its attributes once).
using KernelFactory = std::function<absl::StatusOr<std::unique_ptr<OpKernel>>(const NodeDef& node)>;

/// Kernel factories by op and device type.
class KernelRegistry {
 public:
  /// The process-wide registry with the built-in CPU (and, in a CUDA build,
  /// GPU) kernels registered on first use.
  static KernelRegistry* Global();

  /// Adds (or replaces) the kernel of `op` on `device`. Thread-safe.
  void Register(const std::string& op, Device::Type device, KernelFactory factory);
  /// Errors (kUnimplemented) naming the node when no kernel exists.
  absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device::Type device) const;
  /// Whether `op` has a kernel on `device`.
  bool Has(const std::string& op, Device::Type device) const;

 private:
  // Session::Create looks a kernel up per node: it reads an immutable,
  // hashed snapshot of the factories without the mutex, rebuilt on the
  // first lookup after a registration (registrations are few and early).
  struct Snapshot;
  const Snapshot* CurrentSnapshot() const;

  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, Device::Type>, std::shared_ptr<const KernelFactory>> factories_
      ABSL_GUARDED_BY(mu_);
  mutable std::atomic<const Snapshot*> snapshot_{nullptr};
  // Snapshots replaced by a registration: a lookup may still be reading
  // one, and the registry lives as long as the process.
  mutable std::vector<std::shared_ptr<const Snapshot>> snapshots_ ABSL_GUARDED_BY(mu_);
};

/// Defined in src/runtime/kernels/; called by KernelRegistry::Global().
void RegisterCpuKernels(KernelRegistry& registry);
/// Defined in src/cuda/ (a no-op in a build without CUDA).
void RegisterCudaKernels(KernelRegistry& registry);

}  // namespace tdf

#endif  // TDF_KERNEL_H_
