#include "tdf/session.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/hash_tables.h"
#include "base/sync.h"
#include "cuda/copy_kernels.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/frame.h"
#include "runtime/out_of_memory.h"
#include "runtime/session_access.h"
#include "runtime/state_kernels.h"
#include "tdf/placement.h"
#include "tdf/serialize.h"
#include "tdf/status.h"
#include "tdf/transform.h"
#include "tdf/validate.h"
#include "transform/staticize_recursion.h"

namespace tdf {

class Session::Impl {
 public:
  std::unique_ptr<runtime::ExecutableGraph> exe;
  runtime::VariableStore variables;
  std::unique_ptr<runtime::Executor> executor;
};

namespace {

// Sessions alive in the process: the last one to go empties the frame
// caches, which only runs of a session can use.
std::atomic<int64_t> live_sessions{0};

// Calls `f`; out of memory, RESOURCE_EXHAUSTED instead of the process's end
// (issue #26, item 4). The executor fails a run that runs out naming the
// node; this catches the rest: compiling a graph (a 10^6-node chain takes
// about 1 GB), copying a run's request, its statistics.
template <typename F>
auto OrOutOfMemory(const char* what, F&& f) -> decltype(f()) {
  runtime::KeepMemoryReserve();  // again, if the last failure took it
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return runtime::OutOfMemoryError([what] { return absl::StrCat(what, ": out of memory (std::bad_alloc)"); });
  }
}

}  // namespace

Session::Session(SessionOptions options, std::unique_ptr<Impl> impl)
    : options_(std::move(options)), impl_(std::move(impl)) {
  live_sessions.fetch_add(1, std::memory_order_relaxed);
}

Session::~Session() {
  // The executor waits until the frames of its failed runs are freed
  // (runtime/frame_reclaimer.h); then the memory policy of session.h.
  impl_.reset();
  runtime::ReleaseFrameMemory(/*empty_caches=*/live_sessions.fetch_sub(1, std::memory_order_acq_rel) == 1);
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const Graph& graph, SessionOptions options) {
  return OrOutOfMemory("Session::Create", [&] { return CreateFrom(graph, nullptr, std::move(options)); });
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(Graph&& graph, SessionOptions options) {
  return OrOutOfMemory("Session::Create", [&] { return CreateFrom(graph, &graph, std::move(options)); });
}

absl::StatusOr<std::unique_ptr<Session>> Session::CreateFrom(const Graph& graph, Graph* owned,
                                                             SessionOptions options) {
  if (options.num_workers < 1 || options.num_workers > SessionOptions::kMaxWorkers)
    return absl::InvalidArgumentError(absl::StrCat("num_workers must be in [1, ", SessionOptions::kMaxWorkers,
                                                   "], got ", options.num_workers));
  if (options.batch_max_size < 1 || options.batch_max_deferral < 1)
    return absl::InvalidArgumentError(absl::StrCat("batch_max_size and batch_max_deferral must be >= 1, got ",
                                                   options.batch_max_size, " and ", options.batch_max_deferral));
  TDF_RETURN_IF_ERROR(Validate(graph));
  auto impl = std::make_unique<Impl>();
  // A copy only where nothing else makes one: a 10^6-node graph is 250 MB.
  // A main graph without calls (a loop, an unrolled computation: the large
  // ones) is its own transformation, its library never runs: the nodes are
  // taken as they are, without the transformation's renaming pass.
  const bool calls = std::any_of(graph.node.begin(), graph.node.end(),
                                 [](const NodeDef& n) { return absl::string_view(n.op) == "Invoke"; });
  Graph executable;
  // The transformation's index of its output: the compiler takes it
  // instead of resolving every input of the graph again.
  NodeIndex index;
  bool indexed = false;
  // Static mode: each main-graph Invoke's Returns, by their positions in
  // the transformed graph (its main unit's node ids), or by name where
  // placement may have moved them.
  std::vector<std::pair<std::string, std::vector<int32_t>>> invoke_returns;
  std::vector<std::vector<std::string>> invoke_return_names;
  if (options.mode == ExecutionMode::kStatic && calls) {
    TDF_ASSIGN_OR_RETURN(StaticizedGraph staticized, StaticizeRecursionIndexed(graph));
    executable = std::move(staticized.graph);
    index = std::move(staticized.index);
    indexed = true;
    invoke_returns = std::move(staticized.main_invoke_returns);
    if (owned != nullptr) *owned = Graph();
  } else if (owned != nullptr) {
    executable = std::move(*owned);
    *owned = Graph();
  } else if (options.mode == ExecutionMode::kStatic) {
    executable.node = graph.node;
  } else {
    executable = graph;
  }
  if (options.mode == ExecutionMode::kStatic) executable.library = FunctionLibrary();
  // Device placement when asked for, or when some node names a GPU.
  bool names_gpu = false;
  auto scan = [&](const std::vector<NodeDef>& nodes) {
    for (const NodeDef& n : nodes) {
      if (n.device.empty()) continue;  // the CPU: no parse per node
      absl::StatusOr<Device> d = Device::Parse(n.device);
      names_gpu |= d.ok() && !d->is_cpu();
    }
  };
  scan(executable.node);
  for (const auto& [name, f] : executable.library.functions()) scan(f.node);
  if (options.place_tensor_ops_on_gpu || names_gpu) {
    PlacementOptions po;
    po.place_tensor_ops_on_gpu = options.place_tensor_ops_on_gpu;
    po.fallback_to_cpu = options.fallback_to_cpu;
    invoke_return_names.resize(invoke_returns.size());
    for (size_t k = 0; k < invoke_returns.size(); ++k)
      for (int32_t pos : invoke_returns[k].second) invoke_return_names[k].push_back(executable.node[pos].name);
    TDF_RETURN_IF_ERROR(PlaceDevices(executable, po));
    indexed = false;  // placement may add nodes (copies)
  }
  TDF_ASSIGN_OR_RETURN(impl->exe,
                       runtime::Compile(std::move(executable), indexed ? &index : nullptr, options.mode, options));
  for (size_t k = 0; k < invoke_returns.size(); ++k) {
    auto& [invoke, ids] = invoke_returns[k];
    for (size_t r = 0; r < ids.size(); ++r) {
      const int32_t id = indexed ? ids[r] : impl->exe->main_index.Find(invoke_return_names[k][r]);
      if (id < 0 || id >= static_cast<int32_t>(impl->exe->nodes.size()) ||
          impl->exe->nodes[id].kind != runtime::NodeKind::kReturn)
        return absl::InternalError(absl::StrCat("node '", invoke, "' (Invoke): the transformed graph has no Return ",
                                                "for its result ", r));
      ids[r] = id;
    }
    // An Invoke inside a loop cannot be fetched, as no node of a loop body
    // can (dynamic mode: FindMainNode); its Returns are in the loop too.
    if (ids.empty() || impl->exe->nodes[ids.front()].block != 0) continue;
    impl->exe->invoke_results.emplace(invoke, std::move(ids));
  }
  // Variables start from their initial value (or zeros of their shape).
  for (int32_t id : impl->exe->variables) {
    const NodeDef& def = *impl->exe->info[id].def;
    auto slot = std::make_unique<runtime::VariableSlot>();
    slot->name = def.name;
    TDF_ASSIGN_OR_RETURN(slot->dtype, def.GetType("dtype"));
    Tensor init;
    if (const AttrValue* v = def.FindAttr("initial_value"); v != nullptr && v->get_if<Tensor>() != nullptr) {
      init = *v->get_if<Tensor>();
      if (init.dtype() != slot->dtype)
        return NodeError(def, absl::StatusCode::kInvalidArgument, "initial_value dtype differs from attr dtype");
    } else {
      Shape shape;
      if (const AttrValue* sh = def.FindAttr("shape"); sh != nullptr && sh->get_if<Shape>() != nullptr)
        shape = *sh->get_if<Shape>();
      TDF_ASSIGN_OR_RETURN(init, Tensor::Zeros(slot->dtype, shape));
    }
    // A variable placed on a GPU keeps its value there (its updates run as
    // GPU kernels); the initial value is copied once, here.
    absl::StatusOr<Device> device = Device::Parse(def.device);
    if (!device.ok()) return NodeError(def, device.status().code(), device.status().message());
    slot->device = *device;
    absl::StatusOr<Tensor> placed = CopyTensorTo(init, slot->device);
    if (!placed.ok()) return NodeError(def, placed.status().code(), placed.status().message());
    {
      base::MutexLock lock(&slot->mu);
      slot->value = *std::move(placed);
    }
    impl->variables.slots.push_back(std::move(slot));
  }
  impl->executor = std::make_unique<runtime::Executor>(impl->exe.get(), options, &impl->variables);
  return std::unique_ptr<Session>(new Session(std::move(options), std::move(impl)));
}

absl::StatusOr<std::vector<Tensor>> Session::Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                 const std::vector<std::string>& fetches,
                                                 const std::vector<std::string>& targets, RunStats* stats,
                                                 const CancellationToken* cancel) {
  RunOptions run_options;
  run_options.cancel = cancel;
  return Run(run_options, feeds, fetches, targets, stats);
}

absl::StatusOr<std::vector<Tensor>> Session::Run(const RunOptions& run_options,
                                                 const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                 const std::vector<std::string>& fetches,
                                                 const std::vector<std::string>& targets, RunStats* stats) {
  return runtime::SessionAccess::Run(*this, run_options, feeds, fetches, targets, stats, nullptr);
}

namespace runtime {

absl::StatusOr<std::vector<Tensor>> SessionAccess::Run(Session& session, const RunOptions& run_options,
                                                       const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                       const std::vector<std::string>& fetches,
                                                       const std::vector<std::string>& targets, RunStats* stats,
                                                       RemoteChannel* remote, const RemoteNeeds* remote_needs) {
  return OrOutOfMemory("Session::Run", [&]() -> absl::StatusOr<std::vector<Tensor>> {
    const SessionOptions& options = session.options_;
    runtime::RunRequest request;
    request.remote = remote;
    request.remote_needs = remote_needs;
    request.feeds = feeds;
    request.fetches = fetches;
    request.targets = targets;
    request.cancel = run_options.cancel;
    request.deadline = run_options.deadline.value_or(options.deadline);
    if (run_options.deadline.has_value()) request.deadline_source = "RunOptions::deadline";
    request.collect_node_stats = run_options.collect_node_stats.value_or(options.collect_node_stats);
    if (run_options.trace_path.has_value()) {
      request.trace_path = *run_options.trace_path;
    } else {
      request.trace_path = options.trace_path;
      if (request.trace_path.empty()) {
        if (const char* env = std::getenv("TDF_TRACE")) request.trace_path = env;
      }
    }
    request.observer = run_options.observer.value_or(options.observer);
    return session.impl_->executor->Run(request, stats);
  });
}

}  // namespace runtime

const Graph& Session::executable_graph() const { return impl_->exe->graph; }

absl::StatusOr<Tensor> Session::ReadVariable(const std::string& name) const {
  for (const auto& slot : impl_->variables.slots) {
    if (slot->name != name) continue;
    Tensor value;
    {
      base::MutexLock lock(&slot->mu);
      value = slot->value;
    }
    return CopyTensorTo(value, Device::Cpu());  // a GPU variable's value comes home
  }
  return absl::NotFoundError(absl::StrCat("no variable '", name, "'"));
}

absl::Status Session::AssignVariable(const std::string& name, const Tensor& value) {
  for (const auto& slot : impl_->variables.slots) {
    if (slot->name != name) continue;
    if (value.dtype() != slot->dtype)
      return absl::InvalidArgumentError(absl::StrCat("variable '", name, "' is ", DTypeName(slot->dtype), ", value is ",
                                                     DTypeName(value.dtype())));
    TDF_ASSIGN_OR_RETURN(Tensor placed, CopyTensorTo(value, slot->device));
    base::MutexLock lock(&slot->mu);
    slot->value = std::move(placed);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no variable '", name, "'"));
}

std::vector<std::string> Session::VariableNames() const {
  std::vector<std::string> names;
  names.reserve(impl_->variables.slots.size());
  for (const auto& slot : impl_->variables.slots) names.push_back(slot->name);
  return names;
}

absl::Status Session::SaveVariables(const std::string& path) const {
  NamedTensors values;
  values.reserve(impl_->variables.slots.size());
  for (const auto& slot : impl_->variables.slots) {
    Tensor value;
    {
      base::MutexLock lock(&slot->mu);
      value = slot->value;
    }
    TDF_ASSIGN_OR_RETURN(Tensor host, CopyTensorTo(value, Device::Cpu()));
    values.emplace_back(slot->name, std::move(host));
  }
  return SaveTensors(values, path);
}

absl::Status Session::RestoreVariables(const std::string& path, bool allow_missing) {
  TDF_ASSIGN_OR_RETURN(NamedTensors values, LoadTensors(path));
  absl::flat_hash_map<absl::string_view, runtime::VariableSlot*> by_name;
  for (const auto& slot : impl_->variables.slots) by_name.emplace(slot->name, slot.get());
  std::vector<std::pair<runtime::VariableSlot*, const Tensor*>> assignments;
  assignments.reserve(values.size());
  for (const auto& [name, value] : values) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      return absl::NotFoundError(absl::StrCat(path, ": the session has no variable '", name, "'"));
    runtime::VariableSlot* slot = it->second;
    Shape current;
    {
      base::MutexLock lock(&slot->mu);
      current = slot->value.shape();
    }
    if (value.dtype() != slot->dtype || value.shape() != current)
      return absl::InvalidArgumentError(absl::StrCat(path, ": variable '", name, "' is ", DTypeName(slot->dtype),
                                                     current.DebugString(), ", the checkpoint holds ",
                                                     DTypeName(value.dtype()), value.shape().DebugString()));
    assignments.emplace_back(slot, &value);
    by_name.erase(it);
  }
  if (!allow_missing && !by_name.empty()) {
    std::vector<std::string> missing;
    for (const auto& slot : impl_->variables.slots)
      if (by_name.contains(slot->name)) missing.push_back(absl::StrCat("'", slot->name, "'"));
    return absl::NotFoundError(absl::StrCat(path, ": no value for variable", missing.size() > 1 ? "s " : " ",
                                            absl::StrJoin(missing, ", ")));
  }
  std::vector<Tensor> placed;
  placed.reserve(assignments.size());
  for (const auto& [slot, value] : assignments) {
    TDF_ASSIGN_OR_RETURN(Tensor t, CopyTensorTo(*value, slot->device));
    placed.push_back(std::move(t));
  }
  for (size_t i = 0; i < assignments.size(); ++i) {
    base::MutexLock lock(&assignments[i].first->mu);
    assignments[i].first->value = std::move(placed[i]);
  }
  return absl::OkStatus();
}

}  // namespace tdf
