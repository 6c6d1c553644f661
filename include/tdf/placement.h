/// \file
/// Device placement (design.md §4). Every node has a device in NodeDef.device
/// ("" or "cpu", "cuda:N"), optionally prefixed by the rank of a distributed
/// run that runs it ("rank:1/cuda:0", or TensorFlow's
/// "/job:worker/task:1/device:GPU:0"; tdf::DeviceName in tdf/tensor.h). The
/// rank is kept through this pass and otherwise ignored here: each rank's
/// cuda:N is its own GPU, a node that names only a rank ("rank:1") is
/// auto-placed like an unplaced one, and in a one-process Session every rank
/// is the local process. PlaceDevices:
///
/// \code
///   1. with `place_tensor_ops_on_gpu`, puts every tensor op that has a CUDA
///      kernel on cuda:`gpu_index`, leaving alone nodes that name a device,
///      control-flow primitives (Switch, Merge, Enter, Exit, NextIteration,
///      Call, Return), Placeholder, the state ops (Read, Assign, ...: host
///      nodes that update a variable where it lives), LoopCond, the producers
///      of a Switch or LoopCond predicate (the executor reads a predicate on
///      the host, so computing it there avoids a round trip), and integer and
///      boolean work on integer and boolean values (index arithmetic: as
///      TensorFlow keeps int32 in host memory); and puts floating-point
///      Variables there too, so their values stay on the GPU between runs and
///      an optimizer step updates them with GPU kernels;
///   2. without a usable device (DeviceCount() == 0, or a build without CUDA)
///      either rewrites every cuda:N node to "cpu" and says so once on stderr
///      ("tdf: no CUDA device (...); running on the CPU"), or fails with
///      FailedPrecondition naming the first GPU node, as `fallback_to_cpu`
///      chooses;
///   3. inserts a copy where a value crosses devices (a state op takes its
///      inputs from any device and copies them itself): "CopyToDevice" (attr
///      `device`) before a GPU consumer of a host value, "CopyToHost" before a
///      host consumer (a CPU kernel, or a Switch predicate) of a device value.
///      Control-flow primitives only move tokens, so values flow through them
///      on whatever device they are; where a value comes out of control flow
///      (so its device is not known statically) a copy is inserted anyway and
///      forwards the value at run time when it is already in place. One copy
///      serves every consumer of the same value on the same device. With
///      ranks, a CopyToHost runs on its producer's rank and a CopyToDevice on
///      its consumer's, so that only host values cross ranks (the partition
///      pass, tdf/partition.h, cuts after and before them).
/// \endcode
///
/// Copy nodes are host nodes (their kernels drive the device from the worker
/// thread): CopyToDevice enqueues on the device's stream and returns; a GPU
/// consumer is queued behind it on the same stream and never synchronizes;
/// CopyToHost waits for an event recorded after the copy.
///
/// \code
///   tdf::PlacementOptions opts;
///   opts.place_tensor_ops_on_gpu = true;
///   tdf::PlacementReport report;
///   absl::Status s = tdf::PlaceDevices(graph, opts, &report);
/// \endcode
///
/// Requires: a graph that passes Validate. Ensures: it still does; every data
/// edge between a host node and a GPU kernel goes through a copy node.
#ifndef TDF_PLACEMENT_H_
#define TDF_PLACEMENT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tdf/graph.h"
#include "tdf/transform.h"

namespace tdf {

/// What PlaceDevices does.
struct PlacementOptions {
  /// Put every tensor op with a CUDA kernel on cuda:`gpu_index`.
  bool place_tensor_ops_on_gpu = false;
  int gpu_index = 0;  ///< which CUDA device
  /// Without a device: true rewrites cuda:N nodes to cpu (one log line),
  /// false fails with FailedPrecondition.
  bool fallback_to_cpu = true;
  /// Devices to assume; -1 asks DeviceBackend. Tests use it to check the
  /// copy-inserting structure on machines without a GPU.
  int device_count_override = -1;
};

/// What PlaceDevices did.
struct PlacementReport {
  int gpu_nodes = 0;             ///< nodes on a CUDA device after the pass
  int copies_to_device = 0;      ///< CopyToDevice nodes inserted
  int copies_to_host = 0;        ///< CopyToHost nodes inserted
  bool fell_back_to_cpu = false;  ///< cuda:N nodes were rewritten to cpu
  std::string fallback_reason;   ///< why (DeviceBackend::Describe())
};

/// Places the main graph and every function body; see the file comment.
/// Errors: InvalidArgument for a malformed device string, FailedPrecondition
/// for a GPU node without a device when fallback_to_cpu is false; both name
/// the node.
absl::Status PlaceDevices(Graph& graph, const PlacementOptions& options, PlacementReport* report = nullptr);

/// True for ops that have CUDA kernels (src/cuda/) and may be auto-placed.
bool IsGpuPlaceableOp(absl::string_view op);

/// PlaceDevices as a GraphPass named "placement".
std::unique_ptr<GraphPass> CreatePlacementPass(PlacementOptions options);

}  // namespace tdf

#endif  // TDF_PLACEMENT_H_
