// The CUDA kernels of the row gradients of recursive functions
// (src/cuda/row_kernels.cu): IndexedRows, IndexedRowsConcat, IndexedRowsSum,
// IndexedRowsSplit, OuterRowsConcat and OuterRowsSum against their CPU
// kernels on random inputs (float32 and float64), empty inputs, the
// compaction paths (where IndexedRowsConcat's GPU result differs in layout,
// compared through the dense sum), bad inputs (same status code; bad indices
// reported at Synchronize), and a recursive network's gradient (and an SGD
// step) on the GPU against the CPU. The kernel comparisons skip (with the
// reason) where there is no CUDA device; the placement checks run everywhere.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cuda/device_backend.h"
#include "cuda/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/op_registry.h"
#include "tdf/placement.h"
#include "tdf/session.h"
#include "tdf/transform.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

using gpu_test::BothFail;
using gpu_test::ExpectBothFail;
using gpu_test::Random;
using gpu_test::RandomIndices;
using gpu_test::RunGpuMixed;
using gpu_test::RunGpuOp;
using kernel_test::I32;
using kernel_test::I64;
using kernel_test::RunOp;
using ::testing::HasSubstr;

const char* const kRowOps[] = {"IndexedRows",      "IndexedRowsConcat", "IndexedRowsSum",
                               "IndexedRowsSplit", "OuterRowsConcat",   "OuterRowsSum"};

double Tol(DType dtype) { return dtype == DType::kFloat32 ? 1e-4 : 1e-10; }

// Stores `index` bit for bit in the first element of row r of indexed rows.
void SetIndex(Tensor& rows, int64_t r, int64_t index) {
  const int64_t w = rows.shape().dim(1);
  if (rows.dtype() == DType::kFloat32) {
    const int32_t i = static_cast<int32_t>(index);
    std::memcpy(rows.mutable_data<float>() + r * w, &i, sizeof(i));
  } else {
    std::memcpy(rows.mutable_data<double>() + r * w, &index, sizeof(index));
  }
}
int64_t GetIndex(const Tensor& rows, int64_t r) {
  const int64_t w = rows.shape().dim(1);
  if (rows.dtype() == DType::kFloat32) {
    int32_t i;
    std::memcpy(&i, rows.data<float>() + r * w, sizeof(i));
    return i;
  }
  int64_t i;
  std::memcpy(&i, rows.data<double>() + r * w, sizeof(i));
  return i;
}

// D, the size of one row of a table of shape `table`.
int64_t RowSize(const Shape& table) {
  int64_t D = 1;
  for (int d = 1; d < table.rank(); ++d) D *= table.dim(d);
  return D;
}

// m indexed rows [index | D values] for a table of R rows: indices in
// [0, limit) (limit <= R), values in [-2, 2).
Tensor IndexedRowsOf(DType dtype, int64_t m, int64_t D, int64_t limit, uint32_t seed) {
  Tensor rows = Random(dtype, Shape({m, 1 + D}), -2, 2, seed);
  std::mt19937 rng(seed * 31u + 7u);
  std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(0, limit - 1));
  for (int64_t r = 0; r < m; ++r) SetIndex(rows, r, dist(rng));
  return rows;
}

// Runs `op` on the CPU and on the GPU and expects the same result (or the
// same status code). The row ops take no attributes and copy bits: float
// outputs bit for bit unless a tolerance `tol` > 0 is given.
void ExpectSame(const std::string& op, const std::vector<Tensor>& inputs, int num_outputs = 1, double tol = 0) {
  gpu_test::ExpectSame(op, inputs, {}, num_outputs, tol);
}

// The single output of the GPU kernel (all inputs on the device).
Tensor Gpu1(const std::string& op, const std::vector<Tensor>& inputs) {
  absl::StatusOr<std::vector<Tensor>> out = RunGpuOp(op, inputs);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}
Tensor Cpu1(const std::string& op, const std::vector<Tensor>& inputs) { return kernel_test::Run1(op, inputs); }

// ---------------------------------------------------------------------------

TEST(CudaRowKernels, RowOpsArePlaceableAndHaveCudaKernels) {
  for (const char* op : kRowOps) {
    EXPECT_TRUE(IsGpuPlaceableOp(op)) << op;
    if (DeviceBackend::CompiledWithCuda()) {
      EXPECT_TRUE(KernelRegistry::Global()->Has(op, Device::Type::kCuda)) << op;
    }
  }
}

TEST(CudaRowKernels, IndexedRowsMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (DType idx_dtype : {DType::kInt64, DType::kInt32}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", DTypeName(idx_dtype)));
      struct Case {
        Shape table, indices;
      };
      for (const Case& c : {Case{Shape({5, 3}), Shape({4})}, Case{Shape({5, 2, 3}), Shape({2, 3})},
                            Case{Shape({7}), Shape({6})}, Case{Shape({5, 3}), Shape({})},
                            Case{Shape({5, 3}), Shape({0})}, Case{Shape({4, 0}), Shape({3})},
                            Case{Shape({0, 3}), Shape({0, 2})}, Case{Shape({50, 33}), Shape({70, 41})}}) {
        SCOPED_TRACE(c.table.DebugString() + " by " + c.indices.DebugString());
        const int64_t R = c.table.dim(0);
        Tensor idx = R > 0 ? RandomIndices(idx_dtype, c.indices, R) : *Tensor::Zeros(idx_dtype, c.indices);
        Shape dy_shape = c.indices;
        for (int d = 1; d < c.table.rank(); ++d) dy_shape.AddDim(c.table.dim(d));
        std::vector<Tensor> in = {Random(dtype, c.table), idx, Random(dtype, dy_shape, -2, 2, 5)};
        ExpectSame("IndexedRows", in);  // copies only: bit for bit
        // Host indices (the placement pass keeps integer arithmetic on the
        // host) and a host table (it gives only its shape).
        absl::StatusOr<std::vector<Tensor>> cpu = RunOp("IndexedRows", in);
        absl::StatusOr<std::vector<Tensor>> mixed = RunGpuMixed("IndexedRows", in, {false, false, true});
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        ASSERT_TRUE(mixed.ok()) << mixed.status();
        EXPECT_TRUE(kernel_test::TensorEq((*mixed)[0], (*cpu)[0]));
      }
    }
    // An inline scalar index on the host.
    std::vector<Tensor> in = {Random(dtype, Shape({4, 2})), Tensor::Scalar<int64_t>(3), Random(dtype, Shape({2}))};
    absl::StatusOr<std::vector<Tensor>> mixed = RunGpuMixed("IndexedRows", in, {true, false, true});
    ASSERT_TRUE(mixed.ok()) << mixed.status();
    EXPECT_TRUE(kernel_test::TensorEq((*mixed)[0], Cpu1("IndexedRows", in)));
  }
}

TEST(CudaRowKernels, IndexedRowsErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor P = Random(DType::kFloat32, Shape({5, 3}));
  Tensor idx = I64({1, 4}, Shape({2}));
  Tensor dy = Random(DType::kFloat32, Shape({2, 3}));
  // Device indices out of range: found by the kernel, reported at Synchronize.
  for (const Tensor& bad : {I64({1, 5}, Shape({2})), I32({-1, 0}, Shape({2})),
                            I64({int64_t{1} << 33, 0}, Shape({2}))}) {
    absl::Status s = BothFail("IndexedRows", {P, bad, dy});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("out of range"));
    // Host indices: checked on the host, with the CPU's message.
    absl::Status host = RunGpuMixed("IndexedRows", {P, bad, dy}, {true, false, true}).status();
    EXPECT_EQ(host.code(), absl::StatusCode::kInvalidArgument) << host;
    EXPECT_EQ(host.message(), RunOp("IndexedRows", {P, bad, dy}).status().message());
  }
  ExpectBothFail("IndexedRows", {Random(DType::kFloat64, Shape({0, 3})), I32({0}, Shape({1})),
                                 Random(DType::kFloat64, Shape({1, 3}))});  // an empty table
  // The error word was cleared: the next run succeeds.
  ExpectSame("IndexedRows", {P, idx, dy});
  ExpectBothFail("IndexedRows", {P, idx, Random(DType::kFloat64, Shape({2, 3}))});  // dtype mismatch
  ExpectBothFail("IndexedRows", {P, idx, Random(DType::kFloat32, Shape({2, 4}))});  // dy's shape
  ExpectBothFail("IndexedRows", {P, idx, Random(DType::kFloat32, Shape({6}))});
  ExpectBothFail("IndexedRows", {P, Random(DType::kFloat32, Shape({2})), dy});      // float indices
  ExpectBothFail("IndexedRows", {Tensor::Scalar<float>(1), idx, Random(DType::kFloat32, Shape({2}))});  // scalar P
  ExpectBothFail("IndexedRows", {I64({1, 2, 3, 4, 5}, Shape({5})), idx, I64({1, 2}, Shape({2}))});     // int table
  ExpectBothFail("IndexedRows", {P, idx});                                          // arity
}

TEST(CudaRowKernels, IndexedRowsConcatMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    for (const Shape& table : {Shape({6, 3}), Shape({6, 2, 2}), Shape({9}), Shape({5, 0}), Shape({40, 17})}) {
      SCOPED_TRACE(table.DebugString());
      const int64_t R = table.dim(0), D = RowSize(table);
      Tensor P = Random(dtype, table);
      auto rows = [&](int64_t m, uint32_t seed) { return IndexedRowsOf(dtype, m, D, R, seed); };
      Tensor empty = rows(0, 1);
      // At most R rows: kept as they are, in order (bit for bit).
      ExpectSame("IndexedRowsConcat", {P});                                 // the empty sum
      ExpectSame("IndexedRowsConcat", {P, empty, empty});
      ExpectSame("IndexedRowsConcat", {P, rows(2, 2)});                     // shared
      ExpectSame("IndexedRowsConcat", {P, empty, rows(R, 3), empty});       // shared, R rows
      ExpectSame("IndexedRowsConcat", {P, rows(1, 4), rows(R - 2, 5)});     // R - 1 rows
      ExpectSame("IndexedRowsConcat", {P, rows(2, 6), empty, rows(R - 2, 7)});  // exactly R
      // More than R rows: compacted. The CPU keeps one row per distinct
      // index; the GPU all R rows, index r in row r: the same dense sum.
      const std::vector<std::vector<Tensor>> long_sums = {
          {P, rows(R, 8), rows(1, 9)},
          {P, rows(R + 1, 10)},  // one input, too long
          {P, rows(3 * R + 2, 11), empty, rows(2 * R, 12)},
          {P, rows(2, 13), rows(R, 14), rows(1, 15)},
      };
      for (const std::vector<Tensor>& in : long_sums) {
        int64_t m = 0;
        for (size_t i = 1; i < in.size(); ++i) m += in[i].shape().dim(0);
        SCOPED_TRACE(absl::StrCat(in.size() - 1, " inputs, ", m, " rows"));
        Tensor cpu = Cpu1("IndexedRowsConcat", in);
        Tensor gpu = Gpu1("IndexedRowsConcat", in);
        ASSERT_TRUE(gpu.valid());
        ASSERT_EQ(gpu.shape(), Shape({R, 1 + D}));
        for (int64_t r = 0; r < R; ++r) EXPECT_EQ(GetIndex(gpu, r), r);
        EXPECT_TRUE(kernel_test::TensorNear(Cpu1("IndexedRowsSum", {gpu, P}), Cpu1("IndexedRowsSum", {cpu, P}),
                                            Tol(dtype)));
        // A compacted sum is a sum like any other: concatenate it again.
        std::vector<Tensor> again = {P, gpu, rows(2, 16)};
        std::vector<Tensor> again_cpu = {P, cpu, rows(2, 16)};
        EXPECT_TRUE(kernel_test::TensorNear(Cpu1("IndexedRowsSum", {Gpu1("IndexedRowsConcat", again), P}),
                                            Cpu1("IndexedRowsSum", {Cpu1("IndexedRowsConcat", again_cpu), P}),
                                            Tol(dtype)));
      }
    }
    // More inputs than one launch takes (8): concatenated and compacted.
    Tensor P = Random(dtype, Shape({60, 5}));
    std::vector<Tensor> many = {P};
    for (uint32_t i = 0; i < 19; ++i) many.push_back(IndexedRowsOf(dtype, i % 4, 5, 60, 100 + i));
    ExpectSame("IndexedRowsConcat", many);  // 0 + 1 + 2 + 3 + ... = 27 rows <= 60
    for (uint32_t i = 0; i < 5; ++i) many.push_back(IndexedRowsOf(dtype, 9, 5, 60, 200 + i));
    Tensor cpu = Cpu1("IndexedRowsConcat", many);  // 72 rows > 60
    Tensor gpu = Gpu1("IndexedRowsConcat", many);
    ASSERT_TRUE(gpu.valid());
    EXPECT_EQ(gpu.shape(), Shape({60, 6}));
    EXPECT_TRUE(
        kernel_test::TensorNear(Cpu1("IndexedRowsSum", {gpu, P}), Cpu1("IndexedRowsSum", {cpu, P}), Tol(dtype)));
    // Heavy contention: thousands of rows on a few indices.
    Tensor small = Random(dtype, Shape({3, 64}));
    std::vector<Tensor> hot = {small, IndexedRowsOf(dtype, 3000, 64, 3, 7), IndexedRowsOf(dtype, 5, 64, 3, 8)};
    gpu = Gpu1("IndexedRowsConcat", hot);
    ASSERT_TRUE(gpu.valid());
    EXPECT_TRUE(kernel_test::TensorNear(Cpu1("IndexedRowsSum", {gpu, small}),
                                        Cpu1("IndexedRowsSum", {Cpu1("IndexedRowsConcat", hot), small}),
                                        dtype == DType::kFloat32 ? 1e-3 : 1e-10));
  }
}

// Indices out of range in every path: shared, concatenated, compacted.
TEST(CudaRowKernels, IndexedRowsConcatErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor P = Random(dtype, Shape({4, 2}));
    Tensor good = IndexedRowsOf(dtype, 2, 2, 4, 1);
    for (int64_t bad_index : {int64_t{-1}, int64_t{4}, int64_t{1000}}) {
      for (int64_t m : {1, 2, 6}) {  // shared; with `good`'s 2 rows: concatenated (4 = R), compacted
        Tensor bad = IndexedRowsOf(dtype, m, 2, 4, 2);
        SetIndex(bad, m - 1, bad_index);
        const std::vector<Tensor> in = m == 1 ? std::vector<Tensor>{P, bad} : std::vector<Tensor>{P, good, bad};
        absl::Status s = BothFail("IndexedRowsConcat", in);
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(s.message(), HasSubstr("out of range"));
      }
    }
    // Rows for an empty table: every index is out of range.
    ExpectBothFail("IndexedRowsConcat", {Random(dtype, Shape({0, 2})), IndexedRowsOf(dtype, 1, 2, 1, 3)});
    ExpectSame("IndexedRowsConcat", {P, good, good});  // the error word was cleared
    ExpectBothFail("IndexedRowsConcat", {P, Random(dtype, Shape({2, 4}))});  // width
    ExpectBothFail("IndexedRowsConcat", {P, Random(dtype, Shape({3}))});     // rank
    ExpectBothFail("IndexedRowsConcat", {P, good, Random(dtype == DType::kFloat32 ? DType::kFloat64 : DType::kFloat32,
                                                         Shape({1, 3}))});  // dtype
    ExpectBothFail("IndexedRowsConcat", {Tensor::Scalar<double>(1), good});  // scalar table
  }
  ExpectBothFail("IndexedRowsConcat", {I64({1, 2}, Shape({2}))});  // int table
  ExpectBothFail("IndexedRowsConcat", {});                          // arity
}

TEST(CudaRowKernels, IndexedRowsSumMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    for (const Shape& table : {Shape({6, 3}), Shape({6, 2, 2}), Shape({9}), Shape({5, 0}), Shape({0, 4}),
                               Shape({300, 65})}) {
      SCOPED_TRACE(table.DebugString());
      const int64_t R = table.dim(0), D = RowSize(table);
      Tensor P = Random(dtype, table);
      for (int64_t m : {int64_t{0}, int64_t{1}, R, 3 * R + 1}) {
        if (R == 0 && m > 0) continue;
        ExpectSame("IndexedRowsSum", {IndexedRowsOf(dtype, m, D, R, static_cast<uint32_t>(m) + 1), P}, 1, Tol(dtype));
      }
    }
    // Heavy contention.
    ExpectSame("IndexedRowsSum", {IndexedRowsOf(dtype, 5000, 32, 2, 9), Random(dtype, Shape({2, 4, 8}))}, 1,
               dtype == DType::kFloat32 ? 1e-3 : 1e-10);
    // The dense sum of IndexedRows is GatherGrad's.
    Tensor P = Random(dtype, Shape({7, 3}));
    Tensor idx = I64({6, 0, 6, 2, 6}, Shape({5}));
    Tensor dy = Random(dtype, Shape({5, 3}), -1, 1, 4);
    EXPECT_TRUE(kernel_test::TensorNear(Gpu1("IndexedRowsSum", {Gpu1("IndexedRows", {P, idx, dy}), P}),
                                        Cpu1("GatherGrad", {P, idx, dy}), Tol(dtype)));
  }
}

TEST(CudaRowKernels, IndexedRowsSumErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor P = Random(DType::kFloat64, Shape({4, 2}));
  for (int64_t bad_index : {int64_t{-3}, int64_t{4}}) {
    Tensor rows = IndexedRowsOf(DType::kFloat64, 5, 2, 4, 1);
    SetIndex(rows, 2, bad_index);
    absl::Status s = BothFail("IndexedRowsSum", {rows, P});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("out of range"));
  }
  // D = 0: no values to add, the index is still checked.
  Tensor narrow = IndexedRowsOf(DType::kFloat32, 2, 0, 3, 2);
  SetIndex(narrow, 1, 3);
  ExpectBothFail("IndexedRowsSum", {narrow, Random(DType::kFloat32, Shape({3, 0}))});
  ExpectBothFail("IndexedRowsSum", {IndexedRowsOf(DType::kFloat64, 1, 2, 1, 3), Random(DType::kFloat64, Shape({0, 2}))});
  ExpectSame("IndexedRowsSum", {IndexedRowsOf(DType::kFloat64, 3, 2, 4, 4), P}, 1, 1e-12);  // cleared
  ExpectBothFail("IndexedRowsSum", {IndexedRowsOf(DType::kFloat32, 3, 2, 4, 4), P});     // dtype mismatch
  ExpectBothFail("IndexedRowsSum", {Random(DType::kFloat64, Shape({3, 2})), P});         // width
  ExpectBothFail("IndexedRowsSum", {Random(DType::kFloat64, Shape({3})), P});            // rank
  ExpectBothFail("IndexedRowsSum", {IndexedRowsOf(DType::kFloat64, 3, 0, 1, 4), Tensor::Scalar<double>(1)});
  ExpectBothFail("IndexedRowsSum", {P});                                                 // arity
}

TEST(CudaRowKernels, IndexedRowsSplitMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    for (const Shape& table : {Shape({6, 3}), Shape({6, 2, 2}), Shape({9}), Shape({5, 0}), Shape({200, 77})}) {
      SCOPED_TRACE(table.DebugString());
      const int64_t R = table.dim(0), D = RowSize(table);
      for (int64_t m : {int64_t{0}, int64_t{1}, R + 3, 4 * R}) {
        // Both outputs are device tensors (RunGpuOp checks), copied bit for bit.
        ExpectSame("IndexedRowsSplit", {IndexedRowsOf(dtype, m, D, R, static_cast<uint32_t>(m) + 2), Random(dtype, table)},
                   2);
      }
    }
  }
  Tensor P = Random(DType::kFloat32, Shape({4, 2}));
  Tensor rows = IndexedRowsOf(DType::kFloat32, 3, 2, 4, 1);
  ExpectBothFail("IndexedRowsSplit", {rows, P}, {}, 1);  // one output
  ExpectBothFail("IndexedRowsSplit", {rows, P}, {}, 3);
  SetIndex(rows, 0, 4);
  absl::Status s = BothFail("IndexedRowsSplit", {rows, P}, {}, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("out of range"));
  ExpectBothFail("IndexedRowsSplit", {Random(DType::kFloat64, Shape({3, 3})), P}, {}, 2);  // dtype mismatch
  ExpectBothFail("IndexedRowsSplit", {Random(DType::kFloat32, Shape({3, 4})), P}, {}, 2);  // width
  ExpectBothFail("IndexedRowsSplit", {rows}, {}, 2);                                       // arity
}

// Rows [x | g] for a weight of shape [K, N].
Tensor OuterRows(DType dtype, int64_t r, int64_t K, int64_t N, uint32_t seed) {
  return Random(dtype, Shape({r, K + N}), -1, 1, seed);
}

TEST(CudaRowKernels, OuterRowsConcatMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  const int64_t shapes[][2] = {{7, 4}, {4, 7}, {5, 5}, {1, 1}, {300, 150}, {33, 190}};
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const auto& kn : shapes) {
      const int64_t K = kn[0], N = kn[1], cap = std::min(K, N);
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " K=", K, " N=", N));
      Tensor w = Random(dtype, Shape({K, N}));
      Tensor empty = OuterRows(dtype, 0, K, N, 1);
      ExpectSame("OuterRowsConcat", {w});  // the empty sum
      ExpectSame("OuterRowsConcat", {w, empty, empty});
      for (int64_t r0 : {int64_t{0}, int64_t{1}, cap - 1, cap, 2 * cap + 1}) {
        if (r0 < 0) continue;
        SCOPED_TRACE(absl::StrCat("rows=", r0 + 1));
        const std::vector<Tensor> in = {w, OuterRows(dtype, r0, K, N, 2), empty, OuterRows(dtype, 1, K, N, 3)};
        // Kept (bit for bit) or compacted the same way as on the CPU.
        ExpectSame("OuterRowsConcat", in, 1, r0 + 1 <= cap ? 0 : Tol(dtype));
        ExpectSame("OuterRowsConcat", {w, in[1]}, 1, r0 <= cap ? 0 : Tol(dtype));  // one input
        Tensor rows = Gpu1("OuterRowsConcat", in);
        ASSERT_TRUE(rows.valid());
        EXPECT_TRUE(kernel_test::TensorNear(Cpu1("OuterRowsSum", {rows, w}),
                                            Cpu1("OuterRowsSum", {Cpu1("OuterRowsConcat", in), w}), Tol(dtype)));
      }
      // More inputs than one launch takes (8), kept and compacted.
      std::vector<Tensor> many = {w};
      for (uint32_t i = 0; i < 11; ++i) many.push_back(OuterRows(dtype, i < 10 ? 0 : std::min<int64_t>(cap, 1), K, N, i));
      ExpectSame("OuterRowsConcat", many);
      many.clear();
      many.push_back(w);
      for (uint32_t i = 0; i < 11; ++i) many.push_back(OuterRows(dtype, i % 3, K, N, 20 + i));  // 10 rows
      ExpectSame("OuterRowsConcat", many, 1, 10 <= cap ? 0 : Tol(dtype));
    }
    // A weight with an empty dim: min(K, N) = 0, so any rows compact to none.
    for (const Shape& s : {Shape({0, 3}), Shape({4, 0}), Shape({0, 0})}) {
      Tensor w = Random(dtype, s);
      const int64_t width = s.dim(0) + s.dim(1);
      ExpectSame("OuterRowsConcat", {w, Random(dtype, Shape({2, width}))});
      ExpectSame("OuterRowsConcat", {w, Random(dtype, Shape({2, width})), Random(dtype, Shape({1, width}))});
    }
  }
}

TEST(CudaRowKernels, OuterRowsSumMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  const int64_t shapes[][3] = {{7, 4, 3}, {4, 7, 9}, {1, 1, 1}, {300, 150, 64}, {33, 190, 1}, {5, 6, 0},
                               {0, 6, 3},  {5, 0, 3}, {0, 0, 2}};
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const auto& knm : shapes) {
      const int64_t K = knm[0], N = knm[1], m = knm[2];
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " K=", K, " N=", N, " m=", m));
      ExpectSame("OuterRowsSum", {OuterRows(dtype, m, K, N, 5), Random(dtype, Shape({K, N}))}, 1, Tol(dtype));
    }
  }
}

TEST(CudaRowKernels, OuterRowsErrorsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor w = Random(DType::kFloat32, Shape({2, 3}));
  Tensor rows = OuterRows(DType::kFloat32, 2, 2, 3, 1);
  ExpectBothFail("OuterRowsConcat", {w, Random(DType::kFloat32, Shape({1, 4}))});  // width
  ExpectBothFail("OuterRowsConcat", {w, Random(DType::kFloat32, Shape({5}))});     // rank
  ExpectBothFail("OuterRowsConcat", {w, rows, Random(DType::kFloat64, Shape({1, 5}))});  // dtype
  ExpectBothFail("OuterRowsConcat", {Random(DType::kFloat32, Shape({6})), rows});  // rank-1 weight
  ExpectBothFail("OuterRowsConcat", {I64({1, 2}, Shape({1, 2}))});                 // int weight
  ExpectBothFail("OuterRowsConcat", {});                                           // arity
  ExpectBothFail("OuterRowsSum", {rows, Random(DType::kFloat32, Shape({2}))});     // rank-1 weight
  ExpectBothFail("OuterRowsSum", {OuterRows(DType::kFloat64, 1, 2, 3, 2), w});     // dtype
  ExpectBothFail("OuterRowsSum", {Random(DType::kFloat32, Shape({2, 4})), w});     // width
  ExpectBothFail("OuterRowsSum", {rows});                                          // arity
}

// The table or weight gives only its shape and may stay on the host; rows
// and dy must be on the device (FailedPrecondition naming the missing
// CopyToDevice).
TEST(CudaRowKernels, ShapeOnlyInputsMayBeHostTensors) {
  TDF_SKIP_WITHOUT_GPU();
  Tensor P = Random(DType::kFloat32, Shape({4, 2}));
  Tensor rows = IndexedRowsOf(DType::kFloat32, 3, 2, 4, 1);
  Tensor idx = I64({1, 3}, Shape({2}));
  Tensor dy = Random(DType::kFloat32, Shape({2, 2}));
  EXPECT_TRUE(RunGpuMixed("IndexedRows", {P, idx, dy}, {false, true, true}).ok());
  EXPECT_TRUE(RunGpuMixed("IndexedRows", {P, idx, dy}, {false, false, true}).ok());
  absl::Status s = RunGpuMixed("IndexedRows", {P, idx, dy}, {true, true, false}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("CopyToDevice"));
  EXPECT_TRUE(RunGpuMixed("IndexedRowsConcat", {P, rows, rows}, {false, true, true}).ok());
  EXPECT_EQ(RunGpuMixed("IndexedRowsConcat", {P, rows, rows}, {true, true, false}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(RunGpuMixed("IndexedRowsSum", {rows, P}, {true, false}).ok());
  EXPECT_EQ(RunGpuMixed("IndexedRowsSum", {rows, P}, {false, true}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(RunGpuMixed("IndexedRowsSplit", {rows, P}, {true, false}, {}, 2).ok());
  EXPECT_EQ(RunGpuMixed("IndexedRowsSplit", {rows, P}, {false, true}, {}, 2).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Tensor w = Random(DType::kFloat64, Shape({2, 3}));
  Tensor orows = OuterRows(DType::kFloat64, 4, 2, 3, 2);
  EXPECT_TRUE(RunGpuMixed("OuterRowsConcat", {w, orows, orows}, {false, true, true}).ok());
  EXPECT_EQ(RunGpuMixed("OuterRowsConcat", {w, orows}, {true, false}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(RunGpuMixed("OuterRowsSum", {orows, w}, {true, false}).ok());
  EXPECT_EQ(RunGpuMixed("OuterRowsSum", {orows, w}, {false, true}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ---------------------------------------------------------------------------
// A recursive network whose weight W passes down the recursion unchanged and
// is MatMul's right operand (outer-product rows), and whose leaves read a
// table E by Gather (indexed rows), over a complete binary tree:
//
//   h(i) = i < kInternal ? tanh([h(2i+1), h(2i+2)] · W + bias)   [1, 2H]·[2H, H]
//                        : E[(i - kInternal) mod kTableRows]      (a leaf)
//
// 15 internal nodes: a subtree's W rows exceed min(2H, H) = H, and its E
// rows (16 leaves) the table's kTableRows, so both compactions run.

constexpr int64_t kH = 4;
constexpr int64_t kInternal = 15;
constexpr int64_t kTableRows = 5;

void DefineTree(GraphBuilder& b, DType dtype) {
  absl::Status s = b.DefineFunction(
      {"tree", {{"i", DType::kInt64}, {"w", dtype}, {"bias", dtype}, {"e", dtype}}, {{"h", dtype}}},
      [&](GraphBuilder& f, const std::vector<Output>& args) -> std::vector<Output> {
        Output i = args[0], w = args[1], bias = args[2], e = args[3];
        return f.Cond(
            f.Less(i, f.Const<int64_t>(kInternal)),
            [&] {
              Output two = f.Const<int64_t>(2);
              Output left = f.Call("tree", {f.Add(f.Mul(i, two), f.Const<int64_t>(1)), w, bias, e})[0];
              Output right = f.Call("tree", {f.Add(f.Mul(i, two), two), w, bias, e})[0];
              return std::vector<Output>{f.Tanh(f.Add(f.MatMul(f.Concat({left, right}, 1), w), bias))};
            },
            [&] {
              Output k = f.Mod(f.Sub(i, f.Const<int64_t>(kInternal)), f.Const<int64_t>(kTableRows));
              return std::vector<Output>{f.Reshape(f.Gather(e, k), {1, kH})};
            });
      });
  EXPECT_TRUE(s.ok()) << s;
}

std::vector<std::string> NameGradients(Graph& g, const std::vector<std::string>& grads) {
  std::vector<std::string> names;
  for (size_t k = 0; k < grads.size(); ++k) {
    NodeDef id;
    id.name = absl::StrCat("grad_", k);
    id.op = "Identity";
    id.input = {grads[k]};
    g.node.push_back(std::move(id));
    names.push_back(absl::StrCat("grad_", k));
  }
  return names;
}

// loss = sum(h(root)^2), and its gradients grad_0..2 by w, bias, e.
Graph RecursiveGradientGraph(DType dtype) {
  GraphBuilder b;
  DefineTree(b, dtype);
  Output root = b.Placeholder("root", DType::kInt64);
  Output w = b.Placeholder("w", dtype);
  Output bias = b.Placeholder("bias", dtype);
  Output e = b.Placeholder("e", dtype);
  Output h = b.Call("tree", {root, w, bias, e})[0];
  b.Identity(b.Sum(b.Mul(h, h)), "loss");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph{};
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(*g, {"loss"}, {"w", "bias", "e"});
  EXPECT_TRUE(grads.ok()) << grads.status();
  if (grads.ok()) NameGradients(*g, *grads);
  return *g;
}

Tensor Values(DType dtype, const Shape& shape, uint32_t seed) { return Random(dtype, shape, -0.6, 0.6, seed); }

std::vector<std::pair<std::string, Tensor>> TreeFeeds(DType dtype, int64_t root) {
  return {{"w", Values(dtype, Shape({2 * kH, kH}), 1)},
          {"bias", Values(dtype, Shape({1, kH}), 2)},
          {"e", Values(dtype, Shape({kTableRows, kH}), 3)},
          {"root", Tensor::Scalar<int64_t>(root)}};
}

// The CopyToHost nodes of the recursive functions' bodies ("tree/...",
// "tree_ext/..." once staticized) that copy a device value to the host: a
// value made by a GPU node or a CopyToDevice, directly or through control
// flow (Switch, Merge, Call, Return: they only move tokens).
std::vector<std::string> DeviceValuesCopiedHomeInBodies(const Graph& g) {
  std::map<std::string, const NodeDef*> by_name;
  for (const NodeDef& n : g.node) by_name[n.name] = &n;
  auto on_device = [&](const std::string& ref_text) {
    std::vector<std::string> work = {ref_text};
    std::set<std::string> seen;
    while (!work.empty()) {
      absl::StatusOr<InputRef> ref = InputRef::Parse(work.back());
      work.pop_back();
      if (!ref.ok() || ref->is_control || !seen.insert(ref->node).second) continue;
      auto it = by_name.find(ref->node);
      if (it == by_name.end()) continue;
      const NodeDef& p = *it->second;
      if (p.op == "CopyToDevice" || absl::StartsWith(p.device, "cuda")) return true;
      if (p.op == "CopyToHost") continue;
      const OpSchema* schema = OpRegistry::Global()->Find(p.op);
      if (schema == nullptr || schema->kind() == OpKind::kKernel || schema->kind() == OpKind::kVariable) continue;
      const int inputs = schema->kind() == OpKind::kSwitch ? 1 : p.num_data_inputs();  // not a Switch's predicate
      for (int k = 0; k < inputs; ++k) work.push_back(p.input[k]);
    }
    return false;
  };
  std::vector<std::string> found;
  for (const NodeDef& n : g.node) {
    const bool in_body = absl::StartsWith(n.name, "tree/") || absl::StartsWith(n.name, "tree_ext/");
    if (n.op == "CopyToHost" && in_body && on_device(n.input[0])) found.push_back(NodeLabel(n) + " <- " + n.input[0]);
  }
  return found;
}

// Every row op is on the GPU, and inside the recursive function no value
// goes from the device back to the host (a CopyToHost, a synchronization,
// per invocation): only the main graph's consumers copy results home. The
// same graph with the row ops kept on the CPU has such copies (the check
// sees them).
TEST(CudaRowKernels, PlacementKeepsTheRecursiveGradientOnTheGpu) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Graph graph = RecursiveGradientGraph(dtype);
    ASSERT_TRUE(Validate(graph).ok()) << Validate(graph);
    const FunctionDef* ext = graph.library.Find("tree_ext");
    ASSERT_NE(ext, nullptr);
    std::map<std::string, int> ops;
    for (const NodeDef& n : ext->node) ++ops[n.op];
    EXPECT_GT(ops["IndexedRows"], 0);
    EXPECT_GT(ops["IndexedRowsConcat"], 0);
    EXPECT_GT(ops["OuterRowsConcat"], 0);
    for (bool rows_on_cpu : {false, true}) {
      SCOPED_TRACE(rows_on_cpu ? "row ops pinned to the CPU" : "auto-placed");
      // As the session does in static mode: one graph, then placement.
      absl::StatusOr<Graph> placed = StaticizeRecursion(graph);
      ASSERT_TRUE(placed.ok()) << placed.status();
      if (rows_on_cpu) {
        for (NodeDef& n : placed->node)
          for (const char* op : kRowOps)
            if (n.op == op) n.device = "cpu";
      }
      PlacementOptions opts;
      opts.place_tensor_ops_on_gpu = true;
      opts.device_count_override = 1;
      ASSERT_TRUE(PlaceDevices(*placed, opts).ok());
      ASSERT_TRUE(Validate(*placed).ok()) << Validate(*placed);
      const std::vector<std::string> copies = DeviceValuesCopiedHomeInBodies(*placed);
      if (rows_on_cpu) {
        EXPECT_FALSE(copies.empty());
        continue;
      }
      EXPECT_THAT(copies, ::testing::IsEmpty());
      std::map<std::string, int> gpu_row_ops;
      int body_nodes = 0;
      for (const NodeDef& n : placed->node) {
        body_nodes += absl::StartsWith(n.name, "tree_ext/");
        for (const char* op : kRowOps) {
          if (n.op != op) continue;
          EXPECT_EQ(n.device, "cuda:0") << NodeLabel(n);
          ++gpu_row_ops[op];
        }
      }
      EXPECT_GT(body_nodes, 0);
      EXPECT_GT(gpu_row_ops["IndexedRows"], 0);
      EXPECT_GT(gpu_row_ops["IndexedRowsConcat"], 0);
      EXPECT_GT(gpu_row_ops["IndexedRowsSum"], 0);
      EXPECT_GT(gpu_row_ops["OuterRowsConcat"], 0);
      EXPECT_GT(gpu_row_ops["OuterRowsSum"], 0);
    }
  }
}

absl::StatusOr<std::vector<Tensor>> RunTreeGradients(const Graph& graph, DType dtype, int64_t root, bool gpu) {
  SessionOptions options;
  options.place_tensor_ops_on_gpu = gpu;
  options.fallback_to_cpu = false;
  options.num_workers = 2;
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(graph, options));
  RunStats stats;
  TDF_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                       session->Run(TreeFeeds(dtype, root), {"loss", "grad_0", "grad_1", "grad_2"}, {}, &stats));
  EXPECT_EQ(stats.live_frames_after_run, 0);
  for (Tensor& t : out) {
    TDF_ASSIGN_OR_RETURN(t, gpu_test::ToHost(t));
  }
  return out;
}

TEST(CudaRowKernels, RecursiveGradientOnTheGpuMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat64, DType::kFloat32}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Graph graph = RecursiveGradientGraph(dtype);
    for (int64_t root : {0, 1, 3, 7, 20}) {  // 20: a leaf (empty W rows)
      SCOPED_TRACE(root);
      absl::StatusOr<std::vector<Tensor>> cpu = RunTreeGradients(graph, dtype, root, false);
      absl::StatusOr<std::vector<Tensor>> gpu = RunTreeGradients(graph, dtype, root, true);
      ASSERT_TRUE(cpu.ok()) << "cpu: " << cpu.status();
      ASSERT_TRUE(gpu.ok()) << "gpu: " << gpu.status();
      ASSERT_EQ(cpu->size(), 4u);
      ASSERT_EQ(gpu->size(), 4u);
      for (size_t k = 0; k < 4; ++k)
        EXPECT_TRUE(kernel_test::TensorNear((*gpu)[k], (*cpu)[k], Tol(dtype))) << "output " << k;
      // The table's gradient is not trivially zero.
      double norm = 0;
      for (int64_t j = 0; j < (*cpu)[3].num_elements(); ++j)
        norm += std::abs(dtype == DType::kFloat64 ? (*cpu)[3].data<double>()[j] : (*cpu)[3].data<float>()[j]);
      EXPECT_GT(norm, 0);
    }
  }
}

// One SGD step on variables: the table's update is sparse (IndexedRowsSplit
// -> ScatterAdd), the weight's dense; the variables agree with the CPU's.
TEST(CudaRowKernels, SgdStepThroughTheRecursionOnTheGpuMatchesTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  const DType dtype = DType::kFloat64;
  GraphBuilder b;
  DefineTree(b, dtype);
  Output w = b.Read(b.Variable("W", Values(dtype, Shape({2 * kH, kH}), 1)));
  Output bias = b.Read(b.Variable("B", Values(dtype, Shape({1, kH}), 2)));
  Output e = b.Read(b.Variable("E", Values(dtype, Shape({kTableRows, kH}), 3)));
  Output h = b.Call("tree", {b.Placeholder("root", DType::kInt64), w, bias, e})[0];
  b.Identity(b.Sum(b.Mul(h, h)), "loss");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(*g, {"loss"}, {b.Name(w), b.Name(bias), b.Name(e)});
  ASSERT_TRUE(grads.ok()) << grads.status();
  absl::StatusOr<std::string> step = AddSgdStep(*g, {"W", "B", "E"}, *grads, 0.1);
  ASSERT_TRUE(step.ok()) << step.status();
  int splits = 0;
  for (const NodeDef& n : g->node) splits += n.op == "IndexedRowsSplit";
  EXPECT_EQ(splits, 1);
  std::vector<std::vector<Tensor>> results;
  for (bool gpu : {false, true}) {
    SessionOptions options;
    options.place_tensor_ops_on_gpu = gpu;
    options.fallback_to_cpu = false;
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*g, options);
    ASSERT_TRUE(session.ok()) << session.status();
    absl::Status run = (*session)->Run({{"root", Tensor::Scalar<int64_t>(0)}}, {"loss"}, {*step}).status();
    ASSERT_TRUE(run.ok()) << (gpu ? "gpu: " : "cpu: ") << run;
    std::vector<Tensor> values;
    for (const char* name : {"W", "B", "E"}) {
      absl::StatusOr<Tensor> v = (*session)->ReadVariable(name);
      ASSERT_TRUE(v.ok()) << v.status();
      absl::StatusOr<Tensor> host = gpu_test::ToHost(*v);
      ASSERT_TRUE(host.ok()) << host.status();
      values.push_back(*host);
    }
    results.push_back(values);
  }
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(kernel_test::TensorNear(results[1][k], results[0][k], 1e-10)) << k;
}

}  // namespace
}  // namespace tdf
