// Runs a graph that TensorFlow 1.x wrote (a tf.while_loop summing i * k for
// i < n): tdf imports it, keeping TensorFlow's node names.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tdf/session.h"
#include "tdf/tf_import.h"

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "tests/data/tf/while_sum.pbtxt";
  absl::StatusOr<tdf::Graph> graph = tdf::ImportTensorFlowGraphFile(path);
  if (!graph.ok()) {
    std::cerr << graph.status() << "\n";  // e.g. node 'p' (Prod): TensorFlow op 'Prod' has no tdf counterpart ...
    return 1;
  }
  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(*graph);
  if (!session.ok()) return 1;
  absl::StatusOr<std::vector<tdf::Tensor>> out = (*session)->Run(
      {{"n", tdf::Tensor::Scalar<int32_t>(10)}, {"k", tdf::Tensor::Scalar<int32_t>(3)}}, {"while/Exit_1"});
  if (!out.ok()) return 1;
  std::cout << "sum of 3 * i for i < 10 = " << (*out)[0].scalar<int32_t>() << "\n";  // 135
  return (*out)[0].scalar<int32_t>() == 135 ? 0 : 1;
}
