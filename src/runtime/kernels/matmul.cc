// MatMul: the product of two rank-2 float tensors, optionally transposing
// either operand (attrs transpose_a / transpose_b, parsed once), and
// MatMulAdd, the product plus addends. Tensors are row-major, so they are
// viewed as row-major Eigen maps; Eigen picks a blocked, vectorized GEMM.
// Large products are split among the run's idle workers (kernels::ParallelFor).
#include <algorithm>
#include <cstring>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

// out = op(a) · op(b) + the addends (each [m, n]; none for a plain MatMul).
template <typename T>
void MultiplyAdd(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                 absl::Span<const Tensor* const> addends, Tensor& out) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;
  Eigen::Map<const Mat> ma(a.data<T>(), a.shape().dim(0), a.shape().dim(1));
  Eigen::Map<const Mat> mb(b.data<T>(), b.shape().dim(0), b.shape().dim(1));
  Eigen::Map<Mat> mo(out.mutable_data<T>(), out.shape().dim(0), out.shape().dim(1));
  const int64_t rows = mo.rows(), cols = mo.cols();
  if (mo.size() == 0) return;
  auto addend = [&](size_t i) { return Eigen::Map<const Mat>(addends[i]->data<T>(), rows, cols); };
  const int64_t depth = transpose_a ? ma.rows() : ma.cols();
  if (depth == 1) {
    // An outer product (e.g. a weight gradient x^T dy of one example):
    // written row by row, the addends' rows added in the same pass, without
    // GEMM's zero fill and packing. With k == 1 both operands are contiguous
    // vectors, transposed or not.
    const T* col = a.data<T>();
    Eigen::Map<const Row> row(b.data<T>(), cols);
    for (int64_t i = 0; i < rows; ++i) {
      auto o = mo.row(i);
      switch (addends.size()) {
        case 0: o.noalias() = col[i] * row; break;
        case 1: o.noalias() = addend(0).row(i) + col[i] * row; break;
        default:
          o.noalias() = addend(0).row(i) + addend(1).row(i) + col[i] * row;
          for (size_t t = 2; t < addends.size(); ++t) o += addend(t).row(i);
      }
    }
    return;
  }
  // GEMM, split over blocks of the result's rows (or columns, for a short
  // wide result) when the product is large enough to share among workers.
  const bool by_rows = rows >= 8 || rows >= cols;
  const double cost = static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(depth);
  kernels::ParallelFor(by_rows ? rows : cols, cost, [&](int64_t begin, int64_t end) {
    const int64_t len = end - begin;
    auto part = [&](auto&& m) { return by_rows ? m.block(begin, 0, len, cols) : m.block(0, begin, rows, len); };
    auto o = part(mo);
    if (addends.empty()) {
      o.setZero();  // GEMM accumulates; k == 0 is an empty sum
    } else {
      o = part(addend(0));
      for (size_t t = 1; t < addends.size(); ++t) o += part(addend(t));
    }
    if (depth == 0) return;
    // op(a) contributes the rows of a row block, op(b) the columns of a column block.
    if (by_rows) {
      if (!transpose_a && !transpose_b) {
        o.noalias() += ma.middleRows(begin, len) * mb;
      } else if (transpose_a && !transpose_b) {
        o.noalias() += ma.middleCols(begin, len).transpose() * mb;
      } else if (!transpose_a && transpose_b) {
        o.noalias() += ma.middleRows(begin, len) * mb.transpose();
      } else {
        o.noalias() += ma.middleCols(begin, len).transpose() * mb.transpose();
      }
    } else {
      if (!transpose_a && !transpose_b) {
        o.noalias() += ma * mb.middleCols(begin, len);
      } else if (transpose_a && !transpose_b) {
        o.noalias() += ma.transpose() * mb.middleCols(begin, len);
      } else if (!transpose_a && transpose_b) {
        o.noalias() += ma * mb.middleRows(begin, len).transpose();
      } else {
        o.noalias() += ma.transpose() * mb.middleRows(begin, len).transpose();
      }
    }
  });
}

// MatMul(a, b), and MatMulAdd(a, b, addends...) = MatMul(a, b) + sum of the
// addends, which the autodiff emits for a gradient that sums a MatMul with
// other terms (a weight's gradient summed over recursive calls): one pass
// over the result instead of a product tensor and then AddN. Addends that
// are shared zeros (kernels::Zeros) are skipped.
class MatMulKernel final : public OpKernel {
 public:
  MatMulKernel(bool transpose_a, bool transpose_b, bool with_addends)
      : transpose_a_(transpose_a), transpose_b_(transpose_b), with_addends_(with_addends) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return std::unique_ptr<OpKernel>(std::make_unique<MatMulKernel>(
        node.GetBoolOr("transpose_a", false), node.GetBoolOr("transpose_b", false), node.op == "MatMulAdd"));
  }

  absl::Status Compute(KernelContext& ctx) override {
    const char* op = with_addends_ ? "MatMulAdd" : "MatMul";
    if (with_addends_) {
      if (ctx.num_inputs() < 2) return kernels::MinArityError(2, ctx.num_inputs());
      TDF_RETURN_IF_ERROR(kernels::CheckCpuInputs(ctx));
    } else {
      TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 2));
    }
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    TDF_ASSIGN_OR_RETURN(const kernels::MatMulGeometry d, kernels::CheckMatMul(a, b, transpose_a_, transpose_b_, op));
    const Shape shape({d.m, d.n});
    TDF_RETURN_IF_ERROR(kernels::CheckMatMulAddends(ctx, a.dtype(), shape));
    absl::InlinedVector<const Tensor*, 4> addends;
    for (int i = 2; i < ctx.num_inputs(); ++i) {
      if (!kernels::IsSharedZeros(ctx.input(i))) addends.push_back(&ctx.input(i));
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(a.dtype(), shape));
    if (a.dtype() == DType::kFloat32) {
      MultiplyAdd<float>(a, b, transpose_a_, transpose_b_, addends, out);
    } else {
      MultiplyAdd<double>(a, b, transpose_a_, transpose_b_, addends, out);
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const bool transpose_a_;
  const bool transpose_b_;
  const bool with_addends_;
};

// ---- Outer-product rows ----
// A sum of outer products sum_i x_i^T g_i (x_i [r_i, K], g_i [r_i, N]), the
// gradient of a weight W [K, N] that every invocation of a recursive function
// multiplies by (autodiff.cc), kept as the rows [x_i | g_i] of one
// [m, K + N] tensor: summing two such sums is concatenating rows, instead of
// a pass over a dense [K, N] per invocation. A sum of more than min(K, N)
// rows is compacted to min(K, N) rows (the dense sum's columns, or rows,
// against unit vectors), so its size stays bounded however deep the
// recursion goes.

// The weight [K, N] and rows [m, K + N] are checked by
// kernels::CheckOuterRowsWeight and kernels::CheckOuterRows (kernel_util.h),
// which the CUDA kernels (src/cuda/row_kernels.cu) share.

// dense [K, N] = sum over the pieces' rows of x^T g (dense overwritten).
template <typename T>
void AccumulateOuterRows(absl::Span<const Tensor* const> pieces, int64_t K, int64_t N, T* dense) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Mat> d(dense, K, N);
  d.setZero();
  int64_t m = 0;
  for (const Tensor* p : pieces) m += p->shape().dim(0);
  if (m == 0 || K == 0 || N == 0) return;
  // Split over blocks of the result's rows (K) when large enough to share.
  const double cost = static_cast<double>(K) * static_cast<double>(N) * static_cast<double>(m);
  kernels::ParallelFor(K, cost, [&](int64_t begin, int64_t end) {
    for (const Tensor* p : pieces) {
      const int64_t r = p->shape().dim(0);
      if (r == 0) continue;
      Eigen::Map<const Mat> rows(p->data<T>(), r, K + N);
      d.middleRows(begin, end - begin).noalias() +=
          rows.middleCols(begin, end - begin).transpose() * rows.rightCols(N);
    }
  });
}

// OuterRowsConcat(like [K, N], rows_0, ..., rows_{n-1}): the rows of all
// inputs (a sum of their sums), compacted when more than min(K, N). With no
// rows inputs: the empty sum, [0, K + N].
class OuterRowsConcatKernel final : public OpKernel {
 public:
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return kernels::CreateSimple<OuterRowsConcatKernel>(node);
  }

  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) return kernels::MinArityError(1, n);
    TDF_RETURN_IF_ERROR(kernels::CheckCpuInputs(ctx));
    const Tensor& like = ctx.input(0);
    TDF_ASSIGN_OR_RETURN(const kernels::OuterRowsConcatGeometry g, kernels::CheckOuterRowsConcat(ctx));
    const auto& pieces = g.pieces;
    const int64_t m = g.m, K = g.K, N = g.N, cap = g.cap;
    if (pieces.size() == 1 && m <= cap) {
      ctx.set_output(0, *pieces[0]);  // one non-empty sum: shared, not copied
      return absl::OkStatus();
    }
    const int64_t out_rows = m <= cap ? m : cap;
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), Shape({out_rows, K + N})));
    if (m <= cap) {
      char* dst = static_cast<char*>(out.raw_mutable_data());
      for (const Tensor* p : pieces) {
        const size_t bytes = static_cast<size_t>(p->num_elements()) * DTypeSize(p->dtype());
        std::memcpy(dst, p->raw_data(), bytes);
        dst += bytes;
      }
    } else if (like.dtype() == DType::kFloat32) {
      Compact<float>(pieces, K, N, out);
    } else {
      Compact<double>(pieces, K, N, out);
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  // The dense sum D [K, N] as min(K, N) rows: [D[:, j] | e_j] per column j
  // when N <= K, else [e_i | D[i, :]] per row i.
  template <typename T>
  static void Compact(absl::Span<const Tensor* const> pieces, int64_t K, int64_t N, Tensor& out) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Mat dense(K, N);
    AccumulateOuterRows<T>(pieces, K, N, dense.data());
    Eigen::Map<Mat> o(out.mutable_data<T>(), std::min(K, N), K + N);
    if (N <= K) {
      o.leftCols(K) = dense.transpose();
      o.rightCols(N).setIdentity();
    } else {
      o.leftCols(K).setIdentity();
      o.rightCols(N) = dense;
    }
  }
};

// OuterRowsSum(rows [m, K + N], like [K, N]) -> [K, N]: the dense sum.
class OuterRowsSumKernel final : public OpKernel {
 public:
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return kernels::CreateSimple<OuterRowsSumKernel>(node);
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 2));
    const Tensor& rows = ctx.input(0);
    const Tensor& like = ctx.input(1);
    TDF_RETURN_IF_ERROR(kernels::CheckOuterRows(rows, like, "OuterRowsSum"));
    const int64_t K = like.shape().dim(0), N = like.shape().dim(1);
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), like.shape()));
    const Tensor* pieces[] = {&rows};
    if (like.dtype() == DType::kFloat32) {
      AccumulateOuterRows<float>(pieces, K, N, out.mutable_data<float>());
    } else {
      AccumulateOuterRows<double>(pieces, K, N, out.mutable_data<double>());
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterMatMulKernels(KernelRegistry& r) {
  kernels::RegisterCpu<MatMulKernel>(r, "MatMul");
  kernels::RegisterCpu<MatMulKernel>(r, "MatMulAdd");
  kernels::RegisterCpu<OuterRowsConcatKernel>(r, "OuterRowsConcat");
  kernels::RegisterCpu<OuterRowsSumKernel>(r, "OuterRowsSum");
}

}  // namespace tdf
