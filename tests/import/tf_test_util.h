// Helpers for the TensorFlow import tests: import a GraphDef in text form,
// run it, and re-encode a text GraphDef as a binary one.
#ifndef TDF_TESTS_IMPORT_TF_TEST_UTIL_H_
#define TDF_TESTS_IMPORT_TF_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/text_format.h"
#include "tdf/session.h"
#include "tdf/status.h"
#include "tdf/tf_import.h"

namespace tdf {
namespace testing_tf {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

inline absl::StatusOr<std::vector<Tensor>> Run(const Graph& graph, const Feeds& feeds,
                                               const std::vector<std::string>& fetches) {
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(graph));
  return session->Run(feeds, fetches);
}

inline absl::StatusOr<std::vector<Tensor>> ImportAndRun(const std::string& pbtxt, const Feeds& feeds,
                                                        const std::vector<std::string>& fetches) {
  TDF_ASSIGN_OR_RETURN(Graph g, ImportTensorFlowGraph(pbtxt, TensorFlowGraphEncoding::kText));
  return Run(g, feeds, fetches);
}

// The binary encoding of a text GraphDef, through protobuf's reflection on
// the GraphDef layout (tdf.tfproto.GraphDef), not through the importer.
inline std::string TextToBinary(const std::string& pbtxt) {
  const google::protobuf::Descriptor* d =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName("tdf.tfproto.GraphDef");
  if (d == nullptr) return "";
  google::protobuf::DynamicMessageFactory factory;
  std::unique_ptr<google::protobuf::Message> m(factory.GetPrototype(d)->New());
  if (!google::protobuf::TextFormat::ParseFromString(pbtxt, m.get())) return "";
  return m->SerializeAsString();
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

}  // namespace testing_tf
}  // namespace tdf

#endif  // TDF_TESTS_IMPORT_TF_TEST_UTIL_H_
