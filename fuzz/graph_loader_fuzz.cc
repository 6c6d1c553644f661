// libFuzzer target for the graph loaders (tdf/serialize.h): every input goes
// through the binary and the text graph loaders and the binary checkpoint
// loader; whatever loads is validated and must re-serialize to a fixed point. A crash, sanitizer report, abort or
// failed check is a bug: the loaders take untrusted files.
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target tdf_graph_loader_fuzz
//   build/fuzz/tdf_graph_loader_fuzz -max_total_time=60 -rss_limit_mb=2048
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "tdf/serialize.h"
#include "tdf/validate.h"

namespace {

void CheckLoaded(const tdf::Graph& graph) {
  (void)tdf::Validate(graph);  // must answer, not crash
  absl::StatusOr<std::string> bytes = tdf::SerializeGraph(graph);
  if (!bytes.ok()) {
    std::fprintf(stderr, "loaded graph does not serialize: %s\n", bytes.status().ToString().c_str());
    std::abort();
  }
  absl::StatusOr<tdf::Graph> again = tdf::ParseGraph(*bytes);
  if (!again.ok()) {
    std::fprintf(stderr, "serialized graph does not load: %s\n", again.status().ToString().c_str());
    std::abort();
  }
  absl::StatusOr<std::string> bytes_again = tdf::SerializeGraph(*again);
  if (!bytes_again.ok() || *bytes_again != *bytes) {
    std::fprintf(stderr, "serialization is not a fixed point\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Invalid UTF-8 is logged by protobuf before the parse fails; the Status
  // says so already, and the log would slow the fuzzer down.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tdf::Graph> binary = tdf::ParseGraph(input);
  if (binary.ok()) CheckLoaded(*binary);
  absl::StatusOr<tdf::Graph> text = tdf::GraphFromText(input);
  if (text.ok()) CheckLoaded(*text);
  // The checkpoint loader shares the tensor decoding; what it loads must
  // serialize and load back the same.
  absl::StatusOr<tdf::NamedTensors> tensors = tdf::ParseTensors(input);
  if (tensors.ok()) {
    absl::StatusOr<std::string> bytes = tdf::SerializeTensors(*tensors);
    absl::StatusOr<tdf::NamedTensors> again = bytes.ok() ? tdf::ParseTensors(*bytes) : bytes.status();
    if (!again.ok() || again->size() != tensors->size()) {
      std::fprintf(stderr, "loaded tensors do not round-trip\n");
      std::abort();
    }
  }
  return 0;
}
