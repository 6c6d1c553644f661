// File: bench/treernn_profile.cc
//
// tdf_treernn_profile: runs one TreeRNN case (bench/treernn.h) a fixed number
// of times and nothing else, for profilers (perf record, valgrind --tool=
// cachegrind): tdf_treernn_bench's machine probes and timing loop would
// swamp the profile, and instruction counts need a fixed amount of work.
//
//   tdf_treernn_profile [--impl=recursion|batched|iteration|native] [--train]
//                       [--batch=25] [--workers=1] [--runs=20] [--trees=100]
//
// Prints trees/s (wall clock, only indicative under a profiler) and, for
// the tdf models, the last run's firings and batched firings.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "treebank.h"
#include "treernn.h"

namespace tdf_treernn {
namespace {

int Main(int argc, char** argv) {
  std::string impl_name = "batched";
  bool train = false;
  int batch = 25, workers = 1, runs = 20, trees = 100;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--impl=", 7) == 0) impl_name = a + 7;
    else if (std::strcmp(a, "--train") == 0) train = true;
    else if (std::strncmp(a, "--batch=", 8) == 0) batch = std::atoi(a + 8);
    else if (std::strncmp(a, "--workers=", 10) == 0) workers = std::atoi(a + 10);
    else if (std::strncmp(a, "--runs=", 7) == 0) runs = std::atoi(a + 7);
    else if (std::strncmp(a, "--trees=", 8) == 0) trees = std::atoi(a + 8);
    else {
      std::fprintf(stderr, "tdf_treernn_profile: unknown flag %s\n", a);
      return 2;
    }
  }
  if (batch < 1 || workers < 1 || runs < 1 || trees < batch) {
    std::fprintf(stderr, "tdf_treernn_profile: bad sizes\n");
    return 2;
  }
  Vocabulary vocab;
  GeneratorOptions gen;
  std::vector<Tree> data = GenerateTrees(trees, gen, &vocab);
  ModelConfig config;
  config.vocabulary_size = vocab.size();
  Parameters params = InitParameters(config);
  std::vector<Batch> batches;
  for (int start = 0; start + batch <= trees; start += batch) {
    Batch b;
    for (int k = 0; k < batch; ++k) b.push_back(&data[start + k]);
    batches.push_back(b);
  }
  const bool native = impl_name == "native";
  std::unique_ptr<Model> model;
  std::vector<PreparedBatch> prepared;
  if (!native) {
    Impl impl;
    if (impl_name == "recursion") impl = Impl::kRecursion;
    else if (impl_name == "batched") impl = Impl::kBatchedRecursion;
    else if (impl_name == "iteration") impl = Impl::kIteration;
    else {
      std::fprintf(stderr, "tdf_treernn_profile: unknown impl %s\n", impl_name.c_str());
      return 2;
    }
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Create(impl, config, params, batch, train, workers);
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
      return 1;
    }
    model = std::move(*m);
    for (const Batch& b : batches) prepared.push_back(*model->Prepare(b));
  }
  const auto t0 = std::chrono::steady_clock::now();
  double loss = 0;
  for (int r = 0; r < runs; ++r) {
    const size_t k = r % batches.size();
    if (native) {
      Parameters grads;
      loss = NativeLoss(config, params, batches[k], train ? &grads : nullptr);
      if (train) NativeSgd(config, grads, &params, /*in_place=*/true);
    } else {
      absl::StatusOr<double> l = model->Run(prepared[k]);
      if (!l.ok()) {
        std::fprintf(stderr, "%s\n", l.status().ToString().c_str());
        return 1;
      }
      loss = *l;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s %s b%d %dw: %.0f trees/s, loss %.6f\n", train ? "train" : "infer", impl_name.c_str(), batch,
              workers, runs * batch / s, loss);
  if (model) {
    const tdf::RunStats& st = model->last_stats();
    std::printf("last run: %lld firings, %lld batched firings of %lld instances\n",
                static_cast<long long>(st.firings), static_cast<long long>(st.batched_firings),
                static_cast<long long>(st.batched_instances));
    std::printf("batched inputs taken without a copy: %lld\n", static_cast<long long>(st.batched_inputs_without_copy));
    std::printf("live firings by op:");
    for (const auto& [op, counts] : st.firings_by_op) std::printf(" %s %lld", op.c_str(), static_cast<long long>(counts.first));
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace tdf_treernn

int main(int argc, char** argv) { return tdf_treernn::Main(argc, argv); }
