// The protobuf text form of graphs and named tensors: GraphToText /
// GraphFromText (tdf/serialize.h) and the pieces serialize_text.h names.
// Parse errors (at most five, with line and column) go into the status,
// not the log.
#include "graph/serialize_text.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "graph/proto_conversion.h"
#include "tdf/status.h"

namespace tdf {
namespace {

namespace pb = ::tdf::proto;

using serialization::CheckInputSize;
using serialization::GraphFromProto;
using serialization::GraphToProto;
using serialization::NamedTensorsFromProto;
using serialization::NamedTensorsToProto;
using serialization::TextErrorCollector;

}  // namespace

std::string GraphToText(const Graph& graph) {
  pb::GraphDef p;
  absl::Status s = GraphToProto(graph, &p);
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.PrintToString(p, &text);
  if (!s.ok()) text = absl::StrCat("# error: ", s.message(), "\n", text);
  return text;
}

absl::StatusOr<Graph> GraphFromText(absl::string_view text) {
  TDF_RETURN_IF_ERROR(CheckInputSize(text.size()));
  pb::GraphDef p;
  TextErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  google::protobuf::io::ArrayInputStream stream(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&stream, &p))
    return absl::InvalidArgumentError(absl::StrCat("malformed graph text: ", errors.Summary()));
  return GraphFromProto(p);
}

namespace serialization {

absl::StatusOr<std::string> GraphToTextOrError(const Graph& graph) {
  pb::GraphDef p;
  TDF_RETURN_IF_ERROR(GraphToProto(graph, &p));
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.PrintToString(p, &text);
  return text;
}

absl::StatusOr<std::string> TensorsToText(const NamedTensors& tensors) {
  pb::NamedTensorsProto p;
  TDF_RETURN_IF_ERROR(NamedTensorsToProto(tensors, &p));
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.PrintToString(p, &text);
  return text;
}

absl::StatusOr<NamedTensors> TensorsFromText(absl::string_view text) {
  if (text.size() > static_cast<size_t>(kMaxSerializedTensorsBytes))
    return absl::InvalidArgumentError(absl::StrCat("tensor text of ", text.size(), " bytes exceeds the limit of ",
                                                   kMaxSerializedTensorsBytes));
  pb::NamedTensorsProto p;
  TextErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  google::protobuf::io::ArrayInputStream stream(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&stream, &p))
    return absl::InvalidArgumentError(absl::StrCat("malformed tensors text: ", errors.Summary()));
  return NamedTensorsFromProto(p);
}

}  // namespace serialization
}  // namespace tdf
