// Checkpoints: Session::SaveVariables / RestoreVariables. Training resumed
// from a checkpoint must continue exactly where it stopped, optimizer state
// included, and a checkpoint that does not fit the session changes nothing.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autodiff_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/serialize.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;
using testing_autodiff::Values;
using Outs = std::vector<Output>;

constexpr DType kF = DType::kFloat64;

// loss = (pow(w, 4) - 0.3)^2 + sum((v - c)^2) with pow a recursive function,
// trained by Adam: its moment and step-count variables are part of what a
// checkpoint must hold for a resumed run to match an uninterrupted one.
struct Model {
  Graph graph;
  std::string step;
};

Model BuildModel() {
  GraphBuilder b;
  absl::Status defined = b.DefineFunction(
      {"pow", {{"x", kF}, {"n", DType::kInt64}}, {{"y", kF}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
        return f.Cond(
            f.LessEqual(a[1], f.Const<int64_t>(0)), [&] { return Outs{f.Op("OnesLike", {a[0]})}; },
            [&] { return Outs{f.Mul(a[0], f.Call("pow", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])}; });
      });
  EXPECT_TRUE(defined.ok()) << defined;
  Output w = b.Read(b.Variable("w", Tensor::Scalar<double>(0.5)));
  Output v = b.Read(b.Variable("v", *Tensor::FromVector<double>({0.1, 0.2, 0.3}, Shape({3}))));
  Output c = b.Const(*Tensor::FromVector<double>({1, 2, 3}, Shape({3})));
  Output fit = b.Sub(b.Call("pow", {w, b.Const<int64_t>(4)})[0], b.Const<double>(0.3));
  b.Identity(b.Add(b.Mul(fit, fit), b.Sum(b.Op("Square", {b.Sub(v, c)}))), "loss");
  Model m;
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  m.graph = *std::move(g);
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(m.graph, {"loss"}, {b.Name(w), b.Name(v)});
  EXPECT_TRUE(grads.ok()) << grads.status();
  AdamOptions adam;
  adam.learning_rate = 0.05;
  absl::StatusOr<std::string> step = AddAdamStep(m.graph, {"w", "v"}, *grads, adam);
  EXPECT_TRUE(step.ok()) << step.status();
  m.step = *step;
  return m;
}

std::unique_ptr<Session> NewSession(const Model& m) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(m.graph);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::vector<double> Train(Session& s, const Model& m, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    absl::StatusOr<std::vector<Tensor>> out = s.Run({}, {"loss"}, {m.step});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) break;
    losses.push_back((*out)[0].scalar<double>());
  }
  return losses;
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

class CheckpointTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CheckpointTest, ResumedTrainingMatchesUninterruptedTraining) {
  const Model m = BuildModel();
  std::unique_ptr<Session> whole = NewSession(m);
  ASSERT_NE(whole, nullptr);
  const std::vector<double> expected = Train(*whole, m, 40);
  ASSERT_EQ(expected.size(), 40u);
  ASSERT_LT(expected.back(), expected.front());

  std::unique_ptr<Session> first = NewSession(m);
  ASSERT_NE(first, nullptr);
  std::vector<double> losses = Train(*first, m, 20);
  const std::string path = TempPath(std::string("resume") + GetParam());
  ASSERT_TRUE(first->SaveVariables(path).ok());
  // The Adam state variables are in the checkpoint, not only w and v.
  const std::vector<std::string> names = first->VariableNames();
  EXPECT_GT(names.size(), 2u);
  absl::StatusOr<NamedTensors> saved = LoadTensors(path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ((*saved)[i].first, names[i]);

  std::unique_ptr<Session> second = NewSession(m);
  ASSERT_NE(second, nullptr);
  absl::Status restored = second->RestoreVariables(path);
  ASSERT_TRUE(restored.ok()) << restored;
  for (double loss : Train(*second, m, 20)) losses.push_back(loss);
  ASSERT_EQ(losses.size(), expected.size());
  for (size_t i = 0; i < losses.size(); ++i) EXPECT_EQ(losses[i], expected[i]) << "step " << i;
  for (const std::string& name : names) {
    EXPECT_EQ(Values(*second->ReadVariable(name)), Values(*whole->ReadVariable(name))) << name;
  }

  // Without the optimizer's state (w and v alone) the resumed run departs
  // from the uninterrupted one: the match above depends on that state.
  NamedTensors params;
  for (const auto& [name, value] : *saved)
    if (name == "w" || name == "v") params.emplace_back(name, value);
  ASSERT_EQ(params.size(), 2u);
  const std::string params_path = TempPath(std::string("params") + GetParam());
  ASSERT_TRUE(SaveTensors(params, params_path).ok());
  std::unique_ptr<Session> third = NewSession(m);
  ASSERT_NE(third, nullptr);
  ASSERT_TRUE(third->RestoreVariables(params_path, /*allow_missing=*/true).ok());
  const std::vector<double> fresh_optimizer = Train(*third, m, 20);
  ASSERT_EQ(fresh_optimizer.size(), 20u);
  EXPECT_NE(fresh_optimizer, std::vector<double>(expected.begin() + 20, expected.end()));
  std::remove(path.c_str());
  std::remove(params_path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Forms, CheckpointTest, ::testing::Values(".ckpt", ".pbtxt"),
                         [](const auto& info) { return std::string(info.param[1] == 'c' ? "Binary" : "Text"); });

// Restoring a checkpoint that does not fit fails with the reason and assigns
// nothing, even to the variables that did fit.
TEST(Checkpoint, AMismatchedCheckpointChangesNothing) {
  const Model m = BuildModel();
  std::unique_ptr<Session> s = NewSession(m);
  ASSERT_NE(s, nullptr);
  const std::string path = TempPath("mismatch.ckpt");
  const Tensor new_w = Tensor::Scalar<double>(7.0);
  const Tensor v3 = *Tensor::FromVector<double>({4, 5, 6}, Shape({3}));
  struct Case {
    NamedTensors tensors;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"w", new_w}, {"nosuch", v3}}, absl::StatusCode::kNotFound, "the session has no variable 'nosuch'"},
      {{{"w", new_w}, {"v", *Tensor::FromVector<double>({4, 5}, Shape({2}))}},
       absl::StatusCode::kInvalidArgument,
       "variable 'v' is float64[3], the checkpoint holds float64[2]"},
      {{{"w", new_w}, {"v", *Tensor::FromVector<float>({4, 5, 6}, Shape({3}))}},
       absl::StatusCode::kInvalidArgument,
       "variable 'v' is float64[3], the checkpoint holds float32[3]"},
      {{{"w", new_w}, {"v", v3}}, absl::StatusCode::kNotFound, "no value for variables"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(SaveTensors(c.tensors, path).ok());
    absl::Status st = s->RestoreVariables(path);
    EXPECT_EQ(st.code(), c.code) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(st.message()), HasSubstr(path));
    EXPECT_EQ(s->ReadVariable("w")->scalar<double>(), 0.5);
    EXPECT_EQ(Values(*s->ReadVariable("v")), (std::vector<double>{0.1, 0.2, 0.3}));
  }
  // The same partial checkpoint is accepted when asked for.
  absl::Status partial = s->RestoreVariables(path, /*allow_missing=*/true);
  ASSERT_TRUE(partial.ok()) << partial;
  EXPECT_EQ(s->ReadVariable("w")->scalar<double>(), 7.0);
  EXPECT_EQ(Values(*s->ReadVariable("v")), (std::vector<double>{4, 5, 6}));

  absl::Status missing = s->RestoreVariables(TempPath("no_such_checkpoint.ckpt"));
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
}

// A save replaces the file whole and leaves no temporary file behind.
TEST(Checkpoint, SavingReplacesTheFileWhole) {
  const Model m = BuildModel();
  std::unique_ptr<Session> s = NewSession(m);
  ASSERT_NE(s, nullptr);
  const std::string dir = TempPath("checkpoint_dir");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.ckpt";
  ASSERT_TRUE(s->SaveVariables(path).ok());
  Train(*s, m, 3);
  ASSERT_TRUE(s->SaveVariables(path).ok());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "model.ckpt");
  }
  EXPECT_EQ(files, 1);
  std::unique_ptr<Session> other = NewSession(m);
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->RestoreVariables(path).ok());
  EXPECT_EQ(other->ReadVariable("w")->scalar<double>(), s->ReadVariable("w")->scalar<double>());
  // Saving into a missing directory fails naming it and creates nothing.
  absl::Status no_dir = s->SaveVariables(dir + "/missing/model.ckpt");
  EXPECT_EQ(no_dir.code(), absl::StatusCode::kNotFound) << no_dir;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tdf
