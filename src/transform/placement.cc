// The placement pass (tdf/placement.h).
#include "tdf/placement.h"

#include <atomic>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/device_memory.h"
#include "base/hash_tables.h"
#include "tdf/op_registry.h"
#include "tdf/status.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

// The ops registered by RegisterCudaKernels (src/cuda/*.cu). A test checks
// that each has a CUDA kernel in a CUDA build.
const base::FlatHashSet<std::string>& GpuOps() {
  static const auto* const ops = new base::FlatHashSet<std::string>{
      "Add", "Sub", "Mul", "Div", "Mod", "Maximum", "Minimum", "Pow", "TanhGrad", "SigmoidGrad", "ReluGrad",
      "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
      "Neg", "Abs", "Square", "Sign", "Exp", "Log", "Tanh", "Sigmoid", "Relu", "Sqrt", "Rsqrt", "Reciprocal",
      "LogicalNot", "Cast", "AddN", "Select", "Const", "Identity", "ZerosLike", "OnesLike",
      "Sum", "Mean", "Max", "SumToShapeOf", "Softmax", "SoftmaxCrossEntropy",
      "Reshape", "ReshapeLike", "Transpose", "Concat", "Slice", "Gather", "BroadcastTo", "MatMul",
      "ConcatGrad", "SliceGrad", "GatherGrad", "MatMulAdd",
      "IndexedRows", "IndexedRowsConcat", "IndexedRowsSum", "IndexedRowsSplit", "OuterRowsConcat", "OuterRowsSum"};
  return *ops;
}

// Where a value lives, as far as the graph says.
struct ValueDevice {
  enum Kind { kHost, kGpu, kUnknown } kind;
  int index = 0;
};

// Send and Recv are host nodes: a Send of a device value gets a CopyToHost
// in front (only host bytes cross ranks), a Recv's value is on the host.
bool IsControlFlow(OpKind kind) {
  return kind != OpKind::kKernel && kind != OpKind::kVariable && kind != OpKind::kSend && kind != OpKind::kRecv;
}

// The ops that read or update a variable. They run on the host and take
// their value inputs from any device (a GPU variable's update is a GPU
// kernel, a host variable's a host one; runtime/state_kernels.cc copies what
// is elsewhere), and a Read's value is wherever its variable lives.
bool IsStateOp(const std::string& op) {
  return op == "Read" || op == "Assign" || op == "AssignAdd" || op == "AssignSub" || op == "ScatterAdd";
}

std::string CopyName(const std::string& producer_ref, const std::string& suffix,
                     const base::FlatHashSet<std::string>& taken) {
  std::string base = absl::StrCat(absl::StrReplaceAll(producer_ref, {{":", "_"}}), "/", suffix);
  std::string name = base;
  for (int i = 1; taken.contains(name); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

class BodyPlacer {
 public:
  BodyPlacer(std::vector<NodeDef>& nodes, const PlacementOptions& options, PlacementReport& report)
      : nodes_(nodes), options_(options), report_(report) {}

  // Step 1 for one body. `function` is the body's function (null for the
  // main graph), for the dtypes of its Args.
  absl::Status AutoPlace(const FunctionDef* function, const FunctionLibrary& library) {
    // Producers of predicates stay on the host.
    base::FlatHashSet<std::string> predicate_producers;
    for (const NodeDef& n : nodes_) {
      int pred_input = -1;
      if (n.op == "Switch") pred_input = 1;
      if (n.op == "LoopCond") pred_input = 0;
      if (pred_input < 0 || pred_input >= n.num_data_inputs()) continue;
      TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(n.input[pred_input]));
      predicate_producers.insert(ref.node);
    }
    // Integer and boolean work on integer and boolean values (index
    // arithmetic, a tree's child indices) stays on the host, as TensorFlow
    // keeps int32 in host memory: on the GPU each such scalar would cost a
    // launch, and every predicate or Gather index derived from it a copy
    // back with a host synchronization.
    TDF_ASSIGN_OR_RETURN(std::vector<std::vector<DType>> types, InferOutputTypes(nodes_, function, library));
    base::FlatHashMap<std::string, int> index;
    for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].name] = static_cast<int>(i);
    auto host_typed = [&](size_t i) -> absl::StatusOr<bool> {
      for (DType t : types[i])
        if (IsFloating(t)) return false;
      const NodeDef& n = nodes_[i];
      for (int k = 0; k < n.num_data_inputs(); ++k) {
        TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(n.input[k]));
        auto it = index.find(ref.node);
        if (it == index.end() || ref.port < 0 || ref.port >= static_cast<int>(types[it->second].size())) return false;
        if (IsFloating(types[it->second][ref.port])) return false;
      }
      return true;
    };
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeDef& n = nodes_[i];
      // A node that names only its rank ("rank:1") is placed on that rank's
      // GPU like an unplaced one.
      absl::StatusOr<DeviceName> name = DeviceName::Parse(n.device);
      if (!name.ok() || name->has_device) continue;
      DeviceName gpu_name = *name;
      gpu_name.has_device = true;
      gpu_name.device = Device::Cuda(options_.gpu_index);
      const std::string gpu = gpu_name.ToString();
      // A floating-point variable lives on the GPU, so a training step
      // neither copies the parameters in nor the updates out.
      if (n.op == "Variable") {
        absl::StatusOr<DType> dtype = n.GetType("dtype");
        if (dtype.ok() && IsFloating(*dtype)) n.device = gpu;
        continue;
      }
      const OpSchema* schema = OpRegistry::Global()->Find(n.op);
      if (schema == nullptr || schema->kind() != OpKind::kKernel || schema->stateful()) continue;
      if (!GpuOps().contains(n.op) || predicate_producers.contains(n.name)) continue;
      TDF_ASSIGN_OR_RETURN(bool on_host, host_typed(i));
      if (on_host) continue;
      n.device = gpu;
    }
    return absl::OkStatus();
  }

  // Parses every device; returns the first GPU node (or null).
  absl::StatusOr<const NodeDef*> CheckDevices(int* gpu_nodes) {
    const NodeDef* first = nullptr;
    for (const NodeDef& n : nodes_) {
      absl::StatusOr<Device> d = Device::Parse(n.device);
      if (!d.ok()) return NodeError(n, absl::StatusCode::kInvalidArgument, d.status().message());
      if (d->type == Device::Type::kCuda) {
        ++*gpu_nodes;
        if (first == nullptr) first = &n;
      }
    }
    return first;
  }

  // Keeps the rank: "rank:1/cuda:0" becomes "rank:1/cpu".
  void RewriteToCpu() {
    for (NodeDef& n : nodes_) {
      absl::StatusOr<DeviceName> d = DeviceName::Parse(n.device);
      if (!d.ok() || d->device.type != Device::Type::kCuda) continue;
      d->device = Device::Cpu();
      n.device = d->ToString();
    }
  }

  // Step 3 for one body.
  absl::Status InsertCopies() {
    base::FlatHashMap<std::string, int> index;
    base::FlatHashSet<std::string> taken;
    bool any_gpu = false;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      index[nodes_[i].name] = static_cast<int>(i);
      taken.insert(nodes_[i].name);
      absl::StatusOr<Device> d = Device::Parse(nodes_[i].device);
      any_gpu |= d.ok() && d->type == Device::Type::kCuda;
    }
    if (!any_gpu) return absl::OkStatus();

    auto value_device = [&](const std::string& producer) -> ValueDevice {
      auto it = index.find(producer);
      if (it == index.end()) return {ValueDevice::kUnknown};
      const NodeDef& p = nodes_[it->second];
      if (p.op == "CopyToHost") return {ValueDevice::kHost};
      if (IsStateOp(p.op)) return {ValueDevice::kUnknown};
      if (p.op == "Variable") return {ValueDevice::kHost};  // a handle, whatever the value's device
      if (p.op == "CopyToDevice") {
        absl::StatusOr<std::string> name = p.GetString("device");
        absl::StatusOr<Device> d = name.ok() ? Device::Parse(*name) : absl::StatusOr<Device>(name.status());
        return d.ok() ? ValueDevice{ValueDevice::kGpu, d->index} : ValueDevice{ValueDevice::kUnknown};
      }
      const OpSchema* schema = OpRegistry::Global()->Find(p.op);
      if (schema != nullptr && IsControlFlow(schema->kind())) return {ValueDevice::kUnknown};
      absl::StatusOr<Device> d = Device::Parse(p.device);
      if (d.ok() && d->type == Device::Type::kCuda) return {ValueDevice::kGpu, d->index};
      return {ValueDevice::kHost};
    };

    auto producer_rank = [&](const std::string& producer) {
      auto it = index.find(producer);
      if (it == index.end()) return DeviceName::kAnyRank;
      absl::StatusOr<DeviceName> d = DeviceName::Parse(nodes_[it->second].device);
      return d.ok() ? d->rank : DeviceName::kAnyRank;
    };

    // (producer ref, target) -> copy node name. Target "host", or the device
    // with its rank ("cuda:0", "rank:1/cuda:0").
    std::map<std::pair<std::string, std::string>, std::string> copies;
    std::vector<NodeDef> added;
    const size_t original = nodes_.size();
    for (size_t i = 0; i < original; ++i) {
      NodeDef& n = nodes_[i];
      const OpSchema* schema = OpRegistry::Global()->Find(n.op);
      if (schema == nullptr) continue;
      // A copy takes its input from any device; without this a second pass
      // (a placed graph given to a Session) would put a real device -> host
      // round trip in front of every copy of a control-flow value.
      if (n.op == "CopyToHost" || n.op == "CopyToDevice" || IsStateOp(n.op)) continue;
      absl::StatusOr<DeviceName> dst_name = DeviceName::Parse(n.device);
      if (!dst_name.ok()) continue;
      const Device* dst = &dst_name->device;
      const bool dst_gpu = dst->type == Device::Type::kCuda;
      const int num_data = n.num_data_inputs();
      for (int k = 0; k < num_data; ++k) {
        // Control-flow primitives move tokens on any device, except that a
        // Switch reads its predicate on the host.
        if (IsControlFlow(schema->kind()) && !(schema->kind() == OpKind::kSwitch && k == 1)) continue;
        TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(n.input[k]));
        const ValueDevice src = value_device(ref.node);
        // Across ranks (design.md §8) a device value is copied to the host
        // on its producer's rank, so that host bytes cross the wire, and a
        // host value to a device on its consumer's rank (that rank's GPU).
        // The target names the rank too: one copy per rank and device.
        std::string target;
        DeviceName copy_device;
        copy_device.has_device = true;  // cpu: copies are host nodes
        if (dst_gpu) {
          if (src.kind == ValueDevice::kGpu && src.index == dst->index) continue;
          copy_device.rank = dst_name->rank;
          DeviceName gpu = copy_device;
          gpu.device = *dst;
          target = gpu.ToString();
        } else {
          if (src.kind == ValueDevice::kHost) continue;
          target = "host";
          copy_device.rank = producer_rank(ref.node);
        }
        const std::string producer_ref = n.input[k];
        auto [it, inserted] = copies.try_emplace({producer_ref, target}, "");
        if (inserted) {
          NodeDef copy;
          copy.name = CopyName(producer_ref, target == "host" ? "_to_host" : absl::StrCat("_to_", absl::StrReplaceAll(target, {{":", ""}, {"/", "_"}})),
                               taken);
          taken.insert(copy.name);
          copy.input.push_back(producer_ref);
          copy.device = copy_device.ToString();
          if (target == "host") {
            copy.op = "CopyToHost";
            ++report_.copies_to_host;
          } else {
            copy.op = "CopyToDevice";
            copy.attr["device"] = dst->ToString();
            ++report_.copies_to_device;
          }
          // A sourceless-body marker is not needed: the copy has an input.
          it->second = copy.name;
          added.push_back(std::move(copy));
        }
        n.input[k] = it->second;
      }
    }
    for (NodeDef& c : added) nodes_.push_back(std::move(c));
    return absl::OkStatus();
  }

 private:
  std::vector<NodeDef>& nodes_;
  const PlacementOptions& options_;
  PlacementReport& report_;
};

void LogFallbackOnce(const std::string& reason) {
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  std::string why = reason;
  constexpr absl::string_view kPrefix = "no CUDA device: ";
  if (absl::StartsWith(why, kPrefix)) why = why.substr(kPrefix.size());
  std::fprintf(stderr, "tdf: no CUDA device (%s); running on the CPU\n", why.c_str());
}

class PlacementPass final : public GraphPass {
 public:
  explicit PlacementPass(PlacementOptions options) : options_(options) {}
  absl::string_view name() const override { return "placement"; }
  absl::Status Run(Graph& graph) override { return PlaceDevices(graph, options_); }

 private:
  const PlacementOptions options_;
};

}  // namespace

bool IsGpuPlaceableOp(absl::string_view op) { return GpuOps().contains(std::string(op)); }

absl::Status PlaceDevices(Graph& graph, const PlacementOptions& options, PlacementReport* report) {
  if (options.gpu_index < 0)
    return absl::InvalidArgumentError(absl::StrCat("placement: gpu_index must be >= 0, got ", options.gpu_index));
  PlacementReport local;
  PlacementReport& r = report != nullptr ? *report : local;
  r = PlacementReport{};

  std::vector<std::vector<NodeDef>*> bodies = {&graph.node};
  std::vector<FunctionDef> functions;
  for (const auto& [name, fn] : graph.library.functions()) functions.push_back(fn);
  for (FunctionDef& fn : functions) bodies.push_back(&fn.node);

  if (options.place_tensor_ops_on_gpu) {
    TDF_RETURN_IF_ERROR(BodyPlacer(graph.node, options, r).AutoPlace(nullptr, graph.library));
    for (FunctionDef& fn : functions) {
      // A declared-only function has no body to place.
      if (fn.defined) TDF_RETURN_IF_ERROR(BodyPlacer(fn.node, options, r).AutoPlace(&fn, graph.library));
    }
  }
  int gpu_nodes = 0;
  int max_index = -1;
  for (auto* body : bodies) {
    TDF_RETURN_IF_ERROR(BodyPlacer(*body, options, r).CheckDevices(&gpu_nodes).status());
    for (const NodeDef& n : *body) {
      absl::StatusOr<Device> d = Device::Parse(n.device);
      if (d.ok() && d->type == Device::Type::kCuda && d->index > max_index) max_index = d->index;
    }
  }
  if (gpu_nodes > 0) {
    const int count =
        options.device_count_override >= 0 ? options.device_count_override : device_memory::DeviceCount();
    if (max_index >= count) {
      const std::string reason = count == 0 ? device_memory::Describe()
                                            : absl::StrCat("cuda:", max_index, " does not exist (",
                                                           device_memory::Describe(), ")");
      if (!options.fallback_to_cpu) {
        // Find the first node on a missing device, for the message.
        for (auto* body : bodies) {
          for (const NodeDef& n : *body) {
            absl::StatusOr<Device> d = Device::Parse(n.device);
            if (d.ok() && d->type == Device::Type::kCuda && d->index >= count)
              return NodeError(n, absl::StatusCode::kFailedPrecondition,
                               absl::StrCat("placed on ", d->ToString(), " but ", reason,
                                            " (set fallback_to_cpu to run it on the CPU)"));
          }
        }
      }
      for (auto* body : bodies) BodyPlacer(*body, options, r).RewriteToCpu();
      r.fell_back_to_cpu = true;
      r.fallback_reason = reason;
      LogFallbackOnce(reason);
      gpu_nodes = 0;
    }
  }
  r.gpu_nodes = gpu_nodes;
  for (auto* body : bodies) TDF_RETURN_IF_ERROR(BodyPlacer(*body, options, r).InsertCopies());
  for (FunctionDef& fn : functions) graph.library.Put(std::move(fn));
  return absl::OkStatus();
}

std::unique_ptr<GraphPass> CreatePlacementPass(PlacementOptions options) {
  return std::make_unique<PlacementPass>(options);
}

}  // namespace tdf
