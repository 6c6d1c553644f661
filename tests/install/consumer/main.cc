// Uses only installed public headers. Prints one line per tensor so the
// install test can compare the output exactly.
#include <cstdint>
#include <iostream>

#include "tdf/tensor.h"

int main() {
  tdf::Tensor scalar = tdf::Tensor::Scalar<int64_t>(42);
  std::cout << scalar.DebugString() << "\n";
  absl::StatusOr<tdf::Tensor> matrix = tdf::Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  if (!matrix.ok()) {
    std::cerr << matrix.status() << "\n";
    return 1;
  }
  std::cout << matrix->DebugString() << "\n";
  return 0;
}
