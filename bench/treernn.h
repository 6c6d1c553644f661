// File: bench/treernn.h
//
// The TreeRNN sentiment model (Socher et al., EMNLP 2013) as the paper's
// §6.2 evaluates it, in three tdf implementations plus a native C++
// reference (tdf_treernn_bench, bench/treernn_bench.cc).
//
// Model, for a tree whose nodes n carry a class y_n in 0..4:
//   leaf      h_n = tanh(E[word_n] · Wl + bl)          E [V, 300], Wl [300, 150]
//   internal  h_n = tanh([h_left, h_right] · W + b)    W [300, 150]
//   every node  p_n = softmax(h_n · Wc + bc)           Wc [150, 5]
//   loss of a batch of trees = sum over all their nodes of -log p_n[y_n],
//                              divided by the number of trees.
// Socher's RNN reads a leaf's word vector directly; with the paper's sizes
// (word vectors of 300, hidden states of 150) a leaf goes through one
// tanh layer (Wl, bl) to the hidden size first.
//
// The tdf implementations, each through the public API (tdf/builder.h,
// tdf/autodiff.h, tdf/session.h); all three share the same leaf layer
// (one Gather of the batch's words from E, one MatMul); the iteration and
// unrolled models also share the classifier (one MatMul over all the hidden
// states, one SoftmaxCrossEntropy):
//   kRecursion  a recursive tdf function node(i, tree, P, Wb, Wcb) -> (h, loss)
//               over the node index; it reads the node's row of the int
//               tensor `tree` (fed per run: children, leaf row, class) with
//               Gather. A leaf returns its row of P (the leaf states of the
//               whole batch) and no loss; an internal node computes h from
//               its children's, its own classifier and cross-entropy, and
//               returns h and the summed cross-entropy of the internal nodes
//               of its subtree. Wb = [W; b] and Wcb = [Wc; bc]^T, the biases
//               as the weights of a constant 1 column (Wcb transposed, so
//               that its gradient is summed densely). The main graph adds
//               the leaves' cross-entropy (one MatMul over P, one
//               SoftmaxCrossEntropy). A batch of B trees is B root calls in
//               the main graph, one per tree, that run concurrently. Every
//               internal node does the same fixed-size work and no node
//               copies its subtree.
//   kIteration  per tree a While loop over the internal nodes in post-order:
//               the state H starts as the tree's leaf states and grows by one
//               row per iteration (Concat); children are read with Gather.
//               A batch is B such loops in one graph.
//   kUnrolled   a fresh graph per batch, straight-line (Slice, Concat,
//               MatMul, Tanh per node), with the parameters as the variables'
//               initial values; differentiated, compiled, run once, and the
//               updated parameters read back for the next batch.
// Training: AddGradients of the loss w.r.t. the Reads of the seven variables
// and AddSgdStep; one run takes one SGD step. Inference: the loss only.
#ifndef TDF_BENCH_TREERNN_H_
#define TDF_BENCH_TREERNN_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tdf/session.h"
#include "tdf/tensor.h"
#include "treebank.h"

namespace tdf_treernn {

struct ModelConfig {
  int vocabulary_size = 3000;
  int embedding = 300;
  int hidden = 150;
  double learning_rate = 0.01;
  tdf::DType dtype = tdf::DType::kFloat32;  // kFloat32 or kFloat64
  uint64_t seed = 7;                        // parameter initialization
  // Place every tensor op with a CUDA kernel on cuda:0 (SessionOptions::
  // place_tensor_ops_on_gpu); without a device, Model::Create fails.
  bool gpu = false;
  // Sees every firing of the tdf models' sessions (SessionOptions::observer);
  // not owned. tdf_treernn_bench's ceiling analysis times the loop with it.
  tdf::ExecutionObserver* observer = nullptr;
};

// The parameters, each a tensor of the config's dtype, in this order.
constexpr int kNumParameters = 7;
extern const char* const kParameterNames[kNumParameters];  // "E", "Wl", "bl", "W", "b", "Wc", "bc"
struct Parameters {
  tdf::Tensor t[kNumParameters];
};

// Glorot-uniform matrices, zero biases, embeddings uniform in [-0.1, 0.1].
Parameters InitParameters(const ModelConfig& config);
// The largest |a - b| / max(1, |b|) over all elements of all parameters.
double MaxRelativeDifference(const Parameters& a, const Parameters& b);

using Batch = std::vector<const Tree*>;

// ---- native reference ----
// The loss of `batch`; with `grads`, also its gradient w.r.t. every parameter.
// Straightforward Eigen code in the config's dtype, one thread.
double NativeLoss(const ModelConfig& config, const Parameters& params, const Batch& batch,
                  Parameters* grads = nullptr);
// params -= learning_rate * grads: into new tensors, or, with `in_place`,
// into params' own buffers (which nothing else, e.g. a Session's variables,
// may share).
void NativeSgd(const ModelConfig& config, const Parameters& grads, Parameters* params, bool in_place = false);

// ---- tdf ----
// kBatchedRecursion: kRecursion's graph run with SessionOptions::batching,
// so that a node's tensor ops fire once for the ready nodes of all trees.
enum class Impl { kRecursion, kIteration, kUnrolled, kBatchedRecursion };
const char* ImplName(Impl impl);  // "recursion", "iteration", "unrolled", "batched"

// What one Run needs for a batch, made ahead of time (data loading, not
// timed by the benchmark): the feeds, for the unrolled model just the trees.
struct PreparedBatch {
  Batch trees;
  std::vector<std::pair<std::string, tdf::Tensor>> feeds;
};

class Model {
 public:
  // A model for batches of exactly `batch_size` trees (the recursion and
  // iteration graphs have one root call / loop per tree).
  static absl::StatusOr<std::unique_ptr<Model>> Create(Impl impl, const ModelConfig& config,
                                                       const Parameters& initial, int batch_size, bool training,
                                                       int num_workers);
  virtual ~Model() = default;

  virtual absl::StatusOr<PreparedBatch> Prepare(const Batch& batch) const = 0;
  // The batch's loss (before the update); training also takes one SGD step.
  virtual absl::StatusOr<double> Run(const PreparedBatch& batch) = 0;
  // The current parameters.
  virtual absl::StatusOr<Parameters> ReadParameters() const = 0;
  // Statistics of the last Run (firings, frames, batches).
  const tdf::RunStats& last_stats() const { return stats_; }
  // Nodes of the main graph and of the function library after AddGradients
  // (for the unrolled model: of the last batch's graph).
  int64_t graph_nodes() const { return graph_nodes_; }

 protected:
  tdf::RunStats stats_;
  int64_t graph_nodes_ = 0;
};

}  // namespace tdf_treernn

#endif  // TDF_BENCH_TREERNN_H_
