#include "runtime/executable.h"

#include "runtime/compiler/compiler.h"

#include <algorithm>
#include <limits>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "cuda/device_backend.h"
#include "graph/frames.h"
#include "runtime/frame.h"
#include "runtime/state_kernels.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {

int32_t ExecutableGraph::FindMainNode(absl::string_view name) const {
  // The main unit comes first: its list positions are the node ids.
  const int32_t id = main_index.Find(name);
  return id >= 0 && nodes[id].block == 0 ? id : -1;
}

int32_t ExecutableGraph::FindMainLoopExit(absl::string_view name) const {
  const int32_t id = main_index.Find(name);
  if (id < 0 || nodes[id].kind != NodeKind::kExit) return -1;
  const ExecBlock& loop = blocks[nodes[id].block];
  return loop.kind == ExecBlock::Kind::kLoop && loop.parent == 0 ? id : -1;
}

const std::vector<int32_t>* ExecutableGraph::FindInvokeResults(absl::string_view name) const {
  auto it = invoke_results.find(name);
  return it == invoke_results.end() ? nullptr : &it->second;
}

namespace {

// Dynamic mode: a part of a split call site (an Invoke with partial_args or
// partial_results: AddGradients pairs the forward and backward calls of
// f_ext this way) shares one invocation with its other parts, which the
// dynamic baseline, instantiating a whole call per Invoke, cannot do.
absl::Status CheckWholeCalls(const std::vector<NodeDef>& nodes) {
  for (const NodeDef& def : nodes) {
    if (def.op != "Invoke") continue;
    for (absl::string_view attr : {"partial_args", "partial_results"}) {
      if (def.FindAttr(attr) == nullptr) continue;
      return NodeError(def, absl::StatusCode::kUnimplemented,
                       absl::StrCat("calls '", def.GetString("function").value_or("?"),
                                    "' as one part of a split call site (", attr,
                                    "), as AddGradients pairs a call's forward and backward parts; "
                                    "ExecutionMode::kDynamic does not support split call sites, use "
                                    "ExecutionMode::kStatic"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutableGraph>> Compile(Graph graph, ExecutionMode mode,
                                                         const SessionOptions& options) {
  return Compile(std::move(graph), nullptr, mode, options);
}

absl::StatusOr<std::unique_ptr<ExecutableGraph>> Compile(Graph graph, NodeIndex* main_index, ExecutionMode mode,
                                                         const SessionOptions& options) {
  auto exe = std::make_unique<ExecutableGraph>();
  exe->graph = std::move(graph);  // the node buffer moves: main_index's views stay valid
  exe->mode = mode;
  Compiler compiler(exe.get(), options);
  if (mode == ExecutionMode::kDynamic) TDF_RETURN_IF_ERROR(CheckWholeCalls(exe->graph.node));
  TDF_RETURN_IF_ERROR(compiler.AddUnit(exe->graph.node, "", main_index));
  if (mode == ExecutionMode::kDynamic) {
    for (const auto& [name, fn] : exe->graph.library.functions()) {
      if (!fn.defined) continue;
      absl::Status s = CheckWholeCalls(fn.node);
      if (s.ok()) s = compiler.AddUnit(fn.node, name);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat("in function '", name, "': ", s.message()));
    }
  }
  TDF_RETURN_IF_ERROR(compiler.Link());
  const bool may_name_devices = compiler.may_name_devices();
  exe->main_index = compiler.TakeMainIndex();
  std::vector<NodeBuild> nodes = compiler.TakeNodes();
  size_t total_edges = 0;
  for (const NodeBuild& n : nodes) total_edges += n.edges.size();
  exe->edge_pool.reserve(total_edges);
  exe->nodes.reserve(nodes.size());
  for (NodeBuild& n : nodes) {
    n.out_begin = exe->edge_pool.data() + exe->edge_pool.size();
    n.num_out = static_cast<int32_t>(n.edges.size());
    exe->edge_pool.insert(exe->edge_pool.end(), n.edges.begin(), n.edges.end());
    EdgeList().swap(n.edges);  // the pool has them: peak memory
    exe->nodes.push_back(static_cast<const ExecNode&>(n));
  }
  if (mode == ExecutionMode::kStatic && options.compile_threads) CompileThreads(exe.get(), options.compile_continuations);
  auto note_device = [&](absl::string_view name) {
    if (name.empty()) return;  // the CPU; no vector or parse per node
    absl::StatusOr<Device> d = Device::Parse(name);
    if (d.ok() && !d->is_cpu() && std::find(exe->gpu_devices.begin(), exe->gpu_devices.end(), *d) == exe->gpu_devices.end())
      exe->gpu_devices.push_back(*d);
  };
  // Only where some node names one: the scan read every node's NodeDef,
  // one more pass of cache misses over a large graph.
  for (const NodeInfo& info : exe->info) {
    if (!may_name_devices) break;
    if (info.def == nullptr) continue;
    note_device(info.def->device);
    if (absl::string_view(info.def->op) == "CopyToDevice") {  // length first, inline
      const AttrValue* v = info.def->FindAttr("device");
      const std::string* name = v != nullptr ? v->get_if<std::string>() : nullptr;
      if (name != nullptr) note_device(*name);
    }
  }
  return exe;
}

}  // namespace runtime
}  // namespace tdf
