// AssignAdd and ScatterAdd write into a variable's buffer only when nothing
// else shares it: a value handed out (a Read's token, a fetch, a
// ReadVariable) never changes afterwards. ScatterAdd: the sparse row update
// that AddSgdStep uses for a Gather's gradient.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::MakeSession;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> ValuesOf(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

class VariableUpdateTest : public ::testing::TestWithParam<int> {
 protected:
  SessionOptions Options() const {
    SessionOptions o;
    o.num_workers = GetParam();
    return o;
  }
};

TEST_P(VariableUpdateTest, AssignAddAfterReadInOneRun) {
  GraphBuilder b;
  Output v = b.Variable("v", *Tensor::FromVector<double>({1, 2, 3, 4}, Shape({4})));
  Output delta = b.Placeholder("delta", DType::kFloat64);
  // "old" reads before the add (control edge), "new" is the add's result.
  Output old = b.Identity(b.Read(v), "old");
  Output added = b.AssignAdd(v, delta);
  b.AddControlInput(added, old);
  b.Identity(added, "new");
  auto s = MakeSession(Built(b), Options());
  ASSERT_NE(s, nullptr);
  const Tensor d = *Tensor::FromVector<double>({10, 20, 30, 40}, Shape({4}));
  std::vector<std::vector<Tensor>> kept;
  for (int run = 0; run < 3; ++run) {
    auto out = s->Run({{"delta", d}}, {"old", "new"}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    kept.push_back(*out);
  }
  for (int run = 0; run < 3; ++run) {
    const double k = run;
    EXPECT_EQ(ValuesOf<double>(kept[run][0]), (std::vector<double>{1 + 10 * k, 2 + 20 * k, 3 + 30 * k, 4 + 40 * k}));
    EXPECT_EQ(ValuesOf<double>(kept[run][1]),
              (std::vector<double>{11 + 10 * k, 22 + 20 * k, 33 + 30 * k, 44 + 40 * k}));
  }
}

TEST_P(VariableUpdateTest, AssignAddNeverChangesValuesHandedOut) {
  GraphBuilder b;
  Output v = b.Variable("v", *Tensor::FromVector<double>({1, 2, 3, 4}, Shape({4})));
  b.Identity(b.AssignAdd(v, b.Placeholder("delta", DType::kFloat64)), "step");
  auto s = MakeSession(Built(b), Options());
  ASSERT_NE(s, nullptr);
  const Tensor d = *Tensor::FromVector<double>({10, 20, 30, 40}, Shape({4}));
  Tensor before = *s->ReadVariable("v");
  // Steps with nothing else holding the value: after the first (the
  // initial value is shared with the graph) the variable owns its buffer
  // alone and adds in place.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s->Run({{"delta", d}}, {}, {"step"}).ok());
  EXPECT_EQ(ValuesOf<double>(*s->ReadVariable("v")), (std::vector<double>{51, 102, 153, 204}));
  EXPECT_EQ(ValuesOf<double>(before), (std::vector<double>{1, 2, 3, 4}));
  auto out = s->Run({{"delta", d}}, {"step"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor fetched = (*out)[0];
  Tensor read = *s->ReadVariable("v");
  ASSERT_TRUE(s->Run({{"delta", d}}, {}, {"step"}).ok());
  EXPECT_EQ(ValuesOf<double>(fetched), (std::vector<double>{61, 122, 183, 244}));
  EXPECT_EQ(ValuesOf<double>(read), (std::vector<double>{61, 122, 183, 244}));
  EXPECT_EQ(ValuesOf<double>(*s->ReadVariable("v")), (std::vector<double>{71, 142, 213, 284}));
}

// result = ScatterAdd(E, indices, updates).
Graph Scatter(DType dtype, DType index_dtype, const Tensor& initial) {
  GraphBuilder b;
  Output e = b.Variable("E", initial);
  Output idx = b.Placeholder("indices", index_dtype);
  Output upd = b.Placeholder("updates", dtype);
  b.Identity(b.Op("ScatterAdd", {e, idx, upd}, {{"dtype", dtype}}), "result");
  return Built(b);
}

TEST_P(VariableUpdateTest, ScatterAddAddsRowsAndRepeatsAccumulate) {
  std::vector<float> init(5 * 3);
  for (int i = 0; i < 15; ++i) init[i] = static_cast<float>(i);
  auto s = MakeSession(Scatter(DType::kFloat32, DType::kInt64, *Tensor::FromVector<float>(init, Shape({5, 3}))),
                       Options());
  ASSERT_NE(s, nullptr);
  Tensor held = *s->ReadVariable("E");
  const Tensor idx = Tensor::Vector<int64_t>({1, 3, 1, 0});
  const Tensor upd = *Tensor::FromVector<float>({1, 1, 1, 10, 10, 10, 100, 100, 100, 0.5, 0.5, 0.5}, Shape({4, 3}));
  std::vector<float> want = init;
  for (int run = 0; run < 3; ++run) {
    auto out = s->Run({{"indices", idx}, {"updates", upd}}, {"result"}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int k = 0; k < 3; ++k) {
      want[1 * 3 + k] += 101;
      want[3 * 3 + k] += 10;
      want[0 * 3 + k] += 0.5f;
    }
    EXPECT_EQ(ValuesOf<float>((*out)[0]), want) << "run " << run;
  }
  EXPECT_EQ(ValuesOf<float>(*s->ReadVariable("E")), want);
  EXPECT_EQ(ValuesOf<float>(held), init);  // read before the updates: unchanged
}

TEST_P(VariableUpdateTest, ScatterAddInt32IndicesAndHigherRank) {
  // E [3, 2, 2]: each index picks a [2, 2] block; updates [2, 2, 2].
  std::vector<double> init(12, 1.0);
  auto s = MakeSession(Scatter(DType::kFloat64, DType::kInt32, *Tensor::FromVector<double>(init, Shape({3, 2, 2}))),
                       Options());
  ASSERT_NE(s, nullptr);
  auto out = s->Run({{"indices", Tensor::Vector<int32_t>({2, 0})},
                     {"updates", *Tensor::FromVector<double>({1, 2, 3, 4, 5, 6, 7, 8}, Shape({2, 2, 2}))}},
                    {"result"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ValuesOf<double>((*out)[0]), (std::vector<double>{6, 7, 8, 9, 1, 1, 1, 1, 2, 3, 4, 5}));
}

TEST_P(VariableUpdateTest, ScatterAddErrors) {
  auto s = MakeSession(Scatter(DType::kFloat32, DType::kInt64, *Tensor::Zeros(DType::kFloat32, Shape({4, 2}))),
                       Options());
  ASSERT_NE(s, nullptr);
  const Tensor two_rows = *Tensor::Zeros(DType::kFloat32, Shape({2, 2}));
  auto bad_index = s->Run({{"indices", Tensor::Vector<int64_t>({1, 4})}, {"updates", two_rows}}, {"result"}, {});
  EXPECT_EQ(bad_index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_index.status().message(), HasSubstr("out of range"));
  auto negative = s->Run({{"indices", Tensor::Vector<int64_t>({-1, 0})}, {"updates", two_rows}}, {"result"}, {});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_shape = s->Run({{"indices", Tensor::Vector<int64_t>({1, 2, 3})}, {"updates", two_rows}}, {"result"}, {});
  EXPECT_EQ(bad_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_shape.status().message(), HasSubstr("updates have shape"));
  // A failed update leaves the variable as it was.
  EXPECT_EQ(ValuesOf<float>(*s->ReadVariable("E")), std::vector<float>(8, 0.0f));
}

INSTANTIATE_TEST_SUITE_P(Workers, VariableUpdateTest, ::testing::Values(1, 2), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
