// File: tdf/tf_import.h
/// \file
/// \brief Importing graphs that TensorFlow 1.x wrote into tdf graphs.
///
/// Importing graphs that TensorFlow 1.x wrote (tf.io.write_graph,
/// Graph.as_graph_def(), tf.compat.v1 control flow, Defun/tf.function
/// FunctionDefs) into tdf graphs. docs/tensorflow_import.md lists the ops,
/// the forms and what is refused.
///
/// \code
///   absl::StatusOr<tdf::Graph> g = tdf::ImportTensorFlowGraphFile("model.pb");
///   if (!g.ok()) return g.status();   // "node 'x' (Prod): ..." for what tdf cannot run
///   tdf::SaveGraph(*g, "model.pbtxt");  // tdf's own form
/// \endcode
///
/// TensorFlow's op names and input forms are mapped onto tdf's: AddV2 is Add,
/// Sum(input, reduction_indices) is Sum with attr `axes`, ConcatV2(values...,
/// axis) is Concat with attr `axis`, and so on. An input that tdf takes as an
/// attribute must be a constant (a Const, possibly through Identity or a
/// constant Enter); otherwise the import fails naming the node. Attributes
/// whose names start with "_" (_output_shapes, _class) are ignored, and so
/// are TensorFlow's `versions`.
///
/// The result is validated (tdf::Validate): whatever tdf cannot run — an op
/// it lacks, a dtype it lacks (DT_STRING, DT_HALF, ...), a polymorphic
/// function — fails here with a Status naming the node (and function), never
/// later at run time. Input is untrusted: malformed bytes are an error, never
/// a crash, with the limits of tdf/serialize.h.
#ifndef TDF_TF_IMPORT_H_
#define TDF_TF_IMPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tdf/graph.h"

namespace tdf {

/// How the bytes of a TensorFlow GraphDef are encoded.
enum class TensorFlowGraphEncoding {
  kAuto,    ///< binary if it parses as a binary GraphDef, else text
  kBinary,  ///< a serialized GraphDef (.pb)
  kText,    ///< protobuf text format (.pbtxt)
};

/// A TensorFlow GraphDef (binary or text) -> a validated tdf graph.
absl::StatusOr<Graph> ImportTensorFlowGraph(absl::string_view bytes,
                                            TensorFlowGraphEncoding encoding = TensorFlowGraphEncoding::kAuto);
/// The same from a file: ".pbtxt"/".pbtext"/".txt" text, ".pb"/".bin" binary,
/// anything else sniffed. Errors name the path.
absl::StatusOr<Graph> ImportTensorFlowGraphFile(const std::string& path);

/// True if `bytes` hold a GraphDef that TensorFlow wrote rather than tdf:
/// TensorFlow's producer version, a FunctionDef `ret` map, a TensorFlow-only
/// op (AddV2, ConcatV2, RealDiv, ...), an op in TensorFlow's input form (Sum
/// with its axes as an input, ...), or TensorFlow's _output_shapes/_class
/// attributes. False for bytes that parse as neither form.
bool IsTensorFlowGraph(absl::string_view bytes,
                       TensorFlowGraphEncoding encoding = TensorFlowGraphEncoding::kAuto);

/// tdf's own form (tdf::LoadGraph) or a TensorFlow GraphDef
/// (ImportTensorFlowGraphFile), told apart by IsTensorFlowGraph. What
/// `tdf run` and `tdf validate` load.
absl::StatusOr<Graph> LoadGraphOrTensorFlowGraph(const std::string& path);

}  // namespace tdf

#endif  // TDF_TF_IMPORT_H_
