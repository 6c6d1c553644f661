#include <random>

#include "oneapi/tbb/task_arena.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace tdf {
namespace {

using kernel_test::F32;
using kernel_test::F64;
using kernel_test::I64;
using kernel_test::Run1;
using kernel_test::RunError;
using kernel_test::TensorEq;
using kernel_test::TensorNear;
using kernel_test::Values;
using ::testing::HasSubstr;

std::vector<double> Random(int64_t n, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// Row-major element (i, j) of an r x c matrix, or of its transpose.
double At(const std::vector<double>& m, int64_t cols, bool transposed, int64_t i, int64_t j) {
  return transposed ? m[j * cols + i] : m[i * cols + j];
}

// op(a) · op(b) by the definition, for row-major a (stored [m,k], or [k,m]
// when ta) and b (stored [k,n], or [n,k] when tb).
std::vector<double> NaiveProduct(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k,
                                 int64_t n, bool ta, bool tb) {
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  std::vector<double> want(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) want[i * n + j] += At(a, a_cols, ta, i, p) * At(b, b_cols, tb, p, j);
  return want;
}

TEST(MatMulKernel, MatchesNaiveLoopsWithTransposes) {
  // General shapes, an outer product (k = 1, its own code path), and
  // matrix-vector shapes (m = 1 or n = 1).
  const int64_t dims[][3] = {{7, 5, 9}, {7, 1, 9}, {1, 1, 6}, {6, 1, 1}, {1, 5, 9}, {7, 5, 1}};
  for (const auto& d : dims) {
    const int64_t m = d[0], k = d[1], n = d[2];
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        // Stored shapes: a is [m,k] (or [k,m] when transposed), b is [k,n] (or [n,k]).
        std::vector<double> a = Random(m * k, 1), b = Random(k * n, 2);
        std::vector<double> want = NaiveProduct(a, b, m, k, n, ta, tb);
        Tensor ta_t = F64(a, ta ? Shape({k, m}) : Shape({m, k}));
        Tensor tb_t = F64(b, tb ? Shape({n, k}) : Shape({k, n}));
        Tensor out = Run1("MatMul", {ta_t, tb_t}, {{"transpose_a", ta}, {"transpose_b", tb}});
        EXPECT_TRUE(TensorNear(out, F64(want, {m, n}), 1e-13))
            << "m=" << m << " k=" << k << " n=" << n << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST(MatMulKernel, OuterProductFloat32) {
  // [3,1] x [1,4] and its transposed forms give the same product.
  Tensor col = F32({1, -2, 3}, {3, 1}), row = F32({0.5, 1, -1, 2}, {1, 4});
  Tensor want = F32({0.5, 1, -1, 2, -1, -2, 2, -4, 1.5, 3, -3, 6}, {3, 4});
  EXPECT_TRUE(TensorEq(Run1("MatMul", {col, row}), want));
  EXPECT_TRUE(TensorEq(Run1("MatMul", {F32({1, -2, 3}, {1, 3}), F32({0.5, 1, -1, 2}, {4, 1})},
                            {{"transpose_a", true}, {"transpose_b", true}}),
                       want));
}

TEST(MatMulAddKernel, EqualsMatMulPlusAddends) {
  // Depth 1 (row-by-row path) and general depths, every transpose, 0 to 3
  // addends.
  const int64_t dims[][3] = {{7, 5, 9}, {7, 1, 9}, {1, 4, 6}};
  for (const auto& d : dims) {
    const int64_t m = d[0], k = d[1], n = d[2];
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Tensor a = F64(Random(m * k, 3), ta ? Shape({k, m}) : Shape({m, k}));
        Tensor b = F64(Random(k * n, 4), tb ? Shape({n, k}) : Shape({k, n}));
        AttrMap attrs = {{"transpose_a", ta}, {"transpose_b", tb}};
        std::vector<double> want = Values<double>(Run1("MatMul", {a, b}, attrs));
        std::vector<Tensor> in = {a, b};
        for (int t = 0; t < 4; ++t) {
          if (t > 0) {
            std::vector<double> v = Random(m * n, 10 + t);
            for (int64_t i = 0; i < m * n; ++i) want[i] += v[i];
            in.push_back(F64(v, {m, n}));
          }
          EXPECT_TRUE(TensorNear(Run1("MatMulAdd", in, attrs), F64(want, {m, n}), 1e-13))
              << "m=" << m << " k=" << k << " n=" << n << " ta=" << ta << " tb=" << tb << " addends=" << t;
        }
      }
    }
  }
}

// Products large enough to be split among workers (kernels::ParallelFor):
// by row blocks, and by column blocks for a short wide result, in arenas of
// 1 to 4 workers (uneven blocks with 3), every transpose, with and without
// addends, equal the naive loops.
TEST(MatMulAddKernel, SplitAmongWorkersMatchesNaiveLoops) {
  const int64_t dims[][3] = {{96, 64, 80}, {3, 300, 500}};
  for (int workers : {1, 2, 3, 4}) {
    tbb::task_arena arena(workers);
    for (const auto& d : dims) {
      const int64_t m = d[0], k = d[1], n = d[2];
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          std::vector<double> a = Random(m * k, 5), b = Random(k * n, 6), c = Random(m * n, 7);
          std::vector<double> want = NaiveProduct(a, b, m, k, n, ta, tb);
          Tensor ta_t = F64(a, ta ? Shape({k, m}) : Shape({m, k}));
          Tensor tb_t = F64(b, tb ? Shape({n, k}) : Shape({k, n}));
          AttrMap attrs = {{"transpose_a", ta}, {"transpose_b", tb}};
          Tensor product, sum;
          arena.execute([&] {
            product = Run1("MatMul", {ta_t, tb_t}, attrs);
            sum = Run1("MatMulAdd", {ta_t, tb_t, F64(c, {m, n})}, attrs);
          });
          const std::string where = absl::StrCat("workers=", workers, " m=", m, " k=", k, " n=", n, " ta=", ta,
                                                 " tb=", tb);
          EXPECT_TRUE(TensorNear(product, F64(want, {m, n}), 1e-11)) << where;
          for (int64_t i = 0; i < m * n; ++i) want[i] += c[i];
          EXPECT_TRUE(TensorNear(sum, F64(want, {m, n}), 1e-11)) << where;
        }
      }
    }
  }
}

TEST(MatMulAddKernel, SkipsSharedZerosAndChecksAddends) {
  // A large zero addend (ZerosLike shares the zero mapping) adds nothing.
  Tensor a = F32(std::vector<float>(64, 0.5f), {64, 1});
  Tensor b = F32(std::vector<float>(32, 2.0f), {1, 32});
  Tensor z = Run1("ZerosLike", {F32(std::vector<float>(64 * 32, 3.0f), {64, 32})});
  Tensor c = F32(std::vector<float>(64 * 32, -0.25f), {64, 32});
  EXPECT_TRUE(TensorEq(Run1("MatMulAdd", {a, b, z, c, z}), F32(std::vector<float>(64 * 32, 0.75f), {64, 32})));
  EXPECT_TRUE(TensorEq(Run1("MatMulAdd", {a, b, z}), F32(std::vector<float>(64 * 32, 1.0f), {64, 32})));
  absl::Status shape = RunError("MatMulAdd", {a, b, F32({1, 2}, {1, 2})});
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.message(), HasSubstr("addend 0 has shape [1,2]"));
  EXPECT_EQ(RunError("MatMulAdd", {a, b, F64(std::vector<double>(64 * 32, 1.0), {64, 32})}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("MatMulAdd", {a}).code(), absl::StatusCode::kInvalidArgument);
}

// Rows [x | g] for a weight of shape [K, N]: r rows of K + N values.
Tensor OuterRows(int64_t r, int64_t K, int64_t N, int seed) { return F64(Random(r * (K + N), seed), {r, K + N}); }

// sum over the rows of x^T g, by the definition.
std::vector<double> NaiveOuterSum(const std::vector<Tensor>& pieces, int64_t K, int64_t N) {
  std::vector<double> d(K * N, 0.0);
  for (const Tensor& p : pieces) {
    std::vector<double> v = Values<double>(p);
    for (int64_t r = 0; r < p.shape().dim(0); ++r)
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < N; ++j) d[i * N + j] += v[r * (K + N) + i] * v[r * (K + N) + K + j];
  }
  return d;
}

// OuterRowsConcat keeps rows while there are at most min(K, N), then
// compacts them to min(K, N) rows with the same sum, for tall and wide
// weights; OuterRowsSum forms the dense sum, split among 1 to 3 workers.
TEST(OuterRowsKernels, ConcatCompactsAndSumMatchesNaiveLoops) {
  const int64_t shapes[][2] = {{7, 4}, {4, 7}, {5, 5}, {300, 150}};
  for (int workers : {1, 2, 3}) {
    tbb::task_arena arena(workers);
    for (const auto& kn : shapes) {
      const int64_t K = kn[0], N = kn[1], cap = std::min(K, N);
      Tensor w = F64(Random(K * N, 1), {K, N});
      for (int64_t r0 : {int64_t{0}, int64_t{1}, cap - 1, cap, 2 * cap + 1}) {
        std::vector<Tensor> pieces = {OuterRows(r0, K, N, 2), OuterRows(1, K, N, 3)};
        const std::vector<double> want = NaiveOuterSum(pieces, K, N);
        const std::string where = absl::StrCat("workers=", workers, " K=", K, " N=", N, " rows=", r0 + 1);
        Tensor rows, sum;
        arena.execute([&] {
          rows = Run1("OuterRowsConcat", {w, pieces[0], pieces[1]});
          sum = Run1("OuterRowsSum", {rows, w});
        });
        EXPECT_EQ(rows.shape(), Shape({std::min(r0 + 1, cap), K + N})) << where;
        if (r0 + 1 <= cap) {  // kept as they were, in order
          std::vector<double> joined = Values<double>(pieces[0]), last = Values<double>(pieces[1]);
          joined.insert(joined.end(), last.begin(), last.end());
          EXPECT_TRUE(TensorEq(rows, F64(joined, {r0 + 1, K + N}))) << where;
        }
        EXPECT_TRUE(TensorNear(sum, F64(want, {K, N}), 1e-11)) << where;
      }
    }
  }
}

TEST(OuterRowsKernels, EmptySumsSharingAndErrors) {
  Tensor w = F32(std::vector<float>(6, 1.0f), {2, 3});
  // The empty sum: no rows; its dense form is zeros.
  Tensor empty = Run1("OuterRowsConcat", {w});
  EXPECT_EQ(empty.shape(), Shape({0, 5}));
  EXPECT_TRUE(TensorEq(Run1("OuterRowsSum", {empty, w}), F32(std::vector<float>(6, 0.0f), {2, 3})));
  // One non-empty input with empty ones beside it comes out as it is.
  Tensor one = F32({1, 2, 3, 4, 5}, {1, 5});
  EXPECT_TRUE(TensorEq(Run1("OuterRowsConcat", {w, empty, one, empty}), one));
  EXPECT_TRUE(TensorEq(Run1("OuterRowsSum", {one, w}), F32({3, 4, 5, 6, 8, 10}, {2, 3})));
  absl::Status width = RunError("OuterRowsConcat", {w, F32({1, 2, 3, 4}, {1, 4})});
  EXPECT_EQ(width.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(width.message(), HasSubstr("must be [m, 5], got [1,4]"));
  EXPECT_THAT(RunError("OuterRowsSum", {one, F32({1, 2}, {2})}).message(), HasSubstr("rank 2"));
  EXPECT_EQ(RunError("OuterRowsSum", {F64({1, 2, 3, 4, 5}, {1, 5}), w}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("OuterRowsConcat", {I64({1, 2}, {1, 2})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("OuterRowsConcat", {}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MatMulKernel, Float32) {
  Tensor out = Run1("MatMul", {F32({1, 2, 3, 4}, {2, 2}), F32({5, 6, 7, 8}, {2, 2})});
  EXPECT_TRUE(TensorEq(out, F32({19, 22, 43, 50}, {2, 2})));
}

TEST(MatMulKernel, EmptyDims) {
  EXPECT_EQ(Run1("MatMul", {F64({}, {0, 3}), F64({1, 2, 3, 4, 5, 6}, {3, 2})}).shape(), Shape({0, 2}));
  // k == 0: an all-zero [2,2] product.
  EXPECT_TRUE(TensorEq(Run1("MatMul", {F64({}, {2, 0}), F64({}, {0, 2})}), F64({0, 0, 0, 0}, {2, 2})));
}

TEST(MatMulKernel, Errors) {
  absl::Status s = RunError("MatMul", {F64({1, 2, 3, 4, 5, 6}, {2, 3}), F64({1, 2, 3, 4}, {2, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,3]"));
  EXPECT_THAT(s.message(), HasSubstr("[2,2]"));
  EXPECT_THAT(RunError("MatMul", {F64({1, 2}, {2}), F64({1, 2}, {2, 1})}).message(), HasSubstr("rank-2"));
  EXPECT_EQ(RunError("MatMul", {I64({1}, {1, 1}), I64({1}, {1, 1})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("MatMul", {F64({1}, {1, 1}), F32({1}, {1, 1})}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tdf
