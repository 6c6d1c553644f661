// File: bench/treernn_verify.h
//
// tdf_treernn_bench's float64 check of the tdf TreeRNN implementations
// against the native one (bench/treernn.h): the loss of two batches and the
// parameters after two SGD steps must agree to 1e-9 (relative), at batch
// sizes 1 and 3 with 1 and 2 workers.
#ifndef TDF_BENCH_TREERNN_VERIFY_H_
#define TDF_BENCH_TREERNN_VERIFY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "treebank.h"
#include "treernn.h"

namespace tdf_treernn {

// The trees in consecutive batches of `size` (a last, partial batch is left out).
std::vector<Batch> MakeBatches(const std::vector<Tree>& trees, int size);

// Two SGD steps (training) or one loss (inference) of `impl` at `batch` trees
// per run and `workers` workers against native, in config's dtype; on
// success `summary` gives the largest differences.
absl::Status VerifyOne(Impl impl, const ModelConfig& config, const std::vector<Tree>& trees, int batch, int workers,
                       bool train, std::string* summary);

// Every implementation, training and inference, batch 1 and 3, 1 and 2
// workers, in float64, reported on stderr. Returns the number of mismatches;
// unimplemented cases are reported in `unimplemented`, not counted.
int Verify(const ModelConfig& config32, const std::vector<Tree>& trees, std::vector<std::string>* unimplemented);

}  // namespace tdf_treernn

#endif  // TDF_BENCH_TREERNN_VERIFY_H_
