// The parts of the text form (serialize_text.cc) that the file loaders and
// savers (serialize_files.cc) use besides tdf/serialize.h's GraphToText and
// GraphFromText. Free of protobuf types.
#ifndef TDF_GRAPH_SERIALIZE_TEXT_H_
#define TDF_GRAPH_SERIALIZE_TEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tdf/graph.h"
#include "tdf/serialize.h"

namespace tdf {
namespace serialization {

// GraphToText for a graph that SerializeGraph would accept; any other is an
// error, not text with an "# error" comment line.
absl::StatusOr<std::string> GraphToTextOrError(const Graph& graph);

// Named tensors in protobuf text format, and back (untrusted input, refused
// past kMaxSerializedTensorsBytes).
absl::StatusOr<std::string> TensorsToText(const NamedTensors& tensors);
absl::StatusOr<NamedTensors> TensorsFromText(absl::string_view text);

}  // namespace serialization
}  // namespace tdf

#endif  // TDF_GRAPH_SERIALIZE_TEXT_H_
