// The TensorFlow importer's internals (tdf/tf_import.h): a TensorFlow node
// with its inputs resolved, the context an op mapping emits tdf nodes into,
// and the conversions of TensorFlow's attribute values and tensors.
//
// Internal to src/graph/tf_import: includes the generated
// proto/tf_graph.pb.h.
#ifndef TDF_GRAPH_TF_IMPORT_IMPORTER_H_
#define TDF_GRAPH_TF_IMPORT_IMPORTER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/tf_graph.pb.h"  // generated from proto/tf_graph.proto into the build dir
#include "tdf/graph.h"

namespace tdf {
namespace tf_import {

namespace tfpb = ::tdf::tfproto;

// A TensorFlow node with its inputs in tdf's form: data inputs "node" or
// "node:port" (a function body's "node:output_arg:index" already resolved to
// a port), control inputs "^node".
struct TfNode {
  const tfpb::NodeDef* def = nullptr;
  std::vector<std::string> data;
  std::vector<std::string> control;
  std::string device;  // tdf's form ("", "cpu", "cuda:0", "rank:1/cpu")

  const std::string& name() const { return def->name(); }
  const std::string& op() const { return def->op(); }
  // "node 'name' (Op): message".
  absl::Status Error(absl::StatusCode code, absl::string_view message) const;
  absl::Status Invalid(absl::string_view message) const {
    return Error(absl::StatusCode::kInvalidArgument, message);
  }
  absl::Status Unsupported(absl::string_view message) const {
    return Error(absl::StatusCode::kUnimplemented, message);
  }
  // The attribute, or nullptr; attributes starting with "_" are never read.
  const tfpb::AttrValue* FindAttr(absl::string_view name) const;
};

// One body (the main graph or a function) being converted: the TensorFlow
// nodes by name, and the tdf nodes emitted so far.
struct BodyContext {
  std::map<std::string, const TfNode*> by_name;
  // The library's functions (name -> number of outputs): a node whose op
  // is one of them is a call.
  const std::map<std::string, const tfpb::FunctionDef*>* functions = nullptr;
  std::vector<NodeDef>* out = nullptr;

  // The value of `input` when it is known at import (static_values.cc): a
  // Const, through Identity and constant Enter nodes, and what TensorFlow
  // computes from constants and static shapes (Shape, Size, Rank, Pack,
  // StridedSlice of a vector). nullopt when not known; errors only for
  // malformed nodes.
  absl::StatusOr<std::optional<Tensor>> ConstantValue(absl::string_view input) const;
  // The static shape of `input` (-1 for a dimension not known), from
  // Placeholder shapes and Const values through shape-preserving and
  // broadcasting ops; nullopt when even the rank is not known.
  std::optional<std::vector<int64_t>> StaticShape(absl::string_view input) const;
  // The output shape of ExpandDims or Squeeze node `n` from its input's
  // static shape; an error naming the node when that is not known well
  // enough for a Reshape (at most one dimension unknown).
  absl::StatusOr<std::vector<int64_t>> ExpandedOrSqueezed(const TfNode& n) const;

  // Memo of StaticShape, keyed by input string; nullopt while being computed
  // (a loop's back edge) and when unknown.
  mutable std::map<std::string, std::optional<std::vector<int64_t>>> shape_memo;
  // How deep StaticShape and ConstantValue have followed inputs: beyond
  // kMaxFollow nodes a value or shape counts as not known, so a long chain
  // in untrusted input can neither overflow the stack nor take quadratic
  // time.
  static constexpr int kMaxFollow = 1000;
  mutable int follow_depth = 0;
};

// dtype enum -> tdf dtype; `what` says where ("attr T") in the error, which
// names dtypes tdf lacks (DT_STRING, DT_HALF, ...).
absl::StatusOr<DType> ConvertDType(int value, const TfNode& node, absl::string_view what);
// TensorProto -> Tensor with TensorFlow's rules: tensor_content, or typed
// values of which the last repeats to fill the shape (none: zeros).
absl::StatusOr<Tensor> ConvertTensor(const tfpb::TensorProto& p, const TfNode& node, absl::string_view what);
// A shape attribute; nullopt for unknown_rank (tdf then knows no shape).
absl::StatusOr<std::optional<Shape>> ConvertShape(const tfpb::TensorShapeProto& p, const TfNode& node,
                                                  absl::string_view what);

// Typed attribute reads with errors naming the node.
absl::StatusOr<DType> TypeAttr(const TfNode& node, absl::string_view name);
std::optional<int64_t> IntAttr(const TfNode& node, absl::string_view name);
std::optional<bool> BoolAttr(const TfNode& node, absl::string_view name);
std::optional<std::string> StringAttr(const TfNode& node, absl::string_view name);

// Emits the tdf nodes for one TensorFlow node: the node named like it (so
// its consumers' inputs stay valid), plus helpers named "<name>/tdf_*".
absl::Status ConvertNode(const TfNode& node, BodyContext& ctx);

// The port of output `arg` index `index` of a node of `op` (a function
// body's "node:arg:index"): TensorFlow's output arg names of the ops with
// several outputs, a library function's output_arg names, else `index`.
absl::StatusOr<int> OutputPort(const tfpb::NodeDef& producer, absl::string_view arg, int index,
                               const std::map<std::string, const tfpb::FunctionDef*>& functions);

// TensorFlow 1 reference variables (VariableV2, Variable), the ops that
// update one through its first input (Assign, AssignAdd, AssignSub,
// ApplyGradientDescent), and the name of the Read that stands for every
// other use of the variable.
bool IsVariableOp(const std::string& op);
bool UpdatesVariable(const std::string& op);
std::string VariableReadName(const std::string& variable);

// Whether tdf's own ops cover `op` unchanged (same name, same inputs) — the
// importer maps every other op name it knows; used to tell a TensorFlow
// graph from a tdf one.
bool IsTensorFlowOnlyForm(const tfpb::NodeDef& node);

}  // namespace tf_import
}  // namespace tdf

#endif  // TDF_GRAPH_TF_IMPORT_IMPORTER_H_
