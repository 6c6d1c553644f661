// Batching rules (src/runtime/batching/batching_rules.h): for every op with
// a rule, one batched kernel call gives each instance what its own call
// gives, on random shapes, with broadcasting and empty tensors; float64 to
// 1e-12 relative, float32 to 1e-5 relative (a batched MatMul is a GEMM
// whose summation order may differ from the one-row product's).
#include "runtime/batching/batching_rules.h"

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"
#include "tdf/kernel.h"

namespace tdf {
namespace runtime {
namespace batching {
namespace {

using kernel_test::MakeNode;

Tensor Random(std::mt19937_64& rng, DType dtype, const Shape& shape, double lo = -1, double hi = 1) {
  Tensor t = *Tensor::Zeros(dtype, shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kFloat32) {
      t.mutable_data<float>()[i] = static_cast<float>(u(rng));
    } else {
      t.mutable_data<double>()[i] = u(rng);
    }
  }
  return t;
}

double At(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kFloat64: return t.data<double>()[i];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kInt32: return t.data<int32_t>()[i];
    default: return t.data<bool>()[i];
  }
}

// Each instance's inputs; shared ones are the same Tensor (one buffer).
using MakeInstance = std::function<std::vector<Tensor>(std::mt19937_64&)>;

// Fires `node` once per instance and once batched; compares. Returns the
// batched status (FAILED_PRECONDITION: the batch must fire alone).
absl::Status CheckBatchedEqualsAlone(const NodeDef& node, int num_outputs, int n, const MakeInstance& make,
                                     uint64_t seed = 1) {
  SCOPED_TRACE(absl::StrCat(node.op, " x", n, " seed ", seed));
  std::optional<BatchRule> rule = RuleFor(node);
  EXPECT_TRUE(rule.has_value()) << node.op;
  if (!rule) return absl::InternalError("no rule");
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = KernelRegistry::Global()->Create(node, Device::Type::kCpu);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return kernel.status();
  std::mt19937_64 rng(seed);
  std::vector<std::vector<Tensor>> instances;
  for (int k = 0; k < n; ++k) instances.push_back(make(rng));
  const int num_inputs = static_cast<int>(instances[0].size());
  std::vector<const Tensor*> flat;
  for (auto& inst : instances) {
    std::vector<const Tensor*> ptrs;
    for (Tensor& t : inst) {
      flat.push_back(&t);
      ptrs.push_back(&t);
    }
    EXPECT_TRUE(Accepts(*rule, ptrs)) << node.op;
  }
  std::vector<Tensor> batched;
  absl::Status s = RunBatched(*rule, **kernel, BatchInputs{n, num_inputs, flat}, num_outputs, {}, &batched);
  if (!s.ok()) return s;
  EXPECT_EQ(batched.size(), static_cast<size_t>(n) * num_outputs);
  for (int k = 0; k < n; ++k) {
    std::vector<const Tensor*> in;
    for (Tensor& t : instances[k]) in.push_back(&t);
    std::vector<Tensor> out(num_outputs);
    KernelContext ctx(in.data(), num_inputs, out.data(), num_outputs, Device::Cpu());
    absl::Status alone = (*kernel)->Compute(ctx);
    EXPECT_TRUE(alone.ok()) << alone;
    if (!alone.ok()) continue;
    for (int j = 0; j < num_outputs; ++j) {
      const Tensor& want = out[j];
      const Tensor& got = batched[static_cast<size_t>(k) * num_outputs + j];
      EXPECT_EQ(got.dtype(), want.dtype());
      EXPECT_EQ(got.shape(), want.shape()) << "instance " << k << " output " << j;
      if (got.dtype() != want.dtype() || !(got.shape() == want.shape())) continue;
      EXPECT_EQ(got.is_inline_scalar(), want.is_inline_scalar());
      const double tol = want.dtype() == DType::kFloat32 ? 1e-5 : want.dtype() == DType::kFloat64 ? 1e-12 : 0;
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        const double a = At(got, i), b = At(want, i);
        EXPECT_LE(std::abs(a - b), tol * std::max(1.0, std::abs(b)))
            << "instance " << k << " output " << j << " element " << i << ": " << a << " vs " << b;
      }
    }
  }
  return absl::OkStatus();
}

std::vector<Shape> SomeShapes(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> d(1, 5);
  return {Shape({}), Shape({d(rng)}), Shape({1, 150}), Shape({d(rng), d(rng)}), Shape({0, 3}),
          Shape({d(rng), 0}), Shape({2, d(rng), d(rng)})};
}

class BatchingRulesTest : public ::testing::TestWithParam<DType> {};

TEST_P(BatchingRulesTest, UnaryElementwise) {
  const DType T = GetParam();
  std::mt19937_64 shapes_rng(3);
  for (const char* op : {"Tanh", "Sigmoid", "Relu", "Exp", "Neg", "Abs", "Square", "Sign", "Reciprocal"}) {
    for (const Shape& shape : SomeShapes(shapes_rng)) {
      for (int n : {2, 7}) {
        EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode(op, 1), 1, n,
                                            [&](std::mt19937_64& r) {
                                              return std::vector<Tensor>{Random(r, T, shape)};
                                            })
                        .ok());
      }
    }
  }
  // Log and Sqrt on positive inputs.
  for (const char* op : {"Log", "Sqrt", "Rsqrt"}) {
    EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode(op, 1), 1, 5, [&](std::mt19937_64& r) {
                  return std::vector<Tensor>{Random(r, T, Shape({2, 3}), 0.1, 2)};
                }).ok());
  }
}

TEST_P(BatchingRulesTest, BinaryElementwiseWithSharedAndBroadcastOperands) {
  const DType T = GetParam();
  std::mt19937_64 seed_rng(5);
  for (const char* op : {"Add", "Sub", "Mul", "Maximum", "Minimum", "TanhGrad", "SigmoidGrad", "ReluGrad"}) {
    // Both per-instance, same shape (empty included).
    for (const Shape& shape : {Shape({}), Shape({1, 150}), Shape({3, 4}), Shape({0, 4})}) {
      EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode(op, 2), 1, 4, [&](std::mt19937_64& r) {
                    return std::vector<Tensor>{Random(r, T, shape), Random(r, T, shape)};
                  }).ok());
    }
    // A shared bias broadcast over rows ([1, C] and [C]), on either side.
    for (const Shape& bias_shape : {Shape({1, 6}), Shape({6}), Shape({})}) {
      std::mt19937_64 r0(seed_rng());
      const Tensor bias = Random(r0, T, bias_shape);
      EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode(op, 2), 1, 5, [&](std::mt19937_64& r) {
                    return std::vector<Tensor>{Random(r, T, Shape({3, 6})), bias};
                  }).ok());
      EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode(op, 2), 1, 5, [&](std::mt19937_64& r) {
                    return std::vector<Tensor>{bias, Random(r, T, Shape({3, 6}))};
                  }).ok());
    }
    // A per-instance operand of one broadcast dim ([1, C] against [R, C]).
    EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode(op, 2), 1, 3, [&](std::mt19937_64& r) {
                  return std::vector<Tensor>{Random(r, T, Shape({4, 2})), Random(r, T, Shape({1, 2}))};
                }).ok());
  }
  // Div away from zero.
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("Div", 2), 1, 3, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{Random(r, T, Shape({2, 2})), Random(r, T, Shape({2, 2}), 0.5, 2)};
              }).ok());
  // Every operand the same tensor in every instance: still splits per instance.
  std::mt19937_64 r1(9);
  const Tensor x = Random(r1, T, Shape({2, 3}));
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("Mul", 2), 1, 4, [&](std::mt19937_64&) {
                return std::vector<Tensor>{x, x};
              }).ok());
  // AddN of three per-instance tensors.
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("AddN", 3), 1, 4, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{Random(r, T, Shape({2, 5})), Random(r, T, Shape({2, 5})),
                                           Random(r, T, Shape({2, 5}))};
              }).ok());
}

TEST_P(BatchingRulesTest, PerInstanceOperandsOfDifferentRanksFireAlone) {
  const DType T = GetParam();
  // x [3, 4] + y [4], both per-instance: stacking y would align its new
  // axis with x's rows. The batch is refused, never computed wrongly.
  absl::Status s = CheckBatchedEqualsAlone(MakeNode("Add", 2), 1, 3, [&](std::mt19937_64& r) {
    return std::vector<Tensor>{Random(r, T, Shape({3, 4})), Random(r, T, Shape({4}))};
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST_P(BatchingRulesTest, MatMulWithASharedWeight) {
  const DType T = GetParam();
  std::mt19937_64 r0(11);
  for (int64_t m : {1, 3, 0}) {
    for (bool transpose_b : {false, true}) {
      const Tensor w = Random(r0, T, transpose_b ? Shape({7, 12}) : Shape({12, 7}));
      NodeDef mm = MakeNode("MatMul", 2, {{"transpose_b", transpose_b}});
      EXPECT_TRUE(CheckBatchedEqualsAlone(mm, 1, 6, [&](std::mt19937_64& r) {
                    return std::vector<Tensor>{Random(r, T, Shape({m, 12})), w};
                  }).ok());
      NodeDef mma = MakeNode("MatMulAdd", 3, {{"transpose_b", transpose_b}});
      EXPECT_TRUE(CheckBatchedEqualsAlone(mma, 1, 6, [&](std::mt19937_64& r) {
                    return std::vector<Tensor>{Random(r, T, Shape({m, 12})), w, Random(r, T, Shape({m, 7}))};
                  }).ok());
    }
  }
  // The TreeRNN's sizes: [1, 300] x [300, 150].
  const Tensor W = Random(r0, T, Shape({300, 150}));
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("MatMul", 2), 1, 25, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{Random(r, T, Shape({1, 300})), W};
              }).ok());
}

TEST_P(BatchingRulesTest, GatherConcatSliceAndTheirGradients) {
  const DType T = GetParam();
  std::mt19937_64 r0(13);
  const Tensor table = Random(r0, T, Shape({9, 4}));
  std::uniform_int_distribution<int64_t> row(0, 8);
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("Gather", 2), 1, 5, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{table, Tensor::Vector<int64_t>({row(r), row(r), row(r)})};
              }).ok());
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("Gather", 2), 1, 5, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{table, Tensor::Vector<int64_t>({})};
              }).ok());
  for (int64_t axis : {1, -1}) {
    EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("Concat", 2, {{"axis", axis}}), 1, 4, [&](std::mt19937_64& r) {
                  return std::vector<Tensor>{Random(r, T, Shape({2, 3})), Random(r, T, Shape({2, 5}))};
                }).ok());
    EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("ConcatGrad", 3, {{"axis", axis}}), 2, 4, [&](std::mt19937_64& r) {
                  return std::vector<Tensor>{Random(r, T, Shape({2, 8})), Random(r, T, Shape({2, 3})),
                                             Random(r, T, Shape({2, 5}))};
                }).ok());
  }
  AttrMap slice = {{"begin", std::vector<int64_t>{0, 1}}, {"size", std::vector<int64_t>{-1, 2}}};
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("Slice", 1, slice), 1, 4, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{Random(r, T, Shape({3, 5}))};
              }).ok());
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("SliceGrad", 2, slice), 1, 4, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{Random(r, T, Shape({3, 5})), Random(r, T, Shape({3, 2}))};
              }).ok());
  const Tensor p = Random(r0, T, Shape({6, 3}));
  std::uniform_int_distribution<int64_t> prow(0, 5);
  EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("IndexedRows", 3), 1, 4, [&](std::mt19937_64& r) {
                return std::vector<Tensor>{p, Tensor::Vector<int64_t>({prow(r), prow(r)}), Random(r, T, Shape({2, 3}))};
              }).ok());
}

TEST_P(BatchingRulesTest, SoftmaxLossAndReductions) {
  const DType T = GetParam();
  for (const Shape& shape : {Shape({5}), Shape({3, 5}), Shape({0, 5})}) {
    EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("Softmax", 1), 1, 4, [&](std::mt19937_64& r) {
                  return std::vector<Tensor>{Random(r, T, shape)};
                }).ok());
    EXPECT_TRUE(CheckBatchedEqualsAlone(MakeNode("SoftmaxCrossEntropy", 2), 2, 4, [&](std::mt19937_64& r) {
                  return std::vector<Tensor>{Random(r, T, shape), Random(r, T, shape, 0, 1)};
                }).ok());
  }
  for (const char* op : {"Sum", "Mean", "Max"}) {
    for (bool keep : {false, true}) {
      for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, std::vector<int64_t>{-1}, std::vector<int64_t>{1, 2}}) {
        NodeDef node = MakeNode(op, 1, {{"axes", axes}, {"keep_dims", keep}});
        EXPECT_TRUE(CheckBatchedEqualsAlone(node, 1, 3, [&](std::mt19937_64& r) {
                      return std::vector<Tensor>{Random(r, T, Shape({2, 3, 4}))};
                    }).ok());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Float, BatchingRulesTest, ::testing::Values(DType::kFloat64, DType::kFloat32),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// A unary kernel that records what it was given (its input's storage and
// whether it could have overwritten it in place) and returns -x.
class RecordingNeg final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    seen_data = x.raw_data();
    seen_unshared = x.RefCountIsOne();
    Tensor out = *Tensor::Empty(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.num_elements(); ++i) out.mutable_data<double>()[i] = -x.data<double>()[i];
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
  const void* seen_data = nullptr;
  bool seen_unshared = true;
};

// A batched firing's outputs are rows of one buffer; the next batched
// firing of the same instances, in the same order, takes that buffer as its
// stacked input without a copy (and its kernel may not overwrite it: the
// instances still hold their rows). Out of order, the rows are copied.
TEST(BatchingRules, SplitOutputsAreViewsTheNextBatchTakesWithoutACopy) {
  const int n = 5;
  std::mt19937_64 rng(17);
  std::vector<Tensor> xs;
  std::vector<const Tensor*> flat;
  for (int k = 0; k < n; ++k) xs.push_back(Random(rng, DType::kFloat64, Shape({1, 6})));
  for (const Tensor& x : xs) flat.push_back(&x);
  const NodeDef tanh = MakeNode("Tanh", 1);
  const BatchRule rule = *RuleFor(tanh);
  std::unique_ptr<OpKernel> kernel = *KernelRegistry::Global()->Create(tanh, Device::Type::kCpu);
  std::vector<Tensor> h;
  ASSERT_TRUE(RunBatched(rule, *kernel, BatchInputs{n, 1, flat}, 1, {}, &h).ok());
  ASSERT_EQ(h.size(), static_cast<size_t>(n));
  const size_t bytes = h[0].bytes();
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(h[k].raw_data(), static_cast<const char*>(h[0].raw_data()) + k * bytes) << k;
    EXPECT_EQ(h[k].shape(), Shape({1, 6}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(h[k].data<double>()[i], std::tanh(xs[k].data<double>()[i]));
  }
  auto run_neg = [&](const std::vector<int>& order, RecordingNeg& neg) {
    std::vector<const Tensor*> in;
    for (int k : order) in.push_back(&h[k]);
    std::vector<Tensor> out;
    EXPECT_TRUE(RunBatched(rule, neg, BatchInputs{static_cast<int>(order.size()), 1, in}, 1, {}, &out).ok());
    for (size_t j = 0; j < order.size(); ++j)
      for (int i = 0; i < 6; ++i) EXPECT_EQ(out[j].data<double>()[i], -h[order[j]].data<double>()[i]);
  };
  RecordingNeg all;
  run_neg({0, 1, 2, 3, 4}, all);
  EXPECT_EQ(all.seen_data, h[0].raw_data());  // the whole output, not a copy
  EXPECT_FALSE(all.seen_unshared);
  RecordingNeg middle;
  run_neg({1, 2, 3}, middle);
  EXPECT_EQ(middle.seen_data, h[1].raw_data());  // consecutive rows: still no copy
  EXPECT_FALSE(middle.seen_unshared);
  RecordingNeg shuffled;
  run_neg({1, 0, 2}, shuffled);
  EXPECT_NE(shuffled.seen_data, h[1].raw_data());  // copied into a stack of its own
  EXPECT_NE(shuffled.seen_data, h[0].raw_data());
  EXPECT_TRUE(shuffled.seen_unshared);
}

TEST(BatchingRules, OpsWithoutARuleNeverBatch) {
  for (const char* op : {"OuterRowsConcat", "OuterRowsSum", "IndexedRowsConcat", "IndexedRowsSum", "SumToShapeOf",
                         "Reshape", "Assign", "Less", "Switch", "Merge"}) {
    EXPECT_FALSE(RuleFor(MakeNode(op, 2)).has_value()) << op;
  }
  // Attributes that make rows depend on each other.
  EXPECT_FALSE(RuleFor(MakeNode("Concat", 2, {{"axis", 0}})).has_value());
  EXPECT_FALSE(RuleFor(MakeNode("MatMul", 2, {{"transpose_a", true}})).has_value());
  EXPECT_FALSE(RuleFor(MakeNode("Sum", 1)).has_value());  // all axes
  EXPECT_FALSE(RuleFor(MakeNode("Gather", 2, {{"axis", 1}})).has_value());
  EXPECT_FALSE(RuleFor(MakeNode("Slice", 1, {{"begin", std::vector<int64_t>{1}}, {"size", std::vector<int64_t>{-1}}}))
                   .has_value());
}

TEST(BatchingRules, AcceptsChecksRanksAndAxes) {
  const Tensor row = *Tensor::Zeros(DType::kFloat64, Shape({1, 4}));
  const Tensor vec = *Tensor::Zeros(DType::kFloat64, Shape({4}));
  const Tensor w = *Tensor::Zeros(DType::kFloat64, Shape({4, 2}));
  const BatchRule mm = *RuleFor(MakeNode("MatMul", 2));
  EXPECT_TRUE(Accepts(mm, {&row, &w}));
  EXPECT_FALSE(Accepts(mm, {&vec, &w}));
  // Sum over axes {0, 1}: axis 0 mixes instances.
  const BatchRule sum01 = *RuleFor(MakeNode("Sum", 1, {{"axes", std::vector<int64_t>{0, 1}}}));
  EXPECT_FALSE(Accepts(sum01, {&row}));
  const BatchRule concat = *RuleFor(MakeNode("Concat", 2, {{"axis", -2}}));  // axis 0 of a matrix
  EXPECT_FALSE(Accepts(concat, {&row, &row}));
}

}  // namespace
}  // namespace batching
}  // namespace runtime
}  // namespace tdf
