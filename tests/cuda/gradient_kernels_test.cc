// The CUDA kernels of the gradient helpers (src/cuda/gradient_kernels.cu):
// ConcatGrad, SliceGrad, GatherGrad and MatMulAdd against their CPU kernels
// on random inputs, empty tensors and bad inputs (same status code), and a
// backward pass that placement keeps on the GPU. The kernel comparisons skip
// (with the reason) where there is no CUDA device; the placement checks run
// everywhere.
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cuda/device_backend.h"
#include "cuda/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/placement.h"
#include "tdf/session.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

using gpu_test::BothFail;
using gpu_test::ExpectBothFail;
using gpu_test::ExpectSame;
using gpu_test::ForEachMatMulCase;
using gpu_test::MatMulCase;
using gpu_test::OperandA;
using gpu_test::OperandB;
using gpu_test::Random;
using gpu_test::RandomIndices;
using gpu_test::RunGpuMixed;
using kernel_test::I32;
using kernel_test::I64;
using kernel_test::RunOp;
using ::testing::HasSubstr;

AttrMap Axis(int64_t axis) { return {{"axis", axis}}; }
AttrMap BeginSize(std::vector<int64_t> begin, std::vector<int64_t> size) {
  return {{"begin", std::move(begin)}, {"size", std::move(size)}};
}

// ---------------------------------------------------------------------------

TEST(CudaGradientKernels, GradientOpsArePlaceableAndHaveCudaKernels) {
  for (const char* op : {"ConcatGrad", "SliceGrad", "GatherGrad", "MatMulAdd"}) {
    EXPECT_TRUE(IsGpuPlaceableOp(op)) << op;
    if (DeviceBackend::CompiledWithCuda()) {
      EXPECT_TRUE(KernelRegistry::Global()->Has(op, Device::Type::kCuda)) << op;
    }
  }
}

TEST(CudaGradientKernels, ConcatGradSplitsDy) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    // Along the last axis (a 2-D copy per part), with an empty part.
    Tensor dy = Random(dtype, Shape({3, 8}), -9, 9, 1);
    ExpectSame("ConcatGrad",
               {dy, Random(dtype, Shape({3, 3})), Random(dtype, Shape({3, 5})), Random(dtype, Shape({3, 0}))},
               Axis(1), 3);
    ExpectSame("ConcatGrad", {dy, Random(dtype, Shape({3, 2})), Random(dtype, Shape({3, 6}))}, Axis(-1), 2);
    // Along the first axis (each part contiguous).
    ExpectSame("ConcatGrad", {dy, Random(dtype, Shape({1, 8})), Random(dtype, Shape({2, 8}))}, Axis(0), 2);
    ExpectSame("ConcatGrad", {Random(dtype, Shape({10}), -9, 9, 2), Random(dtype, Shape({4})),
                              Random(dtype, Shape({6}))},
               Axis(0), 2);
    // A middle axis of a rank-3 dy.
    Tensor dy3 = Random(dtype, Shape({4, 7, 5}), -9, 9, 3);
    ExpectSame("ConcatGrad",
               {dy3, Random(dtype, Shape({4, 2, 5})), Random(dtype, Shape({4, 4, 5})), Random(dtype, Shape({4, 1, 5}))},
               Axis(1), 3);
    // One part: dy itself.
    ExpectSame("ConcatGrad", {dy, Random(dtype, Shape({3, 8}))}, Axis(1), 1);
  }
  // The parts give only their shapes: their dtype may differ from dy's.
  ExpectSame("ConcatGrad",
             {Random(DType::kFloat64, Shape({2, 5})), Random(DType::kInt32, Shape({2, 2})),
              Random(DType::kBool, Shape({2, 3}))},
             Axis(1), 2);
  // Empty dy: outer 0, or every part empty along the axis.
  ExpectSame("ConcatGrad",
             {Random(DType::kFloat32, Shape({0, 5})), Random(DType::kFloat32, Shape({0, 2})),
              Random(DType::kFloat32, Shape({0, 3}))},
             Axis(1), 2);
  ExpectSame("ConcatGrad",
             {Random(DType::kFloat32, Shape({3, 0})), Random(DType::kFloat32, Shape({3, 0})),
              Random(DType::kFloat32, Shape({3, 0}))},
             Axis(1), 2);
  // Large: a grid of blocks per copy.
  Tensor big = Random(DType::kFloat64, Shape({300, 1000}), -1, 1, 4);
  ExpectSame("ConcatGrad",
             {big, Random(DType::kFloat64, Shape({300, 333})), Random(DType::kFloat64, Shape({300, 667}))}, Axis(1),
             2);
}

TEST(CudaGradientKernels, ConcatGradErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor dy = Random(DType::kFloat32, Shape({3, 8}));
  Tensor a = Random(DType::kFloat32, Shape({3, 3}));
  Tensor b = Random(DType::kFloat32, Shape({3, 5}));
  ExpectBothFail("ConcatGrad", {dy, a, a}, Axis(1), 2);                                   // parts add up to 6
  ExpectBothFail("ConcatGrad", {dy, a, Random(DType::kFloat32, Shape({2, 5}))}, Axis(1), 2);  // other dim differs
  ExpectBothFail("ConcatGrad", {dy, a, Random(DType::kFloat32, Shape({5}))}, Axis(1), 2);     // rank differs
  ExpectBothFail("ConcatGrad", {dy, a, b}, Axis(2), 2);                                   // bad axis
  ExpectBothFail("ConcatGrad", {dy, a, b}, Axis(-3), 2);
  ExpectBothFail("ConcatGrad", {dy, a, b}, Axis(1), 1);                                   // outputs != parts
  ExpectBothFail("ConcatGrad", {dy, a, b}, Axis(1), 3);
  ExpectBothFail("ConcatGrad", {dy}, Axis(1), 1);                                         // no parts
  ExpectBothFail("ConcatGrad", {Tensor::Scalar<float>(1), Tensor::Scalar<float>(1)}, Axis(0), 1);  // scalar dy
  ExpectBothFail("ConcatGrad", {dy, a, b}, {}, 2);                                        // no axis attr
}

TEST(CudaGradientKernels, SliceGradWritesDyIntoZeros) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor x = Random(dtype, Shape({4, 5, 6}), -9, 9, 1);
    auto check = [&](std::vector<int64_t> begin, std::vector<int64_t> size) {
      SCOPED_TRACE(::testing::PrintToString(begin) + " " + ::testing::PrintToString(size));
      // dy has the slice's shape: the CPU Slice gives it.
      absl::StatusOr<std::vector<Tensor>> slice = RunOp("Slice", {Random(dtype, x.shape(), -9, 9, 7)},
                                                        BeginSize(begin, size));
      ASSERT_TRUE(slice.ok()) << slice.status();
      ExpectSame("SliceGrad", {x, (*slice)[0]}, BeginSize(begin, size));
    };
    check({1, 0, 2}, {2, -1, 3});  // strided
    check({1, 1, 0}, {3, 3, 6});   // rows of 6: coalesced
    check({1, 0, 0}, {2, 5, 6});   // one contiguous run
    check({3, 4, 5}, {1, 1, 1});   // one element
    check({0, 2, 0}, {4, 1, 6});   // a size-1 dim between others
    check({0, 0, 0}, {4, 5, 6});   // the whole of x: dy itself
    check({0, 5, 0}, {4, 0, 6});   // empty
    check({4, 0, 0}, {-1, -1, -1});  // empty: begin at the end
  }
  // Rank 1 and a scalar x.
  ExpectSame("SliceGrad", {Random(DType::kFloat32, Shape({9})), Random(DType::kFloat32, Shape({4}))},
             BeginSize({3}, {4}));
  ExpectSame("SliceGrad", {Tensor::Scalar<double>(2), Tensor::Scalar<double>(5)}, BeginSize({}, {}));
  // Rank 9: more dims than a strided kernel takes, fewer once coalesced.
  const Shape x9({2, 2, 2, 2, 2, 2, 2, 2, 2});
  ExpectSame("SliceGrad", {Random(DType::kFloat32, x9), Random(DType::kFloat32, Shape({1, 2, 2, 2, 2, 2, 2, 2, 2}))},
             BeginSize({1, 0, 0, 0, 0, 0, 0, 0, 0}, {1, -1, -1, -1, -1, -1, -1, -1, -1}));
  ExpectSame("SliceGrad", {Random(DType::kFloat32, x9), Random(DType::kFloat32, Shape({2, 1, 2, 1, 2, 1, 2, 1, 2}))},
             BeginSize({0, 1, 0, 0, 0, 1, 0, 1, 0}, {2, 1, 2, 1, 2, 1, 2, 1, 2}));
  // Large: many blocks of a grid-stride loop.
  ExpectSame("SliceGrad", {Random(DType::kFloat64, Shape({300, 1000})), Random(DType::kFloat64, Shape({200, 900}))},
             BeginSize({10, 7}, {200, 900}));
}

TEST(CudaGradientKernels, SliceGradErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor x = Random(DType::kFloat32, Shape({4, 5}));
  Tensor dy = Random(DType::kFloat32, Shape({2, 3}));
  ExpectBothFail("SliceGrad", {x, dy}, BeginSize({3, 0}, {2, 3}));                       // past the end
  ExpectBothFail("SliceGrad", {x, dy}, BeginSize({-1, 0}, {2, 3}));                      // negative begin
  ExpectBothFail("SliceGrad", {x, dy}, BeginSize({std::numeric_limits<int64_t>::min(), 0}, {2, 3}));
  ExpectBothFail("SliceGrad", {x, dy}, BeginSize({0, 0}, {-2, 3}));                      // negative size
  ExpectBothFail("SliceGrad", {x, dy}, BeginSize({0}, {2}));                             // rank differs
  ExpectBothFail("SliceGrad", {x, dy}, BeginSize({0, 0}, {2}));                          // begin/size lengths
  ExpectBothFail("SliceGrad", {x, dy}, BeginSize({0, 0}, {3, 3}));                       // dy's shape
  ExpectBothFail("SliceGrad", {x, Random(DType::kFloat64, Shape({2, 3}))}, BeginSize({0, 0}, {2, 3}));  // dtype
  ExpectBothFail("SliceGrad", {x}, BeginSize({0, 0}, {2, 3}));                           // arity
  ExpectBothFail("SliceGrad", {x, dy}, {{"begin", std::vector<int64_t>{0, 0}}});         // no size attr
}

TEST(CudaGradientKernels, GatherGradAccumulatesRepeatedIndices) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Shape ps({5, 4, 3});
    Tensor params = Random(dtype, ps);
    // Axis 0, [2, 2] indices with a repeat.
    ExpectSame("GatherGrad", {params, I64({4, 0, 2, 2}, Shape({2, 2})), Random(dtype, Shape({2, 2, 4, 3}))});
    // Axis 1 by int32 indices; axis -1; a scalar index.
    ExpectSame("GatherGrad", {params, I32({3, 1, 3}, Shape({3})), Random(dtype, Shape({5, 3, 3}))}, Axis(1));
    ExpectSame("GatherGrad", {params, I64({2, 2, 0, 2}, Shape({4})), Random(dtype, Shape({5, 4, 4}))}, Axis(-1));
    ExpectSame("GatherGrad", {params, Tensor::Scalar<int64_t>(3), Random(dtype, Shape({4, 3}))});
    ExpectSame("GatherGrad", {params, Tensor::Scalar<int32_t>(0), Random(dtype, Shape({5, 3}))}, Axis(1));
    // No indices: zeros.
    ExpectSame("GatherGrad", {params, I64({}, Shape({0})), Random(dtype, Shape({0, 4, 3}))});
    // Empty params (inner or outer 0), in-range indices.
    ExpectSame("GatherGrad",
               {Random(dtype, Shape({3, 0})), I64({1, 1, 2}, Shape({3})), Random(dtype, Shape({3, 0}))});
    ExpectSame("GatherGrad",
               {Random(dtype, Shape({0, 3})), I32({2, 0}, Shape({2})), Random(dtype, Shape({0, 2}))}, Axis(1));
    // Many repeats (heavy atomic contention), int64 and int32 indices.
    for (DType idx_dtype : {DType::kInt64, DType::kInt32}) {
      Tensor idx = RandomIndices(idx_dtype, Shape({40, 50}), 10);
      ExpectSame("GatherGrad", {Random(dtype, Shape({10, 64})), idx, Random(dtype, Shape({40, 50, 64}), -1, 1, 5)}, {},
                 1, dtype == DType::kFloat32 ? 1e-4 : 1e-10);
      ExpectSame("GatherGrad",
                 {Random(dtype, Shape({3, 10, 7})), idx, Random(dtype, Shape({3, 40, 50, 7}), -1, 1, 6)}, Axis(1), 1,
                 dtype == DType::kFloat32 ? 1e-4 : 1e-10);
    }
  }
  // Integers: exact, and wrapping on overflow as on the CPU.
  ExpectSame("GatherGrad", {Random(DType::kInt32, Shape({3, 2})), I64({0, 0, 0, 2}, Shape({4})),
                            Random(DType::kInt32, Shape({4, 2}), 1e9, 2.1e9)});
  ExpectSame("GatherGrad", {Random(DType::kInt64, Shape({3, 2})), I32({1, 1, 1, 0}, Shape({4})),
                            Random(DType::kInt64, Shape({4, 2}), 4e18, 9e18)});
  ExpectSame("GatherGrad", {Random(DType::kInt64, Shape({6, 5})), RandomIndices(DType::kInt64, Shape({30}), 6),
                            Random(DType::kInt64, Shape({30, 5}), -100, 100)});
}

TEST(CudaGradientKernels, GatherGradIndexOutOfRangeIsReportedAtSynchronize) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor params = Random(DType::kFloat32, Shape({5, 4}));
  absl::Status s = BothFail("GatherGrad", {params, I64({1, 5}, Shape({2})), Random(DType::kFloat32, Shape({2, 4}))});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("out of range"));
  ExpectBothFail("GatherGrad", {params, I32({-1}, Shape({1})), Random(DType::kFloat32, Shape({1, 4}))});
  ExpectBothFail("GatherGrad", {params, I64({0, 4}, Shape({2})), Random(DType::kFloat32, Shape({5, 2}))}, Axis(1));
  // dy is empty (params' inner dims are 0) but an index is still checked.
  ExpectBothFail("GatherGrad",
                 {Random(DType::kFloat32, Shape({2, 0})), I64({0, 2}, Shape({2})),
                  Random(DType::kFloat32, Shape({2, 0}))});
  // Indices into an empty axis are all out of range.
  ExpectBothFail("GatherGrad",
                 {Random(DType::kFloat64, Shape({0, 3})), I32({0}, Shape({1})),
                  Random(DType::kFloat64, Shape({1, 3}))});
  // The error word was cleared: the next run succeeds.
  ExpectSame("GatherGrad", {params, I64({1, 1}, Shape({2})), Random(DType::kFloat32, Shape({2, 4}))});
}

TEST(CudaGradientKernels, GatherGradErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor params = Random(DType::kFloat32, Shape({5, 4}));
  Tensor idx = I64({1, 2}, Shape({2}));
  Tensor dy = Random(DType::kFloat32, Shape({2, 4}));
  ExpectBothFail("GatherGrad", {params, idx, Random(DType::kFloat64, Shape({2, 4}))});  // dtype mismatch
  ExpectBothFail("GatherGrad", {params, idx, Random(DType::kFloat32, Shape({2, 5}))});  // dy's shape
  ExpectBothFail("GatherGrad", {params, idx, Random(DType::kFloat32, Shape({8}))});
  ExpectBothFail("GatherGrad", {params, Random(DType::kFloat32, Shape({2})), dy});      // float indices
  ExpectBothFail("GatherGrad", {params, idx, dy}, Axis(2));                             // bad axis
  ExpectBothFail("GatherGrad", {Tensor::Scalar<float>(1), idx, dy});                    // scalar params
  ExpectBothFail("GatherGrad", {params, idx});                                          // arity
  ExpectBothFail("GatherGrad", {Random(DType::kBool, Shape({5, 4})), idx, Random(DType::kBool, Shape({2, 4}))});
}

// Both paths of MatMulAdd's product (cuda/small_ops.cuh): a plain kernel
// up to 2^20 multiply-adds, cuBLAS past it; with and without addends.
TEST(CudaGradientKernels, MatMulAddSmallKernelAndCublasPaths) {
  TDF_SKIP_WITHOUT_GPU();
  ForEachMatMulCase(
      {{1, 150, 300}, {300, 1, 150}, {128, 256, 64}, {1025, 1, 1024}},
      [](DType dtype, const MatMulCase& c, bool ta, bool tb) {
        const double tol = dtype == DType::kFloat32 ? 1e-4 : 1e-10;
        const AttrMap attrs = {{"transpose_a", ta}, {"transpose_b", tb}};
        std::vector<Tensor> in = {Random(dtype, OperandA(c, ta), -2, 2, 1), Random(dtype, OperandB(c, tb), -2, 2, 2)};
        ExpectSame("MatMulAdd", in, attrs, 1, tol);
        in.push_back(Random(dtype, Shape({c.m, c.n}), -3, 3, 3));
        ExpectSame("MatMulAdd", in, attrs, 1, tol);
        in.push_back(Random(dtype, Shape({c.m, c.n}), -3, 3, 4));
        ExpectSame("MatMulAdd", in, attrs, 1, tol);
      });
}

// Both paths of ConcatGrad: one kernel for up to 8 parts of up to 4 MiB,
// a copy per part otherwise.
TEST(CudaGradientKernels, ConcatGradOneKernelAndCopyPaths) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    ExpectSame("ConcatGrad",
               {Random(dtype, Shape({1, 300}), -9, 9, 1), Random(dtype, Shape({1, 150})), Random(dtype, Shape({1, 150}))},
               Axis(1), 2);
    for (int parts : {8, 9}) {
      std::vector<Tensor> in = {Tensor()};
      int64_t total = 0;
      for (int i = 0; i < parts; ++i) {
        const int64_t w = i == 3 ? 0 : i + 1;
        in.push_back(Random(dtype, Shape({2, w, 3})));
        total += w;
      }
      in[0] = Random(dtype, Shape({2, total, 3}), -9, 9, 7);
      ExpectSame("ConcatGrad", in, Axis(1), parts);
    }
  }
  // Past 4 MiB: the copies.
  ExpectSame("ConcatGrad",
             {Random(DType::kFloat64, Shape({800, 1000}), -1, 1, 4), Random(DType::kFloat64, Shape({800, 250})),
              Random(DType::kFloat64, Shape({800, 750}))},
             Axis(1), 2);
}

TEST(CudaGradientKernels, MatMulAddThroughCublas) {
  TDF_SKIP_WITHOUT_GPU();
  ForEachMatMulCase(
      {{3, 4, 5}, {64, 128, 32}, {1, 1, 1}, {7, 1, 9}, {4, 0, 3}, {0, 3, 2}, {3, 2, 0}},
      [](DType dtype, const MatMulCase& c, bool ta, bool tb) {
        const double tol = dtype == DType::kFloat32 ? 1e-4 : 1e-10;
        const AttrMap attrs = {{"transpose_a", ta}, {"transpose_b", tb}};
        std::vector<Tensor> in = {Random(dtype, OperandA(c, ta), -2, 2, 1), Random(dtype, OperandB(c, tb), -2, 2, 2)};
        ExpectSame("MatMulAdd", in, attrs, 1, tol);  // no addends: a plain product
        // 1, 2, 3, 8, 9 and 17 addends (the sum runs in chunks of 8).
        for (int count = 1; count <= 17; ++count) {
          in.push_back(Random(dtype, Shape({c.m, c.n}), -3, 3, 10 + count));
          if (count <= 3 || count == 8 || count == 9 || count == 17) ExpectSame("MatMulAdd", in, attrs, 1, tol);
        }
      });
}

TEST(CudaGradientKernels, MatMulAddErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor a = Random(DType::kFloat32, Shape({2, 3}));
  Tensor b = Random(DType::kFloat32, Shape({3, 4}));
  Tensor c = Random(DType::kFloat32, Shape({2, 4}));
  ExpectBothFail("MatMulAdd", {a});                                                     // arity
  ExpectBothFail("MatMulAdd", {a, Random(DType::kFloat64, Shape({3, 4})), c});          // operand dtypes
  ExpectBothFail("MatMulAdd", {Random(DType::kInt32, Shape({2, 3})), Random(DType::kInt32, Shape({3, 4}))});
  ExpectBothFail("MatMulAdd", {Random(DType::kFloat32, Shape({2, 3, 1})), b, c});       // rank
  ExpectBothFail("MatMulAdd", {a, Random(DType::kFloat32, Shape({4, 4})), c});          // inner dims
  ExpectBothFail("MatMulAdd", {a, b}, {{"transpose_a", true}});
  ExpectBothFail("MatMulAdd", {a, b, c, Random(DType::kFloat64, Shape({2, 4}))});       // addend dtype
  ExpectBothFail("MatMulAdd", {a, b, c, Random(DType::kFloat32, Shape({4, 2}))});       // addend shape
  ExpectBothFail("MatMulAdd", {a, b, Random(DType::kFloat32, Shape({8}))});
}

// Inputs that give only their shape may stay on the host; the others must be
// on the device (FailedPrecondition naming the missing CopyToDevice).
TEST(CudaGradientKernels, ShapeOnlyInputsMayBeHostTensors) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor dy = Random(DType::kFloat32, Shape({3, 8}));
  Tensor a = Random(DType::kFloat32, Shape({3, 3}));
  Tensor b = Random(DType::kFloat32, Shape({3, 5}));
  EXPECT_TRUE(RunGpuMixed("ConcatGrad", {dy, a, b}, {true, false, false}, Axis(1), 2).ok());
  absl::Status s = RunGpuMixed("ConcatGrad", {dy, a, b}, {false, true, true}, Axis(1), 2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("CopyToDevice"));
  // An invalid part is an error, as on the CPU.
  EXPECT_EQ(RunGpuMixed("ConcatGrad", {dy, a, Tensor()}, {true, true, false}, Axis(1), 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("ConcatGrad", {dy, a, Tensor()}, Axis(1), 2).status().code(), absl::StatusCode::kInvalidArgument);

  Tensor x = Random(DType::kFloat32, Shape({4, 5}));
  Tensor sdy = Random(DType::kFloat32, Shape({2, 3}));
  EXPECT_TRUE(RunGpuMixed("SliceGrad", {x, sdy}, {false, true}, BeginSize({1, 1}, {2, 3})).ok());
  EXPECT_EQ(RunGpuMixed("SliceGrad", {x, sdy}, {true, false}, BeginSize({1, 1}, {2, 3})).status().code(),
            absl::StatusCode::kFailedPrecondition);

  Tensor params = Random(DType::kFloat32, Shape({5, 4}));
  Tensor idx = I64({1, 2}, Shape({2}));
  Tensor gdy = Random(DType::kFloat32, Shape({2, 4}));
  EXPECT_TRUE(RunGpuMixed("GatherGrad", {params, idx, gdy}, {false, true, true}).ok());
  EXPECT_EQ(RunGpuMixed("GatherGrad", {params, idx, gdy}, {true, false, true}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RunGpuMixed("GatherGrad", {params, idx, gdy}, {true, true, false}).status().code(),
            absl::StatusCode::kFailedPrecondition);

  Tensor ma = Random(DType::kFloat32, Shape({2, 3}));
  Tensor mb = Random(DType::kFloat32, Shape({3, 4}));
  Tensor mc = Random(DType::kFloat32, Shape({2, 4}));
  EXPECT_EQ(RunGpuMixed("MatMulAdd", {ma, mb, mc}, {true, true, false}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ---------------------------------------------------------------------------
// A backward pass through Slice, Concat, Gather (a repeated index) and two
// MatMuls of one value (their gradients fuse into a MatMulAdd):
//   s = x[1:3, :], c = concat(x, s), g = gather(c, idx),
//   loss = sum(tanh(g w) * (g w2)).

Graph BackwardGraph() {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat64);
  Output w = b.Placeholder("w", DType::kFloat64);
  Output w2 = b.Placeholder("w2", DType::kFloat64);
  Output idx = b.Placeholder("idx", DType::kInt64);
  Output s = b.Slice(x, {1, 0}, {2, 6});
  Output c = b.Concat({x, s}, 0);
  Output g = b.Gather(c, idx);
  Output y = b.Mul(b.Tanh(b.MatMul(g, w)), b.MatMul(g, w2));
  b.Identity(b.Sum(y), "loss");
  absl::StatusOr<Graph> graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return Graph{};
  absl::StatusOr<std::vector<std::string>> d = AddGradients(*graph, {"loss"}, {"x", "w"});
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return Graph{};
  EXPECT_EQ(d->size(), 2u);
  if (d->size() != 2) return Graph{};
  // Name the gradients for fetching.
  graph->node.push_back(NodeDef());
  NodeDef& dx = graph->node.back();
  dx.name = "dx";
  dx.op = "Identity";
  dx.input = {(*d)[0]};
  graph->node.push_back(NodeDef());
  NodeDef& dw = graph->node.back();
  dw.name = "dw";
  dw.op = "Identity";
  dw.input = {(*d)[1]};
  return *graph;
}

std::vector<std::pair<std::string, Tensor>> BackwardFeeds() {
  return {{"x", Random(DType::kFloat64, Shape({4, 6}), -1, 1, 1)},
          {"w", Random(DType::kFloat64, Shape({6, 3}), -1, 1, 2)},
          {"w2", Random(DType::kFloat64, Shape({6, 3}), -1, 1, 3)},
          {"idx", I64({1, 5, 1, 0, 4}, Shape({5}))}};
}

TEST(CudaGradientKernels, PlacementKeepsTheBackwardPassOnTheGpu) {
  Graph g = BackwardGraph();
  ASSERT_TRUE(Validate(g).ok()) << Validate(g);
  std::map<std::string, int> counts;
  for (const NodeDef& n : g.node) ++counts[n.op];
  EXPECT_EQ(counts["ConcatGrad"], 1);
  EXPECT_EQ(counts["SliceGrad"], 1);
  EXPECT_EQ(counts["GatherGrad"], 1);
  EXPECT_EQ(counts["MatMulAdd"], 1);
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  ASSERT_TRUE(PlaceDevices(g, opts).ok());
  ASSERT_TRUE(Validate(g).ok()) << Validate(g);
  for (const NodeDef& n : g.node) {
    if (n.op == "ConcatGrad" || n.op == "SliceGrad" || n.op == "GatherGrad" || n.op == "MatMulAdd") {
      EXPECT_EQ(n.device, "cuda:0") << NodeLabel(n);
      // Their inputs come from the GPU or through a CopyToDevice, never
      // straight from a host op.
      for (int k = 0; k < n.num_data_inputs(); ++k) {
        const std::string& in = n.input[k];
        absl::StatusOr<InputRef> ref = InputRef::Parse(in);
        ASSERT_TRUE(ref.ok());
        const NodeDef* p = g.FindNode(ref->node);
        ASSERT_NE(p, nullptr) << in;
        EXPECT_TRUE(p->op == "CopyToDevice" || p->device == "cuda:0") << NodeLabel(n) << " <- " << NodeLabel(*p);
      }
    }
  }
}

absl::StatusOr<std::vector<Tensor>> RunBackward(const Graph& graph) {
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(graph));
  TDF_ASSIGN_OR_RETURN(std::vector<Tensor> out, session->Run(BackwardFeeds(), {"loss", "dx", "dw"}));
  for (Tensor& t : out) {
    TDF_ASSIGN_OR_RETURN(t, gpu_test::ToHost(t));
  }
  return out;
}

TEST(CudaGradientKernels, BackwardPassOnTheGpuMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Graph cpu_graph = BackwardGraph();
  Graph gpu_graph = cpu_graph;
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.fallback_to_cpu = false;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(gpu_graph, opts, &report).ok());
  ASSERT_GT(report.gpu_nodes, 0);
  absl::StatusOr<std::vector<Tensor>> cpu = RunBackward(cpu_graph);
  absl::StatusOr<std::vector<Tensor>> gpu = RunBackward(gpu_graph);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ(cpu->size(), 3u);
  ASSERT_EQ(gpu->size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(kernel_test::TensorNear((*gpu)[i], (*cpu)[i], 1e-10)) << "output " << i;
}

}  // namespace
}  // namespace tdf
