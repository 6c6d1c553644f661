// File: bench/treebank.h
//
// Sentiment trees for the TreeRNN benchmark (tdf_treernn_bench): a reader
// for the Stanford Sentiment Treebank's PTB-style trees, a vocabulary, and a
// deterministic generator of random trees with SST-like statistics (the real
// data set cannot be downloaded where the benchmark runs).
//
// SST trees are strictly binary; every node carries a sentiment label 0..4
// and a leaf is "(label word)":
//
//   (3 (2 It) (4 (2 (2 's) (2 a)) (4 lovely)))
//
//   tdf_treernn::Vocabulary vocab;
//   absl::StatusOr<std::vector<tdf_treernn::Tree>> trees =
//       tdf_treernn::ReadTreebank("bench/data/sst_sample.txt", &vocab);
//
// A Tree stores its nodes in post-order (children before their parent, left
// subtree before right, the root last), so the nodes of any subtree form a
// contiguous range ending at the subtree's root.
#ifndef TDF_BENCH_TREEBANK_H_
#define TDF_BENCH_TREEBANK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tdf_treernn {

constexpr int kNumClasses = 5;

struct TreeNode {
  int left = -1;   // index of the left child; -1 for a leaf
  int right = -1;  // index of the right child; -1 for a leaf
  int word = -1;   // vocabulary id of a leaf's word; -1 for an internal node
  int label = 2;   // sentiment class 0..4
  bool is_leaf() const { return left < 0; }
};

struct Tree {
  std::vector<TreeNode> nodes;  // post-order; the root is nodes.back()
  int root() const { return static_cast<int>(nodes.size()) - 1; }
  int num_nodes() const { return static_cast<int>(nodes.size()); }
  int num_leaves() const { return (num_nodes() + 1) / 2; }  // a full binary tree
  int depth() const;  // edges on the longest root-to-leaf path (0 for one leaf)
};

// Word <-> id. Id 0 is "<unk>", the id of every word not in the vocabulary
// when it does not grow.
class Vocabulary {
 public:
  static constexpr int kUnknown = 0;
  Vocabulary();
  // The id of `word`, adding it first when absent.
  int Add(absl::string_view word);
  // The id of `word`, or kUnknown.
  int Find(absl::string_view word) const;
  const std::string& word(int id) const { return words_[id]; }
  int size() const { return static_cast<int>(words_.size()); }

 private:
  std::vector<std::string> words_;
  absl::flat_hash_map<std::string, int> ids_;
};

struct ParseOptions {
  // Add unseen words to the vocabulary (building it from a training set);
  // otherwise they map to Vocabulary::kUnknown.
  bool grow_vocabulary = true;
  // Deeper input is rejected (the parser does not recurse, this only bounds
  // what a tree may look like).
  int max_depth = 10000;
};

// Parses one tree. Errors (InvalidArgument) name the byte offset and what was
// expected; nothing is added to `vocab` on error.
absl::StatusOr<Tree> ParseTree(absl::string_view text, Vocabulary* vocab, const ParseOptions& options = {});
// One tree per non-empty line; errors name the line.
absl::StatusOr<std::vector<Tree>> ParseTreebank(absl::string_view text, Vocabulary* vocab,
                                                const ParseOptions& options = {});
// Reads a file of ParseTreebank's format (NotFound if it cannot be read).
absl::StatusOr<std::vector<Tree>> ReadTreebank(const std::string& path, Vocabulary* vocab,
                                               const ParseOptions& options = {});
// The PTB text of a tree, as ParseTree reads it back.
std::string ToString(const Tree& tree, const Vocabulary& vocab);

// ---- synthetic trees ----

struct GeneratorOptions {
  uint64_t seed = 1;
  int vocabulary_size = 3000;  // ids 1 .. size-1 are words "w1", "w2", ...; 0 stays <unk>
  double mean_length = 19.0;   // sentence length in tokens: a clamped normal
  double stddev_length = 9.0;
  int min_length = 2;
  int max_length = 56;
  // Probability that a span splits off its first word (the right-branching
  // bias of English parses); otherwise the split point is uniform.
  double right_branching = 0.4;
  double zipf_exponent = 1.0;  // word frequencies
};

// `count` random full binary trees, the same for a given seed on every run
// (its own random source, SplitMix64, rather than <random>'s distributions,
// whose output differs between standard libraries).
// Labels: 2 (neutral) for 60% of the nodes, otherwise uniform over 0..4.
// `vocab` receives words "w1" .. "w<size-1>" (Generate fills it when empty).
std::vector<Tree> GenerateTrees(int count, const GeneratorOptions& options, Vocabulary* vocab);

struct TreebankStats {
  int trees = 0;
  double mean_length = 0;  // leaves per tree
  int max_length = 0;
  double mean_depth = 0;
  int max_depth = 0;
  int64_t nodes = 0;
  double label_share[kNumClasses] = {};
};
TreebankStats Stats(const std::vector<Tree>& trees);

// How much of a tree's per-node work `workers` workers could overlap, at
// best: its internal nodes as tasks of equal cost, each after its children
// (a TreeRNN's forward pass; the backward pass is the same tree reversed, so
// the same figures). The leaves are left out: the benchmark's models compute
// every leaf state in one batched product before the tree.
struct TreeParallelism {
  int internal_nodes = 0;
  int span = 0;           // internal nodes on the longest root-to-leaf path
  int best_schedule = 0;  // steps of an optimal schedule on `workers` workers
};
// Hu's highest-level-first list schedule, which is optimal for unit tasks
// whose precedences form an in-tree (T. C. Hu, Oper. Res. 9(6), 1961).
TreeParallelism Parallelism(const Tree& tree, int workers);

}  // namespace tdf_treernn

#endif  // TDF_BENCH_TREEBANK_H_
