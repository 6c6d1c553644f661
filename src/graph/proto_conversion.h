// Conversion between tdf's IR (Graph, NodeDef, AttrValue, Tensor, named
// tensors) and the protobuf messages of proto/graph.proto, both ways. The
// binary form (serialize_binary.cc) and the text form (serialize_text.cc)
// both encode and decode these messages; the checks on untrusted input
// (dtypes, shapes, element counts, UTF-8 names, versions) are made here, in
// the proto -> IR direction, so both forms accept exactly the same graphs.
//
// Internal to the graph layer: includes the generated proto/graph.pb.h,
// which no public header does. (Files that include this header are compiled
// without ThreadSanitizer in the tsan preset: see CMakeLists.txt.)
#ifndef TDF_GRAPH_PROTO_CONVERSION_H_
#define TDF_GRAPH_PROTO_CONVERSION_H_

#include <cstddef>
#include <vector>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "proto/graph.pb.h"  // generated from proto/graph.proto into the build dir
#include "tdf/graph.h"
#include "tdf/serialize.h"

namespace tdf {
namespace serialization {

// IR -> proto. Errors if the graph holds something the format cannot (a
// tensor not on the CPU, a name that is not UTF-8). Converts as much as it
// can; the first error is returned, and `out` holds everything before it
// (GraphToText shows that partial form).
absl::Status GraphToProto(const Graph& graph, proto::GraphDef* out);

// proto -> IR, for untrusted input: anything malformed is an InvalidArgument
// "malformed graph: ..." status. Every size is checked before anything is
// allocated from it.
absl::StatusOr<Graph> GraphFromProto(const proto::GraphDef& p);

// Refuses a serialized graph (binary or text) larger than
// kMaxSerializedGraphBytes, before it is parsed.
absl::Status CheckInputSize(size_t size);

// Named tensors (checkpoints): names unique, non-empty UTF-8; tensors valid
// CPU tensors. ToProto also refuses a message over kMaxSerializedTensorsBytes.
absl::Status NamedTensorsToProto(const NamedTensors& tensors, proto::NamedTensorsProto* out);
absl::StatusOr<NamedTensors> NamedTensorsFromProto(const proto::NamedTensorsProto& p);

// Collects protobuf text-format parse errors (line:column: message, the
// first five) for a Status instead of protobuf's log.
class TextErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (errors_.size() < 5) errors_.push_back(absl::StrCat(line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  std::string Summary() const { return errors_.empty() ? "parse error" : absl::StrJoin(errors_, "; "); }

 private:
  std::vector<std::string> errors_;
};

}  // namespace serialization
}  // namespace tdf

#endif  // TDF_GRAPH_PROTO_CONVERSION_H_
