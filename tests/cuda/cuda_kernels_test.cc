// Every CUDA kernel against its CPU kernel on random inputs, including
// broadcasting and empty tensors; and the caching allocator. Skipped (with
// the reason) where there is no CUDA device.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace tdf {
namespace {

using gpu_test::ExpectSame;
using gpu_test::ForEachMatMulCase;
using gpu_test::MatMulCase;
using gpu_test::OperandA;
using gpu_test::OperandB;
using gpu_test::Random;
using gpu_test::RunGpuOp;
using kernel_test::RunOp;
using ::testing::HasSubstr;

const std::vector<std::pair<Shape, Shape>>& BroadcastCases() {
  static const auto* const cases = new std::vector<std::pair<Shape, Shape>>{
      {Shape({2, 3}), Shape({2, 3})}, {Shape({2, 3}), Shape({3})},       {Shape({4, 1, 3}), Shape({2, 1})},
      {Shape(), Shape({5})},          {Shape({5}), Shape()},             {Shape({0, 3}), Shape({3})},
      {Shape({1}), Shape({7})},       {Shape({2, 1, 4, 1}), Shape({3, 1, 5})}, {Shape({33, 65}), Shape({33, 65})}};
  return *cases;
}

TEST(CudaKernels, FloatBinaryOpsWithBroadcasting) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const auto& [sa, sb] : BroadcastCases()) {
      SCOPED_TRACE(sa.DebugString() + " vs " + sb.DebugString());
      Tensor a = Random(dtype, sa, -2, 2, 1);
      Tensor b = Random(dtype, sb, 0.5, 3, 2);
      for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Maximum", "Minimum", "TanhGrad", "SigmoidGrad",
                             "ReluGrad", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"})
        ExpectSame(op, {a, b});
      ExpectSame("Pow", {Random(dtype, sa, 0.1, 2, 3), b});
    }
  }
}

TEST(CudaKernels, IntegerBinaryOpsWithBroadcasting) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kInt32, DType::kInt64}) {
    for (const auto& [sa, sb] : BroadcastCases()) {
      SCOPED_TRACE(sa.DebugString() + " vs " + sb.DebugString());
      Tensor a = Random(dtype, sa, -100, 100, 4);
      Tensor b = Random(dtype, sb, 1, 9, 5);  // no zero divisors
      for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Maximum", "Minimum", "Less", "Equal", "NotEqual",
                             "GreaterEqual"})
        ExpectSame(op, {a, b});
      ExpectSame("Pow", {Random(dtype, sa, -3, 3, 6), Random(dtype, sb, 0, 5, 7)});
    }
  }
}

TEST(CudaKernels, LogicalOps) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor a = Random(DType::kBool, Shape({4, 5}), 0, 1, 1);
  Tensor b = Random(DType::kBool, Shape({5}), 0, 1, 2);
  ExpectSame("LogicalAnd", {a, b});
  ExpectSame("LogicalOr", {a, b});
  ExpectSame("LogicalNot", {a});
  ExpectSame("Equal", {a, b});
}

// Select (the gradient of Maximum and Minimum) with broadcasting among the
// condition and both branches.
TEST(CudaKernels, SelectWithBroadcasting) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = Random(dtype, Shape({4, 3}), -9, 9, 1);
    const Tensor y = Random(dtype, Shape({4, 3}), -9, 9, 2);
    ExpectSame("Select", {Random(DType::kBool, Shape({4, 3}), 0, 1, 3), x, y});
    ExpectSame("Select", {Random(DType::kBool, Shape({4, 1}), 0, 1, 4), x, Random(dtype, Shape({3}), -9, 9, 5)});
    ExpectSame("Select", {Random(DType::kBool, Shape({2, 1, 1}), 0, 1, 6), Random(dtype, Shape({1, 3}), -9, 9, 7), y});
    // One condition: the CPU forwards a branch, the GPU computes it.
    ExpectSame("Select", {Tensor::Scalar<bool>(true), x, y});
    ExpectSame("Select", {Tensor::Scalar<bool>(false), x, y});
    ExpectSame("Select", {Random(DType::kBool, Shape({0, 3}), 0, 1, 8), Random(dtype, Shape({0, 3})),
                          Random(dtype, Shape({3}))});
  }
  const Tensor f = Random(DType::kFloat32, Shape({2, 3}));
  ExpectSame("Select", {Random(DType::kFloat32, Shape({2, 3})), f, f});                     // condition not bool
  ExpectSame("Select", {Random(DType::kBool, Shape({2, 3}), 0, 1), f, Random(DType::kFloat64, Shape({2, 3}))});
  ExpectSame("Select", {Random(DType::kBool, Shape({2, 3}), 0, 1), f, Random(DType::kFloat32, Shape({4}))});
}

TEST(CudaKernels, IntegerDivisionByZeroIsReportedAtSynchronize) {
  TDF_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::vector<Tensor>> out =
      RunGpuOp("Div", {kernel_test::I64({1, 2, 3}, Shape({3})), kernel_test::I64({1, 0, 1}, Shape({3}))});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("division by zero"));
  // The error word was cleared: the next run succeeds.
  ExpectSame("Div", {kernel_test::I64({4}, Shape({1})), kernel_test::I64({2}, Shape({1}))});
}

TEST(CudaKernels, BinaryErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  ExpectSame("Add", {Random(DType::kFloat32, Shape({2, 3})), Random(DType::kFloat32, Shape({4}))});
  ExpectSame("Add", {Random(DType::kFloat32, Shape({2})), Random(DType::kFloat64, Shape({2}))});
  ExpectSame("Tanh", {Random(DType::kInt64, Shape({2}))});
}

TEST(CudaKernels, UnaryOps) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const Shape& shape : {Shape({3, 4}), Shape({0}), Shape(), Shape({1000})}) {
      SCOPED_TRACE(shape.DebugString());
      Tensor x = Random(dtype, shape, -3, 3);
      Tensor pos = Random(dtype, shape, 0.1, 4);
      for (const char* op : {"Neg", "Abs", "Square", "Sign", "Exp", "Tanh", "Sigmoid", "Relu", "Reciprocal"})
        ExpectSame(op, {x});
      for (const char* op : {"Log", "Sqrt", "Rsqrt"}) ExpectSame(op, {pos});
    }
  }
  for (DType dtype : {DType::kInt32, DType::kInt64}) {
    Tensor x = Random(dtype, Shape({17}), -50, 50);
    for (const char* op : {"Neg", "Abs", "Square", "Sign"}) ExpectSame(op, {x});
  }
}

TEST(CudaKernels, CastBetweenEveryPairOfDtypes) {
  TDF_SKIP_WITHOUT_GPU();
  const DType all[] = {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64};
  for (DType from : all) {
    Tensor x = Random(from, Shape({3, 7}), -1e3, 1e3);
    for (DType to : all) ExpectSame("Cast", {x}, {{"DstT", to}});
  }
  // Saturation and NaN.
  ExpectSame("Cast", {kernel_test::F64({1e30, -1e30, std::nan(""), 2.5}, Shape({4}))}, {{"DstT", DType::kInt32}});
}

TEST(CudaKernels, Reductions) {
  TDF_SKIP_WITHOUT_GPU();
  const std::vector<std::vector<int64_t>> axes_cases = {{}, {0}, {1}, {2}, {0, 2}, {-1}, {0, 1, 2}};
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
    Tensor x = Random(dtype, Shape({3, 4, 5}), -10, 10);
    for (const char* op : {"Sum", "Mean", "Max"}) {
      ExpectSame(op, {x}, {}, 1, 1e-3);  // all axes (attr absent); float32 sums differ in order
      for (const auto& axes : axes_cases)
        for (bool keep : {false, true}) ExpectSame(op, {x}, {{"axes", axes}, {"keep_dims", keep}}, 1, 1e-3);
    }
  }
  // Large: both the block-per-output and thread-per-output paths.
  Tensor big = Random(DType::kFloat64, Shape({300, 1000}), -1, 1);
  for (const auto& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {}})
    ExpectSame("Sum", {big}, {{"axes", axes}}, 1, 1e-9);
  // Empty tensors: Sum -> 0, float Mean -> NaN (both sides), Max -> -inf;
  // integer Mean over nothing is an error on both.
  Tensor empty = Random(DType::kFloat32, Shape({0, 4}));
  ExpectSame("Sum", {empty}, {{"axes", std::vector<int64_t>{0}}});
  ExpectSame("Max", {empty}, {{"axes", std::vector<int64_t>{0}}});
  ExpectSame("Sum", {empty}, {{"axes", std::vector<int64_t>{1}}});
  ExpectSame("Mean", {Random(DType::kInt64, Shape({0, 4}))}, {{"axes", std::vector<int64_t>{0}}});
  ExpectSame("Sum", {Random(DType::kFloat32, Shape({2}))}, {{"axes", std::vector<int64_t>{3}}});  // bad axis
}

TEST(CudaKernels, SumToShapeOfAndBroadcastTo) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor x = Random(DType::kFloat32, Shape({4, 2, 3}));
  for (const Shape& like : {Shape({2, 3}), Shape({3}), Shape({4, 1, 3}), Shape({1, 1}), Shape(), Shape({2, 1})})
    ExpectSame("SumToShapeOf", {x, Random(DType::kFloat32, like)});
  ExpectSame("SumToShapeOf", {x, Random(DType::kFloat32, Shape({5}))});  // error
  for (const Shape& from : {Shape({3}), Shape({2, 1}), Shape(), Shape({1, 3})})
    ExpectSame("BroadcastTo", {Random(DType::kInt64, from, -5, 5), Random(DType::kInt64, Shape({4, 2, 3}))});
}

TEST(CudaKernels, SoftmaxAndCrossEntropy) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const Shape& shape : {Shape({4, 10}), Shape({7}), Shape({2, 3, 600}), Shape({0, 5})}) {
      SCOPED_TRACE(shape.DebugString());
      Tensor logits = Random(dtype, shape, -20, 20);
      ExpectSame("Softmax", {logits});
      Tensor labels = RunOp("Softmax", {Random(dtype, shape, -1, 1, 9)}).value()[0];
      ExpectSame("SoftmaxCrossEntropy", {logits, labels}, {}, 2, 1e-4);
    }
  }
}

TEST(CudaKernels, GatherConcatSliceTransposeReshape) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor params = Random(DType::kFloat32, Shape({5, 4, 3}));
  ExpectSame("Gather", {params, kernel_test::I64({4, 0, 2, 2}, Shape({2, 2}))});
  ExpectSame("Gather", {params, kernel_test::I32({3, 1}, Shape({2}))}, {{"axis", int64_t{1}}});
  ExpectSame("Gather", {params, kernel_test::I64({}, Shape({0}))});
  ExpectSame("Gather", {params, Tensor::Scalar<int64_t>(3)});
  // An index out of range: an error on both (the GPU reports it on sync).
  ExpectSame("Gather", {params, kernel_test::I64({5}, Shape({1}))});

  Tensor a = Random(DType::kInt32, Shape({2, 3}), -9, 9);
  Tensor b = Random(DType::kInt32, Shape({2, 5}), -9, 9);
  Tensor c = Random(DType::kInt32, Shape({2, 0}), -9, 9);
  ExpectSame("Concat", {a, b, c}, {{"axis", int64_t{1}}});
  ExpectSame("Concat", {a, a}, {{"axis", int64_t{0}}});
  ExpectSame("Concat", {a, b}, {{"axis", int64_t{0}}});  // error

  Tensor x = Random(DType::kFloat64, Shape({4, 5, 6}));
  ExpectSame("Slice", {x}, {{"begin", std::vector<int64_t>{1, 0, 2}}, {"size", std::vector<int64_t>{2, -1, 3}}});
  ExpectSame("Slice", {x}, {{"begin", std::vector<int64_t>{0, 5, 0}}, {"size", std::vector<int64_t>{4, 0, 6}}});
  ExpectSame("Transpose", {x});
  ExpectSame("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  ExpectSame("Reshape", {x}, {{"shape", std::vector<int64_t>{-1, 6}}});
  ExpectSame("ReshapeLike", {x, Random(DType::kFloat32, Shape({20, 6}))});
}

TEST(CudaKernels, ReshapeSharesTheDeviceBuffer) {
  TDF_SKIP_WITHOUT_GPU();
  NodeDef node = kernel_test::MakeNode("Reshape", 1, {{"shape", std::vector<int64_t>{6}}});
  node.device = "cuda:0";
  auto kernel = KernelRegistry::Global()->Create(node, Device::Type::kCuda);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  Tensor x = *gpu_test::ToDevice(Random(DType::kFloat32, Shape({2, 3})));
  const Tensor* in[] = {&x};
  Tensor out;
  KernelContext ctx(in, 1, &out, 1, Device::Cuda(0));
  ASSERT_TRUE((*kernel)->Compute(ctx).ok());
  EXPECT_EQ(out.buffer(), x.buffer());
  EXPECT_EQ(out.shape(), Shape({6}));
}

TEST(CudaKernels, MatMulThroughCublas) {
  TDF_SKIP_WITHOUT_GPU();
  ForEachMatMulCase({{3, 4, 5}, {64, 128, 32}, {1, 1, 1}, {4, 0, 3}, {0, 3, 2}},
                    [](DType dtype, const MatMulCase& c, bool ta, bool tb) {
                      Tensor a = Random(dtype, OperandA(c, ta));
                      Tensor b = Random(dtype, OperandB(c, tb));
                      ExpectSame("MatMul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}}, 1, 1e-4);
                    });
  ExpectSame("MatMul", {Random(DType::kFloat32, Shape({2, 3})), Random(DType::kFloat32, Shape({4, 2}))});  // error
}

// MatMul takes one plain kernel for small products and cuBLAS past
// 2^20 multiply-adds (cuda/small_ops.cuh): both paths, every transpose.
TEST(CudaKernels, MatMulSmallKernelAndCublasPaths) {
  TDF_SKIP_WITHOUT_GPU();
  ForEachMatMulCase({{1, 300, 150}, {300, 1, 150}, {1, 2048, 512}, {128, 256, 64}, {1025, 1, 1024}, {33, 700, 71}},
                    [](DType dtype, const MatMulCase& c, bool ta, bool tb) {
                      const double tol = dtype == DType::kFloat32 ? 1e-4 : 1e-10;
                      Tensor a = Random(dtype, OperandA(c, ta), -1, 1, 5);
                      Tensor b = Random(dtype, OperandB(c, tb), -1, 1, 6);
                      ExpectSame("MatMul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}}, 1, tol);
                    });
}

// Concat takes one kernel for up to 8 inputs of up to 4 MiB, and a 2-D copy
// per input otherwise: both paths.
TEST(CudaKernels, ConcatOneKernelAndCopyPaths) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    // A TreeRNN node's children, along the last axis.
    ExpectSame("Concat", {Random(dtype, Shape({1, 150}), -9, 9, 1), Random(dtype, Shape({1, 150}), -9, 9, 2)},
               {{"axis", int64_t{1}}});
    // Nine inputs (one more than a kernel takes), with an empty one.
    std::vector<Tensor> nine;
    for (int i = 0; i < 9; ++i) nine.push_back(Random(dtype, Shape({3, i == 4 ? 0 : i + 1, 2}), -9, 9, 10 + i));
    ExpectSame("Concat", nine, {{"axis", int64_t{1}}});
    nine.pop_back();
    ExpectSame("Concat", nine, {{"axis", int64_t{-2}}});  // eight: one kernel
  }
  // Past 4 MiB: the copies.
  ExpectSame("Concat",
             {Random(DType::kFloat32, Shape({1100, 400}), -1, 1, 3), Random(DType::kFloat32, Shape({1100, 600}), -1, 1, 4)},
             {{"axis", int64_t{1}}});
  ExpectSame("Concat",
             {Random(DType::kFloat64, Shape({300, 700}), -1, 1, 3), Random(DType::kFloat64, Shape({400, 700}), -1, 1, 4)},
             {{"axis", int64_t{0}}});
}

TEST(CudaKernels, AddNFillsIdentityConst) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor a = Random(DType::kFloat32, Shape({3, 3}), -1, 1, 1);
  Tensor b = Random(DType::kFloat32, Shape({3, 3}), -1, 1, 2);
  Tensor c = Random(DType::kFloat32, Shape({3, 3}), -1, 1, 3);
  ExpectSame("AddN", {a, b, c});
  ExpectSame("AddN", {a});
  for (DType dtype : {DType::kBool, DType::kInt32, DType::kFloat64}) {
    ExpectSame("ZerosLike", {Random(dtype, Shape({2, 5}))});
    ExpectSame("OnesLike", {Random(dtype, Shape({2, 5}))});
  }
  ExpectSame("Identity", {a});
  ExpectSame("Const", {}, {{"value", a}});
  ExpectSame("Const", {}, {{"value", Tensor::Scalar<int64_t>(42)}});
}

TEST(CudaKernels, HostInputIsAClearError) {
  TDF_SKIP_WITHOUT_GPU();
  NodeDef node = kernel_test::MakeNode("Exp", 1);
  node.device = "cuda:0";
  auto kernel = KernelRegistry::Global()->Create(node, Device::Type::kCuda);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  Tensor x = Random(DType::kFloat32, Shape({2}));
  const Tensor* in[] = {&x};
  Tensor out;
  KernelContext ctx(in, 1, &out, 1, Device::Cuda(0));
  absl::Status s = (*kernel)->Compute(ctx);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("CopyToDevice"));
}

TEST(CudaKernels, CopyNodesRoundTrip) {
  TDF_SKIP_WITHOUT_GPU();
  NodeDef to_dev = kernel_test::MakeNode("CopyToDevice", 1, {{"device", "cuda:0"}});
  NodeDef to_host = kernel_test::MakeNode("CopyToHost", 1);
  auto k1 = KernelRegistry::Global()->Create(to_dev, Device::Type::kCpu);
  auto k2 = KernelRegistry::Global()->Create(to_host, Device::Type::kCpu);
  ASSERT_TRUE(k1.ok() && k2.ok());
  for (Tensor x : {Random(DType::kFloat32, Shape({4, 4})), Tensor::Scalar<int64_t>(7), Tensor::Scalar<bool>(true)}) {
    const Tensor* in1[] = {&x};
    Tensor dev;
    KernelContext c1(in1, 1, &dev, 1, Device::Cpu());
    ASSERT_TRUE((*k1)->Compute(c1).ok());
    EXPECT_EQ(dev.device(), Device::Cuda(0));
    const Tensor* in2[] = {&dev};
    Tensor back;
    KernelContext c2(in2, 1, &back, 1, Device::Cpu());
    ASSERT_TRUE((*k2)->Compute(c2).ok());
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(back.is_inline_scalar(), x.is_scalar());
    EXPECT_TRUE(kernel_test::TensorEq(back, x));
  }
}

TEST(CudaAllocator, SameSizeReusesTheCachedBlock) {
  TDF_SKIP_WITHOUT_GPU();
  const Device gpu = Device::Cuda(0);
  const size_t bytes = 3 * 1000 * 1000 + 17;
  Buffer* first = DeviceBackend::AllocateBuffer(bytes, gpu);
  ASSERT_NE(first, nullptr);
  void* address = first->data();
  const DeviceBackend::AllocatorStats before = DeviceBackend::GetAllocatorStats(gpu);
  first->Unref();
  const DeviceBackend::AllocatorStats freed = DeviceBackend::GetAllocatorStats(gpu);
  EXPECT_GT(freed.bytes_cached, before.bytes_cached);
  Buffer* second = DeviceBackend::AllocateBuffer(bytes, gpu);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->data(), address);
  const DeviceBackend::AllocatorStats after = DeviceBackend::GetAllocatorStats(gpu);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.driver_allocations, before.driver_allocations);
  second->Unref();
  ASSERT_TRUE(DeviceBackend::EmptyCache(gpu).ok());
  EXPECT_EQ(DeviceBackend::GetAllocatorStats(gpu).bytes_cached, 0);
}

TEST(CudaAllocator, ManyTensorsOfOneShapeDoNotCallTheDriverEachTime) {
  TDF_SKIP_WITHOUT_GPU();
  const Device gpu = Device::Cuda(0);
  ASSERT_TRUE(Tensor::Empty(DType::kFloat32, Shape({256, 256}), gpu).ok());  // warm the bucket
  const DeviceBackend::AllocatorStats before = DeviceBackend::GetAllocatorStats(gpu);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Tensor::Empty(DType::kFloat32, Shape({256, 256}), gpu).ok());
  const DeviceBackend::AllocatorStats after = DeviceBackend::GetAllocatorStats(gpu);
  EXPECT_EQ(after.driver_allocations, before.driver_allocations);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 100);
}

TEST(CudaAllocator, StatsAreZeroWithoutADevice) {
  if (DeviceBackend::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device exists";
  const DeviceBackend::AllocatorStats s = DeviceBackend::GetAllocatorStats(Device::Cuda(0));
  EXPECT_EQ(s.driver_allocations, 0);
  EXPECT_EQ(s.cache_hits, 0);
  EXPECT_EQ(DeviceBackend::Stream(Device::Cuda(0)), nullptr);
  EXPECT_FALSE(DeviceBackend::Synchronize(Device::Cuda(0)).ok());
}

}  // namespace
}  // namespace tdf
