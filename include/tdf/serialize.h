/// \file
/// Saving and loading graphs (with their function libraries) as protocol
/// buffers, in the format of proto/graph.proto: TensorFlow's GraphDef /
/// NodeDef / AttrValue / FunctionDefLibrary, field for field where TensorFlow
/// has the field. Binary (.pb) and text (.pbtxt) forms are both lossless:
/// ParseGraph(*SerializeGraph(g)) == g and GraphFromText(GraphToText(g)) == g
/// for every graph tdf can hold (attrs of every kind, tensors of every dtype,
/// devices, control inputs, declared-only functions).
///
/// \code
///   tdf::Graph g = tdf::reference::Fib();
///   absl::Status s = tdf::SaveGraph(g, "fib.pbtxt");
///   absl::StatusOr<tdf::Graph> back = tdf::LoadGraph("fib.pbtxt");
/// \endcode
///
/// The loaders take untrusted input: anything malformed (truncated bytes,
/// unknown dtypes, tensors whose data does not match dtype x shape, negative
/// or absurd dimensions, ...) is an InvalidArgument status, never a crash, and
/// no allocation is larger than the input warrants (see the limits below).
/// They check the format, not the program: tdf::Validate (tdf/validate.h)
/// checks ops, inputs and types.
#ifndef TDF_SERIALIZE_H_
#define TDF_SERIALIZE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tdf/graph.h"
#include "tdf/tensor.h"

namespace tdf {

/// Inputs larger than this are refused before parsing (protobuf objects take
/// several times the bytes of their encoding).
inline constexpr int64_t kMaxSerializedGraphBytes = int64_t{256} << 20;
/// A tensor attribute may hold at most this many elements...
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 28;
/// ...and one whose values are not all in the input (a single repeated value,
/// TensorFlow's splat form) at most this many, so a few bytes of input cannot
/// ask for gigabytes.
inline constexpr int64_t kMaxSplatElements = int64_t{1} << 20;
/// Dimensions of a shape or tensor.
inline constexpr int kMaxRank = 64;
/// The format version written to GraphDef.versions.producer. A file whose
/// min_consumer is larger was written for a newer tdf and is refused.
inline constexpr int kGraphFormatVersion = 1;

/// Binary protobuf. Errors if the graph holds something the format cannot
/// (a tensor not on the CPU, a name that is not UTF-8).
absl::StatusOr<std::string> SerializeGraph(const Graph& graph);
/// The inverse of SerializeGraph, for untrusted bytes (see above).
absl::StatusOr<Graph> ParseGraph(absl::string_view bytes);

/// Protobuf text format (deterministic: the same graph gives the same text).
/// Precondition: SerializeGraph(graph) would succeed; otherwise the text holds
/// what could be converted, preceded by a "# error: ..." comment line.
std::string GraphToText(const Graph& graph);
/// The inverse of GraphToText. A malformed text's error gives the line and
/// column where it goes wrong ("malformed graph text: 8:18: ...").
absl::StatusOr<Graph> GraphFromText(absl::string_view text);

/// By extension: ".pbtxt"/".txt"/".pbtext" text, ".pb"/".bin" binary; any
/// other extension is sniffed (binary first, then text). Errors name the path.
absl::StatusOr<Graph> LoadGraph(const std::string& path);
/// ".pbtxt"/".txt"/".pbtext" text, anything else binary. Written to a
/// temporary file beside `path` and renamed over it, so `path` holds either
/// the old file or the whole new one.
absl::Status SaveGraph(const Graph& graph, const std::string& path);

// ---- Named tensors (checkpoints) ----

/// A list of (name, tensor) pairs in proto/graph.proto's NamedTensorsProto:
/// what Session::SaveVariables writes and RestoreVariables reads. Names are
/// unique, non-empty UTF-8; tensors are valid CPU tensors. The loaders take
/// untrusted input as the graph loaders do, with a larger size limit.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
/// Named tensors larger than this are refused before parsing.
inline constexpr int64_t kMaxSerializedTensorsBytes = int64_t{1} << 30;

/// Binary protobuf (NamedTensorsProto).
absl::StatusOr<std::string> SerializeTensors(const NamedTensors& tensors);
/// The inverse of SerializeTensors, for untrusted bytes.
absl::StatusOr<NamedTensors> ParseTensors(absl::string_view bytes);
/// Forms by extension, as for graphs; the file is replaced atomically.
absl::Status SaveTensors(const NamedTensors& tensors, const std::string& path);
/// Reads what SaveTensors wrote; errors name the path.
absl::StatusOr<NamedTensors> LoadTensors(const std::string& path);

}  // namespace tdf

#endif  // TDF_SERIALIZE_H_
