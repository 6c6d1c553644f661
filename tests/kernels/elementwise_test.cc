#include <cmath>
#include <cstdlib>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernel_test::B;
using kernel_test::F32;
using kernel_test::F64;
using kernel_test::I32;
using kernel_test::I64;
using kernel_test::Run1;
using kernel_test::RunError;
using kernel_test::RunOp;
using kernel_test::TensorEq;
using kernel_test::TensorNear;
using kernel_test::Values;
using ::testing::HasSubstr;

Tensor S64(int64_t v) { return Tensor::Scalar<int64_t>(v); }
Tensor S32(int32_t v) { return Tensor::Scalar<int32_t>(v); }
Tensor SF(double v) { return Tensor::Scalar<double>(v); }
Tensor SB(bool v) { return Tensor::Scalar<bool>(v); }

// A tensor that claims to live on cuda:0 (backed by host memory, never
// dereferenced by a correct CPU kernel).
Tensor FakeGpuTensor() {
  void* p = std::malloc(64);
  Buffer* buf = Buffer::Wrap(p, 16, Device::Cuda(0), [](void* d, size_t, Device) { std::free(d); });
  Tensor t = Tensor::FromBuffer(DType::kFloat32, Shape({4}), buf);
  buf->Unref();
  return t;
}

TEST(BinaryKernel, Int64ScalarArithmetic) {
  EXPECT_TRUE(TensorEq(Run1("Add", {S64(30), S64(12)}), S64(42)));
  EXPECT_TRUE(TensorEq(Run1("Sub", {S64(3), S64(12)}), S64(-9)));
  EXPECT_TRUE(TensorEq(Run1("Mul", {S64(-6), S64(7)}), S64(-42)));
  EXPECT_TRUE(TensorEq(Run1("Maximum", {S64(-6), S64(7)}), S64(7)));
  EXPECT_TRUE(TensorEq(Run1("Minimum", {S64(-6), S64(7)}), S64(-6)));
  EXPECT_TRUE(TensorEq(Run1("Pow", {S64(3), S64(4)}), S64(81)));
  EXPECT_TRUE(TensorEq(Run1("Pow", {S64(-1), S64(-3)}), S64(-1)));
  EXPECT_TRUE(TensorEq(Run1("Pow", {S64(5), S64(0)}), S64(1)));
}

TEST(BinaryKernel, ScalarResultStaysInline) {
  Tensor out = Run1("Add", {S64(1), S64(2)});
  EXPECT_TRUE(out.is_inline_scalar());
  EXPECT_EQ(out.dtype(), DType::kInt64);
}

TEST(BinaryKernel, IntegerDivisionTruncatesLikeCpp) {
  EXPECT_TRUE(TensorEq(Run1("Div", {S64(7), S64(2)}), S64(3)));
  EXPECT_TRUE(TensorEq(Run1("Div", {S64(-7), S64(2)}), S64(-3)));
  EXPECT_TRUE(TensorEq(Run1("Mod", {S64(-7), S64(3)}), S64(-1)));
  EXPECT_TRUE(TensorEq(Run1("Mod", {S64(7), S64(-3)}), S64(1)));
  EXPECT_TRUE(TensorEq(Run1("Mod", {S32(91), S32(7)}), S32(0)));
  EXPECT_TRUE(TensorEq(Run1("Div", {I32({9, -9, 4}, {3}), I32({2, 2, -3}, {3})}), I32({4, -4, -1}, {3})));
}

TEST(BinaryKernel, IntegerDivisionByZeroIsAnError) {
  for (const char* op : {"Div", "Mod"}) {
    absl::Status s = RunError(op, {S64(1), S64(0)});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op;
    EXPECT_THAT(s.message(), HasSubstr("division by zero")) << op;
    s = RunError(op, {I32({1, 2, 3}, {3}), I32({1, 0, 1}, {3})});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op;
    EXPECT_THAT(s.message(), HasSubstr("division by zero")) << op;
    s = RunError(op, {I64({1, 2, 3}, {3}), S64(0)});
    EXPECT_THAT(s.message(), HasSubstr("division by zero")) << op;
  }
}

TEST(BinaryKernel, IntegerEdgeCasesWrapInsteadOfTrapping) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(TensorEq(Run1("Div", {S64(kMin), S64(-1)}), S64(kMin)));
  EXPECT_TRUE(TensorEq(Run1("Mod", {S64(kMin), S64(-1)}), S64(0)));
  EXPECT_TRUE(TensorEq(Run1("Add", {S64(kMax), S64(1)}), S64(kMin)));
  EXPECT_TRUE(TensorEq(Run1("Neg", {S64(kMin)}), S64(kMin)));
}

TEST(BinaryKernel, IntegerPowNegativeExponentIsAnError) {
  absl::Status s = RunError("Pow", {S64(2), S64(-1)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("negative exponent"));
}

TEST(BinaryKernel, FloatArithmetic) {
  EXPECT_TRUE(TensorEq(Run1("Div", {SF(1), SF(4)}), SF(0.25)));
  EXPECT_TRUE(TensorEq(Run1("Mod", {SF(7.5), SF(2)}), SF(1.5)));
  EXPECT_TRUE(TensorEq(Run1("Mod", {SF(-7.5), SF(2)}), SF(-1.5)));
  EXPECT_TRUE(TensorEq(Run1("Pow", {SF(2), SF(0.5)}), SF(std::sqrt(2.0))));
  Tensor inf = Run1("Div", {SF(1), SF(0)});
  EXPECT_TRUE(std::isinf(inf.scalar<double>()));
  EXPECT_TRUE(TensorEq(Run1("Add", {Tensor::Scalar<float>(1.5f), Tensor::Scalar<float>(2)}),
                       Tensor::Scalar<float>(3.5f)));
  Tensor nan = Run1("Maximum", {SF(1), SF(NAN)});
  EXPECT_TRUE(std::isnan(nan.scalar<double>()));
  nan = Run1("Minimum", {SF(NAN), SF(1)});
  EXPECT_TRUE(std::isnan(nan.scalar<double>()));
}

TEST(BinaryKernel, SameShapeTensors) {
  EXPECT_TRUE(TensorEq(Run1("Add", {F64({1, 2, 3, 4}, {2, 2}), F64({10, 20, 30, 40}, {2, 2})}),
                       F64({11, 22, 33, 44}, {2, 2})));
  EXPECT_TRUE(TensorEq(Run1("Sub", {I64({5, 5}, {2}), I64({1, 7}, {2})}), I64({4, -2}, {2})));
}

TEST(BinaryKernel, Broadcasting) {
  // [2,3] + [3]
  EXPECT_TRUE(TensorEq(Run1("Add", {F64({1, 2, 3, 4, 5, 6}, {2, 3}), F64({10, 20, 30}, {3})}),
                       F64({11, 22, 33, 14, 25, 36}, {2, 3})));
  // [2,1] * [1,3] -> [2,3]
  EXPECT_TRUE(TensorEq(Run1("Mul", {I64({1, 2}, {2, 1}), I64({1, 10, 100}, {1, 3})}),
                       I64({1, 10, 100, 2, 20, 200}, {2, 3})));
  // scalar - tensor and tensor - scalar
  EXPECT_TRUE(TensorEq(Run1("Sub", {S64(10), I64({1, 2, 3}, {3})}), I64({9, 8, 7}, {3})));
  EXPECT_TRUE(TensorEq(Run1("Sub", {I64({1, 2, 3}, {3}), S64(10)}), I64({-9, -8, -7}, {3})));
  // A single-element tensor of higher rank broadcasts up: [1,1] + [3] -> [1,3]
  EXPECT_TRUE(TensorEq(Run1("Add", {I64({5}, {1, 1}), I64({1, 2, 3}, {3})}), I64({6, 7, 8}, {1, 3})));
  // [3,1,2] + [4,1] -> [3,4,2]
  std::vector<int64_t> a(6), b(4), want;
  for (int i = 0; i < 6; ++i) a[i] = i * 100;
  for (int i = 0; i < 4; ++i) b[i] = i;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k) want.push_back(a[i * 2 + k] + b[j]);
  EXPECT_TRUE(TensorEq(Run1("Add", {I64(a, {3, 1, 2}), I64(b, {4, 1})}), I64(want, {3, 4, 2})));
}

TEST(BinaryKernel, ShapeMismatchNamesBothShapes) {
  absl::Status s = RunError("Add", {F64({1, 2, 3, 4, 5, 6}, {2, 3}), F64({1, 2}, {2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,3]"));
  EXPECT_THAT(s.message(), HasSubstr("[2]"));
}

TEST(BinaryKernel, DTypeMismatchAndUnsupportedDTypes) {
  absl::Status s = RunError("Add", {S64(1), SF(2)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("int64"));
  EXPECT_THAT(s.message(), HasSubstr("float64"));
  EXPECT_THAT(RunError("Add", {SB(true), SB(false)}).message(), HasSubstr("bool"));
  EXPECT_THAT(RunError("LogicalAnd", {S64(1), S64(0)}).message(), HasSubstr("int64"));
  EXPECT_THAT(RunError("TanhGrad", {S64(1), S64(0)}).message(), HasSubstr("int64"));
}

TEST(BinaryKernel, EmptyTensors) {
  Tensor out = Run1("Add", {F64({}, {0, 3}), F64({1, 2, 3}, {3})});
  EXPECT_EQ(out.shape(), Shape({0, 3}));
  out = Run1("Mul", {I64({}, {0}), S64(3)});
  EXPECT_EQ(out.shape(), Shape({0}));
  out = Run1("Div", {I64({}, {2, 0}), I64({}, {1, 0})});
  EXPECT_EQ(out.shape(), Shape({2, 0}));
  EXPECT_THAT(RunError("Add", {F64({}, {0}), F64({1, 2}, {2})}).message(), HasSubstr("[0]"));
}

TEST(BinaryKernel, NonCpuInputIsFailedPrecondition) {
  Tensor gpu = FakeGpuTensor();
  EXPECT_EQ(gpu.device(), Device::Cuda(0));
  EXPECT_EQ(RunError("Add", {gpu, gpu}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RunError("Exp", {gpu}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RunError("Identity", {gpu}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BinaryKernel, WrongArityIsAnError) {
  EXPECT_EQ(RunError("Add", {S64(1)}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Neg", {S64(1), S64(2)}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompareKernel, ScalarsAndTensors) {
  EXPECT_TRUE(TensorEq(Run1("Less", {S64(1), S64(2)}), SB(true)));
  EXPECT_TRUE(TensorEq(Run1("LessEqual", {S64(2), S64(2)}), SB(true)));
  EXPECT_TRUE(TensorEq(Run1("Greater", {S64(1), S64(2)}), SB(false)));
  EXPECT_TRUE(TensorEq(Run1("GreaterEqual", {SF(2), SF(2)}), SB(true)));
  EXPECT_TRUE(TensorEq(Run1("Equal", {S32(3), S32(3)}), SB(true)));
  EXPECT_TRUE(TensorEq(Run1("NotEqual", {SB(true), SB(false)}), SB(true)));
  EXPECT_TRUE(TensorEq(Run1("Less", {I64({1, 5, 3}, {3}), S64(3)}), B({true, false, false}, {3})));
  EXPECT_TRUE(TensorEq(Run1("Equal", {F64({1, 2, 3, 4}, {2, 2}), F64({1, 4}, {2})}),
                       B({true, false, false, true}, {2, 2})));
  EXPECT_TRUE(TensorEq(Run1("Equal", {SF(NAN), SF(NAN)}), SB(false)));
}

TEST(LogicalKernel, AndOrNot) {
  EXPECT_TRUE(TensorEq(Run1("LogicalAnd", {SB(true), SB(false)}), SB(false)));
  EXPECT_TRUE(TensorEq(Run1("LogicalOr", {SB(true), SB(false)}), SB(true)));
  EXPECT_TRUE(TensorEq(Run1("LogicalNot", {SB(true)}), SB(false)));
  EXPECT_TRUE(TensorEq(Run1("LogicalAnd", {B({true, true, false}, {3}), SB(true)}), B({true, true, false}, {3})));
  EXPECT_TRUE(TensorEq(Run1("LogicalNot", {B({true, false}, {2})}), B({false, true}, {2})));
  EXPECT_THAT(RunError("LogicalNot", {S64(1)}).message(), HasSubstr("int64"));
}

TEST(UnaryKernel, FloatMathMatchesStd) {
  const std::vector<double> xs = {0.25, 0.5, 1.0, 2.0, 3.5};
  struct Case {
    const char* op;
    double (*fn)(double);
  };
  const Case cases[] = {
      {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"Sqrt", [](double x) { return std::sqrt(x); }},
      {"Rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"Reciprocal", [](double x) { return 1 / x; }},
      {"Relu", [](double x) { return x > 0 ? x : 0; }},
      {"Neg", [](double x) { return -x; }},
      {"Abs", [](double x) { return std::abs(x); }},
      {"Square", [](double x) { return x * x; }},
  };
  for (const Case& c : cases) {
    std::vector<double> in, want;
    for (double x : xs) {
      for (double sign : {1.0, -1.0}) {
        double v = x * sign;
        if ((std::string(c.op) == "Log" || std::string(c.op).find("sqrt") != std::string::npos ||
             std::string(c.op) == "Sqrt") && v < 0)
          continue;
        in.push_back(v);
        want.push_back(c.fn(v));
        // Scalar (inline) path.
        EXPECT_TRUE(TensorNear(Run1(c.op, {SF(v)}), SF(c.fn(v)), 1e-14)) << c.op << "(" << v << ")";
      }
    }
    const Shape shape({static_cast<int64_t>(in.size())});
    EXPECT_TRUE(TensorNear(Run1(c.op, {F64(in, shape)}), F64(want, shape), 1e-14)) << c.op;
    std::vector<float> in32(in.begin(), in.end()), want32(want.begin(), want.end());
    EXPECT_TRUE(TensorNear(Run1(c.op, {F32(in32, shape)}), F32(want32, shape), 1e-5)) << c.op;
  }
}

TEST(UnaryKernel, SigmoidIsStableForLargeInputs) {
  EXPECT_EQ(Run1("Sigmoid", {SF(-1000)}).scalar<double>(), 0.0);
  EXPECT_EQ(Run1("Sigmoid", {SF(1000)}).scalar<double>(), 1.0);
  std::vector<double> out = Values<double>(Run1("Sigmoid", {F64({-1000, 1000}, {2})}));
  EXPECT_NEAR(out[0], 0.0, 1e-300);
  EXPECT_EQ(out[1], 1.0);
}

TEST(UnaryKernel, IntegerOps) {
  EXPECT_TRUE(TensorEq(Run1("Neg", {I64({1, -2, 0}, {3})}), I64({-1, 2, 0}, {3})));
  EXPECT_TRUE(TensorEq(Run1("Abs", {I32({1, -2, 0}, {3})}), I32({1, 2, 0}, {3})));
  EXPECT_TRUE(TensorEq(Run1("Square", {S64(-7)}), S64(49)));
  EXPECT_TRUE(TensorEq(Run1("Sign", {I64({5, -3, 0}, {3})}), I64({1, -1, 0}, {3})));
  EXPECT_TRUE(TensorEq(Run1("Sign", {F64({2.5, -0.1, 0}, {3})}), F64({1, -1, 0}, {3})));
  EXPECT_THAT(RunError("Exp", {S64(1)}).message(), HasSubstr("Exp does not support dtype int64"));
  EXPECT_THAT(RunError("Neg", {SB(true)}).message(), HasSubstr("bool"));
}

TEST(UnaryKernel, EmptyTensor) {
  Tensor out = Run1("Exp", {F64({}, {3, 0})});
  EXPECT_EQ(out.shape(), Shape({3, 0}));
  EXPECT_EQ(out.dtype(), DType::kFloat64);
}

TEST(GradKernel, TanhSigmoidRelu) {
  EXPECT_TRUE(TensorNear(Run1("TanhGrad", {SF(0.5), SF(2)}), SF(2 * (1 - 0.25)), 1e-15));
  EXPECT_TRUE(TensorNear(Run1("SigmoidGrad", {SF(0.25), SF(2)}), SF(2 * 0.25 * 0.75), 1e-15));
  EXPECT_TRUE(TensorEq(Run1("ReluGrad", {F64({-1, 0, 2}, {3}), F64({5, 6, 7}, {3})}), F64({0, 0, 7}, {3})));
  EXPECT_TRUE(TensorNear(Run1("TanhGrad", {F32({0.5f, -0.5f}, {2}), F32({1, 1}, {2})}), F32({0.75f, 0.75f}, {2}),
                         1e-6));
}

TEST(CastKernel, Conversions) {
  AttrMap to_i64 = {{"DstT", DType::kInt64}};
  AttrMap to_i32 = {{"DstT", DType::kInt32}};
  AttrMap to_f64 = {{"DstT", DType::kFloat64}};
  AttrMap to_bool = {{"DstT", DType::kBool}};
  EXPECT_TRUE(TensorEq(Run1("Cast", {SF(-2.7)}, to_i64), S64(-2)));
  EXPECT_TRUE(TensorEq(Run1("Cast", {S64(3)}, to_f64), SF(3.0)));
  EXPECT_TRUE(TensorEq(Run1("Cast", {S64(3)}, to_bool), SB(true)));
  EXPECT_TRUE(TensorEq(Run1("Cast", {SB(true)}, to_i32), S32(1)));
  EXPECT_TRUE(TensorEq(Run1("Cast", {F64({1.9, -1.9, NAN, 1e30, -1e30}, {5})}, to_i32),
                       I32({1, -1, 0, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()},
                           {5})));
  EXPECT_TRUE(TensorEq(Run1("Cast", {I64({0, 2}, {2})}, to_bool), B({false, true}, {2})));
  Tensor same = I64({1, 2}, {2});
  Tensor out = Run1("Cast", {same}, to_i64);
  EXPECT_EQ(out.buffer(), same.buffer());  // forwarded, not copied
  EXPECT_FALSE(RunOp("Cast", {S64(1)}).ok());  // missing DstT
}

TEST(SelectKernel, ScalarBroadcastAndElementwise) {
  EXPECT_TRUE(TensorEq(Run1("Select", {SB(true), S64(1), S64(2)}), S64(1)));
  EXPECT_TRUE(TensorEq(Run1("Select", {SB(false), S64(1), S64(2)}), S64(2)));
  Tensor x = F64({1, 2}, {2}), y = F64({3, 4}, {2});
  EXPECT_TRUE(TensorEq(Run1("Select", {SB(false), x, y}), y));
  EXPECT_TRUE(TensorEq(Run1("Select", {B({true, false}, {2}), x, y}), F64({1, 4}, {2})));
  // cond [2,1], x [2,2], y scalar
  EXPECT_TRUE(TensorEq(Run1("Select", {B({true, false}, {2, 1}), F64({1, 2, 3, 4}, {2, 2}), SF(0)}),
                       F64({1, 2, 0, 0}, {2, 2})));
  EXPECT_EQ(RunError("Select", {S64(1), S64(1), S64(2)}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Select", {SB(true), S64(1), SF(2)}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Select", {B({true, false, true}, {3}), x, y}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(AddNKernel, SumsInputs) {
  EXPECT_TRUE(TensorEq(Run1("AddN", {S64(1), S64(2), S64(3)}), S64(6)));
  EXPECT_TRUE(TensorEq(Run1("AddN", {SF(1.5)}), SF(1.5)));
  EXPECT_TRUE(TensorEq(Run1("AddN", {F64({1, 2}, {2}), F64({3, 4}, {2}), F64({5, 6}, {2})}), F64({9, 12}, {2})));
  absl::Status s = RunError("AddN", {F64({1, 2}, {2}), F64({3}, {1})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[1]"));
  EXPECT_EQ(RunError("AddN", {S64(1), SF(1)}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(AddNKernel, ManyTermsAddLeftToRight) {
  // Terms are added in input order (the rounding of a running sum) however
  // many there are; integers wrap.
  for (int n = 2; n <= 9; ++n) {
    std::vector<Tensor> in64, in32;
    std::vector<double> want64(7, 0.0);
    std::vector<float> want32(7, 0.0f);
    for (int i = 0; i < n; ++i) {
      std::vector<double> v(7);
      for (int j = 0; j < 7; ++j) v[j] = std::sin(1.7 * i + 0.3 * j) * std::pow(10.0, (i + j) % 5 - 2);
      for (int j = 0; j < 7; ++j) {
        want64[j] = i == 0 ? v[j] : want64[j] + v[j];
        want32[j] = i == 0 ? static_cast<float>(v[j]) : want32[j] + static_cast<float>(v[j]);
      }
      in64.push_back(F64(v, {7}));
      in32.push_back(F32(std::vector<float>(v.begin(), v.end()), {7}));
    }
    EXPECT_TRUE(TensorEq(Run1("AddN", in64), F64(want64, {7}))) << n << " terms";
    EXPECT_TRUE(TensorEq(Run1("AddN", in32), F32(want32, {7}))) << n << " terms";
  }
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(TensorEq(Run1("AddN", {I64({big, 1}, {2}), I64({1, 2}, {2}), I64({1, 3}, {2})}),
                       I64({std::numeric_limits<int64_t>::min() + 1, 6}, {2})));
}

TEST(AddNKernel, SharedZerosAreSkipped) {
  // ZerosLike of a large tensor shares the read-only zero mapping; AddN
  // skips such inputs and passes a lone remaining term through.
  std::vector<float> av(64 * 64), bv(64 * 64);
  for (size_t i = 0; i < av.size(); ++i) av[i] = 0.25f * static_cast<float>(i % 17), bv[i] = -1.5f * (i % 5);
  Tensor a = F32(av, {64, 64}), b = F32(bv, {64, 64});
  Tensor z = Run1("ZerosLike", {a});
  ASSERT_EQ(z.shape(), Shape({64, 64}));
  EXPECT_TRUE(kernels::IsSharedZeros(z));
  EXPECT_FALSE(kernels::IsSharedZeros(a));
  for (float x : Values<float>(z)) ASSERT_EQ(x, 0.0f);
  Tensor lone = Run1("AddN", {z, a, z});
  EXPECT_EQ(lone.buffer(), a.buffer());
  Tensor all_zero = Run1("AddN", {z, z});
  EXPECT_EQ(all_zero.shape(), Shape({64, 64}));
  for (float x : Values<float>(all_zero)) ASSERT_EQ(x, 0.0f);
  std::vector<float> sum(av.size());
  for (size_t i = 0; i < av.size(); ++i) sum[i] = av[i] + bv[i];
  EXPECT_TRUE(TensorEq(Run1("AddN", {a, z, b}), F32(sum, {64, 64})));
  // Shape errors are still errors with a zero input.
  EXPECT_EQ(RunError("AddN", {z, F32({1}, {1})}).code(), absl::StatusCode::kInvalidArgument);
  // Small zeros are ordinary tensors.
  EXPECT_FALSE(kernels::IsSharedZeros(Run1("ZerosLike", {F64({1, 2}, {2})})));
}

TEST(AddNKernelDeathTest, SharedZerosAreReadOnly) {
  // A write through mutable_data() (tensors are immutable values) faults
  // rather than corrupting every zero gradient in the process.
  Tensor z = Run1("ZerosLike", {F64(std::vector<double>(1024, 1.0), {1024})});
  ASSERT_TRUE(kernels::IsSharedZeros(z));
  EXPECT_DEATH({ z.mutable_data<double>()[3] = 1.0; }, "");
}

TEST(BinaryKernel, ScalarAndTensor) {
  // Scalar x tensor and tensor x scalar over more elements than one vector.
  std::vector<float> v(103);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 7.0f;
  std::vector<float> times(v.size()), minus(v.size());
  for (size_t i = 0; i < v.size(); ++i) times[i] = -0.01f * v[i], minus[i] = v[i] - 3.0f;
  EXPECT_TRUE(TensorEq(Run1("Mul", {Tensor::Scalar<float>(-0.01f), F32(v, {1, 103})}), F32(times, {1, 103})));
  EXPECT_TRUE(TensorEq(Run1("Mul", {F32(v, {103}), Tensor::Scalar<float>(-0.01f)}), F32(times, {103})));
  EXPECT_TRUE(TensorEq(Run1("Sub", {F32(v, {103}), Tensor::Scalar<float>(3.0f)}), F32(minus, {103})));
  // The failing ops keep their per-element checks.
  EXPECT_EQ(RunError("Div", {I64({1, 2}, {2}), S64(0)}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GraphOpKernels, ConstIdentityNoOpLoopCond) {
  Tensor value = F64({1, 2, 3}, {3});
  Tensor c = Run1("Const", {}, {{"value", value}});
  EXPECT_TRUE(TensorEq(c, value));
  EXPECT_EQ(c.buffer(), value.buffer());
  EXPECT_FALSE(RunOp("Const", {}).ok());  // missing value

  EXPECT_TRUE(TensorEq(Run1("Identity", {S64(7)}), S64(7)));
  EXPECT_EQ(Run1("Identity", {value}).buffer(), value.buffer());

  absl::StatusOr<std::vector<Tensor>> none = RunOp("NoOp", {}, {}, 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  EXPECT_TRUE(TensorEq(Run1("LoopCond", {SB(true)}), SB(true)));
  EXPECT_EQ(RunError("LoopCond", {S64(1)}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GraphOpKernels, ZerosLikeOnesLike) {
  EXPECT_TRUE(TensorEq(Run1("ZerosLike", {S64(7)}), S64(0)));
  EXPECT_TRUE(TensorEq(Run1("OnesLike", {SF(7)}), SF(1)));
  EXPECT_TRUE(TensorEq(Run1("ZerosLike", {F64({1, 2, 3, 4}, {2, 2})}), F64({0, 0, 0, 0}, {2, 2})));
  EXPECT_TRUE(TensorEq(Run1("OnesLike", {I32({5, 6}, {2})}), I32({1, 1}, {2})));
  EXPECT_TRUE(TensorEq(Run1("OnesLike", {B({false}, {1})}), B({true}, {1})));
  EXPECT_EQ(Run1("ZerosLike", {F64({}, {0, 2})}).shape(), Shape({0, 2}));
}

}  // namespace
}  // namespace tdf
