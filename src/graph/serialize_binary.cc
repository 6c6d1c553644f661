// The binary protobuf form of graphs and named tensors (tdf/serialize.h):
// SerializeGraph / ParseGraph, SerializeTensors / ParseTensors. Writing is
// deterministic (attribute maps in key order); reading refuses oversized
// input before parsing, and keeps protobuf's own log lines off stderr.
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "graph/proto_conversion.h"
#include "tdf/serialize.h"
#include "tdf/status.h"

namespace tdf {
namespace {

namespace pb = ::tdf::proto;

using serialization::CheckInputSize;
using serialization::GraphFromProto;
using serialization::GraphToProto;
using serialization::NamedTensorsFromProto;
using serialization::NamedTensorsToProto;

}  // namespace

absl::StatusOr<std::string> SerializeGraph(const Graph& graph) {
  pb::GraphDef p;
  TDF_RETURN_IF_ERROR(GraphToProto(graph, &p));
  if (p.ByteSizeLong() > static_cast<size_t>(kMaxSerializedGraphBytes))
    return absl::InvalidArgumentError(absl::StrCat("graph serializes to ", p.ByteSizeLong(),
                                                   " bytes, more than loaders accept (", kMaxSerializedGraphBytes, ")"));
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // attr maps in key order: same graph, same bytes
    if (!p.SerializeToCodedStream(&coded)) return absl::InternalError("protobuf serialization failed");
  }
  return out;
}

absl::StatusOr<Graph> ParseGraph(absl::string_view bytes) {
  TDF_RETURN_IF_ERROR(CheckInputSize(bytes.size()));
  pb::GraphDef p;
  bool parsed = false;
  {
    // Protobuf logs a string field's invalid UTF-8 to stderr as it fails the
    // parse; the Status says it instead, and a library's caller could neither
    // catch nor silence the log line. (Thread-safe, unlike SetLogHandler.)
    google::protobuf::LogSilencer quiet;
    parsed = p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  if (!parsed)
    return absl::InvalidArgumentError(
        "malformed graph: not a valid binary GraphDef (or a name, op or string in it is not valid UTF-8)");
  return GraphFromProto(p);
}

absl::StatusOr<std::string> SerializeTensors(const NamedTensors& tensors) {
  pb::NamedTensorsProto p;
  TDF_RETURN_IF_ERROR(NamedTensorsToProto(tensors, &p));
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!p.SerializeToCodedStream(&coded)) return absl::InternalError("protobuf serialization failed");
  }
  return out;
}

absl::StatusOr<NamedTensors> ParseTensors(absl::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(kMaxSerializedTensorsBytes))
    return absl::InvalidArgumentError(absl::StrCat("serialized tensors of ", bytes.size(),
                                                   " bytes exceed the limit of ", kMaxSerializedTensorsBytes));
  pb::NamedTensorsProto p;
  bool parsed = false;
  {
    google::protobuf::LogSilencer quiet;  // see ParseGraph
    parsed = p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  if (!parsed)
    return absl::InvalidArgumentError(
        "malformed tensors: not a valid binary NamedTensorsProto (or a name in it is not valid UTF-8)");
  return NamedTensorsFromProto(p);
}

}  // namespace tdf
