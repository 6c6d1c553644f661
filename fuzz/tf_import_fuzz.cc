// libFuzzer target for the TensorFlow importer (tdf/tf_import.h): every
// input goes through the binary and the text importer; whatever imports is
// a valid tdf graph, so it must validate, save in tdf's form and load back
// equal. A crash, sanitizer report, abort or failed check is a bug: the
// importer takes untrusted files.
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target tdf_tf_import_fuzz
//   build/fuzz/tdf_tf_import_fuzz -max_total_time=60 -rss_limit_mb=2048 tests/data/tf
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "tdf/serialize.h"
#include "tdf/tf_import.h"
#include "tdf/validate.h"

namespace {

void CheckImported(const tdf::Graph& graph) {
  absl::Status valid = tdf::Validate(graph);
  if (!valid.ok()) {
    std::fprintf(stderr, "imported graph does not validate: %s\n", valid.ToString().c_str());
    std::abort();
  }
  absl::StatusOr<std::string> bytes = tdf::SerializeGraph(graph);
  absl::StatusOr<tdf::Graph> again = bytes.ok() ? tdf::ParseGraph(*bytes) : bytes.status();
  if (!again.ok() || !(*again == graph)) {
    std::fprintf(stderr, "imported graph does not round-trip in tdf's form: %s\n",
                 again.ok() ? "differs" : again.status().ToString().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);  // parse errors are in the Status already
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  for (tdf::TensorFlowGraphEncoding e : {tdf::TensorFlowGraphEncoding::kBinary, tdf::TensorFlowGraphEncoding::kText}) {
    absl::StatusOr<tdf::Graph> g = tdf::ImportTensorFlowGraph(input, e);
    if (g.ok()) CheckImported(*g);
  }
  (void)tdf::IsTensorFlowGraph(input);  // must answer, not crash
  return 0;
}
