// The TreeRNN benchmark's model (bench/treernn.h): the native reference's
// gradient against finite differences, and the three tdf implementations
// (recursion, iteration, unrolled) against the native reference — loss and
// parameters after SGD steps, float64, at small sizes.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "treebank.h"
#include "treernn.h"

namespace tdf_treernn {
namespace {

ModelConfig SmallConfig(int vocabulary) {
  ModelConfig c;
  c.vocabulary_size = vocabulary;
  c.embedding = 6;
  c.hidden = 4;
  c.dtype = tdf::DType::kFloat64;
  c.learning_rate = 0.1;
  return c;
}

std::vector<Tree> SmallTrees(int count, Vocabulary* vocab) {
  GeneratorOptions g;
  g.vocabulary_size = 20;
  g.mean_length = 5;
  g.stddev_length = 3;
  g.min_length = 1;
  g.max_length = 9;
  return GenerateTrees(count, g, vocab);
}

TEST(TreeRnnNative, GradientMatchesFiniteDifferences) {
  Vocabulary vocab;
  std::vector<Tree> trees = SmallTrees(3, &vocab);
  const ModelConfig c = SmallConfig(vocab.size());
  const Batch batch = {&trees[0], &trees[1], &trees[2]};
  Parameters p = InitParameters(c);
  // Non-zero biases, so their gradient paths are exercised with generic values.
  for (int i : {2, 4, 6})
    for (int64_t k = 0; k < p.t[i].num_elements(); ++k) p.t[i].mutable_data<double>()[k] = 0.1 * (k % 3) - 0.1;
  Parameters grads;
  NativeLoss(c, p, batch, &grads);
  constexpr double kH = 1e-6;
  for (int i = 0; i < kNumParameters; ++i) {
    for (int64_t k = 0; k < p.t[i].num_elements(); ++k) {
      const double x0 = p.t[i].data<double>()[k];
      p.t[i].mutable_data<double>()[k] = x0 + kH;
      const double up = NativeLoss(c, p, batch);
      p.t[i].mutable_data<double>()[k] = x0 - kH;
      const double down = NativeLoss(c, p, batch);
      p.t[i].mutable_data<double>()[k] = x0;
      const double numeric = (up - down) / (2 * kH);
      EXPECT_NEAR(grads.t[i].data<double>()[k], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << kParameterNames[i] << "[" << k << "]";
    }
  }
}

class TreeRnnImpl : public ::testing::TestWithParam<Impl> {};

TEST_P(TreeRnnImpl, TrainingMatchesNative) {
  Vocabulary vocab;
  std::vector<Tree> trees = SmallTrees(8, &vocab);
  const ModelConfig c = SmallConfig(vocab.size());
  for (int batch_size : {1, 4}) {
    for (int workers : {1, 2}) {
      SCOPED_TRACE(testing::Message() << "batch " << batch_size << ", " << workers << " workers");
      Parameters native = InitParameters(c);
      absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(GetParam(), c, native, batch_size, true, workers);
      if (!model.ok() && model.status().code() == absl::StatusCode::kUnimplemented)
        GTEST_SKIP() << model.status();
      ASSERT_TRUE(model.ok()) << model.status();
      for (int step = 0; step < 2; ++step) {
        Batch batch;
        for (int k = 0; k < batch_size; ++k) batch.push_back(&trees[step * batch_size + k]);
        Parameters grads;
        const double want = NativeLoss(c, native, batch, &grads);
        NativeSgd(c, grads, &native);
        absl::StatusOr<PreparedBatch> prepared = (*model)->Prepare(batch);
        ASSERT_TRUE(prepared.ok()) << prepared.status();
        absl::StatusOr<double> got = (*model)->Run(*prepared);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_NEAR(*got, want, 1e-10 * std::max(1.0, std::abs(want)));
        EXPECT_EQ((*model)->last_stats().live_frames_after_run, 0);
      }
      absl::StatusOr<Parameters> after = (*model)->ReadParameters();
      ASSERT_TRUE(after.ok()) << after.status();
      EXPECT_LT(MaxRelativeDifference(*after, native), 1e-10);
      EXPECT_GT(MaxRelativeDifference(*after, InitParameters(c)), 1e-4);  // it did learn something
    }
  }
}

TEST_P(TreeRnnImpl, InferenceMatchesNativeAndLeavesParametersAlone) {
  Vocabulary vocab;
  std::vector<Tree> trees = SmallTrees(6, &vocab);
  const ModelConfig c = SmallConfig(vocab.size());
  const Parameters init = InitParameters(c);
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(GetParam(), c, init, 3, false, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  for (int start : {0, 3}) {
    Batch batch = {&trees[start], &trees[start + 1], &trees[start + 2]};
    absl::StatusOr<PreparedBatch> prepared = (*model)->Prepare(batch);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    absl::StatusOr<double> got = (*model)->Run(*prepared);
    ASSERT_TRUE(got.ok()) << got.status();
    const double want = NativeLoss(c, init, batch);
    EXPECT_NEAR(*got, want, 1e-10 * std::max(1.0, std::abs(want)));
  }
  absl::StatusOr<Parameters> after = (*model)->ReadParameters();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(MaxRelativeDifference(*after, init), 0.0);
}

TEST_P(TreeRnnImpl, RejectsBadBatches) {
  Vocabulary vocab;
  std::vector<Tree> trees = SmallTrees(2, &vocab);
  const ModelConfig c = SmallConfig(vocab.size());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(GetParam(), c, InitParameters(c), 2, false, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_FALSE((*model)->Prepare({&trees[0]}).ok());  // one tree for a batch of two
  Tree bad = trees[0];
  for (TreeNode& n : bad.nodes)
    if (n.is_leaf()) n.word = c.vocabulary_size;
  EXPECT_FALSE((*model)->Prepare({&trees[0], &bad}).ok());
}

INSTANTIATE_TEST_SUITE_P(All, TreeRnnImpl, ::testing::Values(Impl::kRecursion, Impl::kIteration, Impl::kUnrolled),
                         [](const ::testing::TestParamInfo<Impl>& info) { return std::string(ImplName(info.param)); });

}  // namespace
}  // namespace tdf_treernn
