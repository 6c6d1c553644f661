// Fixed cases next to the kernel robustness test (kernel_robustness.h):
// each bug its random cases found, as one case; and a few representative
// ops run through a Session with feeds of the wrong dtype or shape, whose
// status names the node and its op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/kernel_robustness.h"
#include "kernels/kernel_test_util.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/state_kernels.h"
#include "tdf/builder.h"
#include "tdf/kernel.h"
#include "tdf/session.h"

namespace tdf {
namespace kernel_robustness {
namespace {

using kernel_test::MakeNode;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Regressions: each bug the random cases found, as one fixed case.

using kernel_test::F64;
using kernel_test::RunOp;

// Reshape to [-1, INT64_MAX, 5]: the known dims' product overflowed
// (undefined behaviour) on every firing; now the kernel is refused.
TEST(KernelRobustnessRegression, ReshapeKnownDimsOverflow) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{-1, kMax, 5}, {3, -1, int64_t{1} << 40, int64_t{1} << 40}, {kMax, kMax}}) {
    absl::Status s = RunOp("Reshape", {F64({1, 2, 3}, {3})}, {{"shape", shape}}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("too many elements"));
  }
  // A 0 among the known dims is not an overflow, and still an error.
  EXPECT_FALSE(RunOp("Reshape", {F64({1, 2, 3}, {3})}, {{"shape", std::vector<int64_t>{-1, 0, kMax}}}).ok());
}

// Slice and SliceGrad with begin INT64_MIN and size -1 computed dim - begin
// (signed overflow) before checking begin.
TEST(KernelRobustnessRegression, SliceBeginInt64MinWithSizeToTheEnd) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  AttrMap attrs = {{"begin", std::vector<int64_t>{0, kMin}}, {"size", std::vector<int64_t>{-1, -1}}};
  Tensor x = F64({1, 2, 3, 4, 5, 6}, {2, 3});
  absl::Status s = RunOp("Slice", {x}, attrs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of bounds"));
  s = RunOp("SliceGrad", {x, x}, attrs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of bounds"));
}

// ConcatGrad wrote one output per part and IndexedRowsSplit always two,
// whatever num_outputs the context had: past the end of the outputs.
TEST(KernelRobustnessRegression, MultiOutputKernelsRespectNumOutputs) {
  Tensor dy = F64({1, 2, 3}, {3});
  absl::StatusOr<std::vector<Tensor>> out =
      RunOp("ConcatGrad", {dy, F64({1}, {1}), F64({1, 2}, {2})}, {{"axis", int64_t{0}}}, /*num_outputs=*/1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  out = RunOp("ConcatGrad", {dy, F64({1}, {1}), F64({1, 2}, {2})}, {{"axis", int64_t{0}}}, /*num_outputs=*/2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(kernel_test::TensorEq((*out)[1], F64({2, 3}, {2})));

  // One indexed row [index 1 | 5] of a table [2, 1].
  Tensor rows = F64({0, 5}, {1, 2});
  const int64_t one = 1;
  std::memcpy(rows.mutable_data<double>(), &one, sizeof(one));
  out = RunOp("IndexedRowsSplit", {rows, F64({0, 0}, {2, 1})}, {}, /*num_outputs=*/1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  out = RunOp("IndexedRowsSplit", {rows, F64({0, 0}, {2, 1})}, {}, /*num_outputs=*/2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(kernel_test::TensorEq((*out)[0], Tensor::Vector<int64_t>({1})));
}

// Identity of an invalid tensor returned OK with an invalid output.
TEST(KernelRobustnessRegression, IdentityOfAnInvalidTensorIsAnError) {
  EXPECT_EQ(RunOp("Identity", {Tensor()}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RunOp("Identity", {Tensor::Scalar<int64_t>(3)}).ok());
}

// Tensor::Empty bounded the element count by int64 but not the byte count:
// an int64 [2^61] wrapped to 0 bytes and came back as 2^61 elements over
// a 64-byte buffer (reachable through a Variable's shape attr).
TEST(KernelRobustnessRegression, TensorWhoseByteCountWrapsIsRefused) {
  EXPECT_EQ(Tensor::Empty(DType::kInt64, Shape({int64_t{1} << 61})).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Tensor::Zeros(DType::kFloat32, Shape({int64_t{1} << 61, 2})).status().code(),
            absl::StatusCode::kResourceExhausted);
  // 4096 bytes mod 2^64: must not become a view of the shared zero mapping.
  EXPECT_FALSE(kernels::Zeros(DType::kInt64, Shape({(int64_t{1} << 61) + 512})).ok());

  Graph g;
  NodeDef v = MakeNode("Variable", 0, {{"dtype", DType::kInt64}, {"shape", Shape({int64_t{1} << 61})}});
  v.name = "v";
  g.node.push_back(v);
  EXPECT_FALSE(Session::Create(g).ok());
}

// The state kernels read ctx.input(0) (and 1, 2) without checking the
// arity: Read with no inputs dereferenced a null input array.
TEST(KernelRobustnessRegression, StateKernelsCheckTheirArity) {
  runtime::VariableStore store;
  store.slots.push_back(std::make_unique<runtime::VariableSlot>());
  store.slots[0]->name = "v";
  store.slots[0]->dtype = DType::kInt64;
  {
    absl::MutexLock lock(&store.slots[0]->mu);
    store.slots[0]->value = Tensor::Scalar<int64_t>(7);
  }
  const Tensor handle = Tensor::Scalar<int64_t>(0);
  for (const auto& [op, arity] : std::vector<std::pair<std::string, int>>{
           {"Read", 1}, {"Assign", 2}, {"AssignAdd", 2}, {"AssignSub", 2}, {"ScatterAdd", 3}}) {
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel =
        runtime::MakeStateKernel(MakeNode(op, arity, {{"dtype", DType::kInt64}}));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    for (int n : {0, arity - 1, arity + 1}) {
      if (n == arity) continue;
      std::vector<const Tensor*> inputs(n, &handle);
      Tensor out[1];
      KernelContext ctx(inputs.data(), n, out, 1, Device::Cpu());
      ctx.set_session_state(&store);
      absl::Status s = (*kernel)->Compute(ctx);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op << " with " << n << " inputs: " << s;
    }
  }
  // Missing attr dtype: refused when the kernel is made, naming the node.
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = runtime::MakeStateKernel(MakeNode("Read", 1));
  EXPECT_THAT(std::string(kernel.status().message()), HasSubstr("test_Read"));
}

// A Read whose handle comes through a Placeholder is not traced back to its
// Variable by validation, so nothing checked its attr dtype: it returned a
// float64 for a node typed int64. Now the run fails naming the node.
TEST(KernelRobustnessRegression, ReadOfAFedHandleChecksTheVariablesDtype) {
  GraphBuilder b;
  Output v = b.Variable("v", Tensor::Scalar<double>(2.5));
  Output h = b.Placeholder("h", DType::kInt64);
  b.Identity(b.Op("Read", {h}, {{"dtype", DType::kInt64}}, "read"), "result");
  b.Identity(v, "handle");
  absl::StatusOr<Graph> graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(*graph);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<Tensor>> handle = (*s)->Run({}, {"handle"});
  ASSERT_TRUE(handle.ok()) << handle.status();
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run({{"h", handle->at(0)}}, {"result"});
  ASSERT_FALSE(out.ok()) << out->at(0).DebugString();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              AllOf(HasSubstr("node 'read' (Read) at tag []"), HasSubstr("variable 'v' is float64, attr dtype is int64")));
}

// ---------------------------------------------------------------------------
// Through a Session: a Placeholder fed a tensor of the wrong dtype fails at
// the feed, naming the Placeholder; one of the wrong shape fails in the
// consuming kernel, and the status names that node, its op and the tag.

struct SessionCase {
  std::string what;
  std::function<void(GraphBuilder&)> build;  // placeholders "x" (and "y"); the node under test "n"
  std::vector<std::pair<std::string, Tensor>> good;
  std::string op;
  std::vector<std::pair<std::string, Tensor>> wrong_shape;
  std::pair<std::string, Tensor> wrong_dtype;
  std::string wrong_dtype_message;
};

Tensor F32(std::vector<float> v, Shape s) { return *Tensor::FromVector<float>(v, s); }
Tensor I64(std::vector<int64_t> v, Shape s) { return *Tensor::FromVector<int64_t>(v, s); }

std::vector<SessionCase> SessionCases() {
  const Tensor f22 = F32({1, 2, 3, 4}, {2, 2});
  return {
      {"elementwise binary",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Add", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kFloat32)}, {}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", f22}},
       "Add",
       {{"x", f22}, {"y", F32({1, 2, 3}, {3})}},
       {"x", Tensor::Scalar<int64_t>(1)},
       "feed 'x' is int64; node 'x' (Placeholder) wants float32"},
      {"MatMul",
       [](GraphBuilder& b) {
         b.Identity(b.Op("MatMul", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kFloat32)}, {}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", f22}},
       "MatMul",
       {{"x", f22}, {"y", F32({1, 2, 3}, {3, 1})}},
       {"y", Tensor::Scalar<double>(1)},
       "feed 'y' is float64; node 'y' (Placeholder) wants float32"},
      {"reduction",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Sum", {b.Placeholder("x", DType::kFloat32)}, {{"axes", std::vector<int64_t>{1}}}, "n"),
                    "result");
       },
       {{"x", f22}},
       "Sum",
       {{"x", F32({1, 2}, {2})}},
       {"x", I64({1, 2}, {2})},
       "feed 'x' is int64; node 'x' (Placeholder) wants float32"},
      {"Gather",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Gather", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kInt64)}, {}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", I64({1, 0}, {2})}},
       "Gather",
       {{"x", Tensor::Scalar<float>(1)}, {"y", I64({0}, {1})}},
       {"y", F32({0}, {1})},
       "feed 'y' is float32; node 'y' (Placeholder) wants int64"},
      {"Concat",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Concat", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kFloat32)},
                         {{"axis", int64_t{0}}}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", f22}},
       "Concat",
       {{"x", f22}, {"y", F32({1, 2, 3}, {1, 3})}},
       {"x", Tensor::Scalar<bool>(true)},
       "feed 'x' is bool; node 'x' (Placeholder) wants float32"},
      {"Reshape",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Reshape", {b.Placeholder("x", DType::kFloat32)}, {{"shape", std::vector<int64_t>{4}}}, "n"),
                    "result");
       },
       {{"x", f22}},
       "Reshape",
       {{"x", F32({1, 2, 3}, {3})}},
       {"x", Tensor()},
       "feed 'x' is invalid; node 'x' (Placeholder) wants float32"},
  };
}

class SessionFeedErrorsTest : public ::testing::TestWithParam<int> {};

TEST_P(SessionFeedErrorsTest, WrongDtypeOrShapeNamesTheNode) {
  for (const SessionCase& c : SessionCases()) {
    SCOPED_TRACE(c.what);
    GraphBuilder b;
    c.build(b);
    absl::StatusOr<Graph> graph = b.Build();
    ASSERT_TRUE(graph.ok()) << graph.status();
    SessionOptions options;
    options.num_workers = GetParam();
    absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(*graph, options);
    ASSERT_TRUE(s.ok()) << s.status();

    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(c.wrong_shape, {"result"});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(absl::StrCat("node 'n' (", c.op, ") at tag []")));

    std::vector<std::pair<std::string, Tensor>> feeds = c.good;
    for (auto& [name, value] : feeds)
      if (name == c.wrong_dtype.first) value = c.wrong_dtype.second;
    out = (*s)->Run(feeds, {"result"});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(c.wrong_dtype_message));

    // The session is still usable.
    out = (*s)->Run(c.good, {"result"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(WellFormed(out->at(0)));
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, SessionFeedErrorsTest, ::testing::Values(1, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "Workers");
                         });

}  // namespace
}  // namespace kernel_robustness
}  // namespace tdf
