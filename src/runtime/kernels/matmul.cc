// MatMul: the product of two rank-2 float tensors, optionally transposing
// either operand (attrs transpose_a / transpose_b, parsed once), and
// MatMulAdd, the product plus addends. Tensors are row-major, so they are
// viewed as row-major Eigen maps; Eigen picks a blocked, vectorized GEMM.
// Large products are split among the run's idle workers (kernels::ParallelFor).
#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

struct Dims3 {
  int64_t m, k, n;
};

// Checks a and b of MatMul(a, b) (dtypes, ranks, inner dims) and returns the
// product's m x n and the depth k.
absl::StatusOr<Dims3> CheckOperands(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                                    const char* op) {
  if (a.dtype() != b.dtype()) return kernels::DTypeMismatchError(a.dtype(), b.dtype());
  if (!IsFloating(a.dtype())) return kernels::UnsupportedDTypeError(op, a.dtype());
  if (a.rank() != 2 || b.rank() != 2)
    return absl::InvalidArgumentError(absl::StrCat(op, " needs rank-2 operands, got ", a.shape().DebugString(),
                                                   " and ", b.shape().DebugString()));
  const int64_t m = a.shape().dim(transpose_a ? 1 : 0);
  const int64_t k = a.shape().dim(transpose_a ? 0 : 1);
  const int64_t kb = b.shape().dim(transpose_b ? 1 : 0);
  const int64_t n = b.shape().dim(transpose_b ? 0 : 1);
  if (k != kb)
    return absl::InvalidArgumentError(absl::StrCat(
        op, " inner dimensions differ: ", a.shape().DebugString(), transpose_a ? " (transposed)" : "", " x ",
        b.shape().DebugString(), transpose_b ? " (transposed)" : "", ": ", k, " vs ", kb));
  return Dims3{m, k, n};
}

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
    TDF_ASSIGN_OR_RETURN(Dims3 d, CheckOperands(a, b, transpose_a_, transpose_b_, op));
    const Shape shape({d.m, d.n});
    absl::InlinedVector<const Tensor*, 4> addends;
    for (int i = 2; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != a.dtype())
        return absl::InvalidArgumentError(absl::StrCat("MatMulAdd: addend ", i - 2, " is ", DTypeName(t.dtype()),
                                                       ", the operands are ", DTypeName(a.dtype())));
      if (t.shape() != shape)
        return absl::InvalidArgumentError(absl::StrCat("MatMulAdd: addend ", i - 2, " has shape ",
                                                       t.shape().DebugString(), ", the product has shape ",
                                                       shape.DebugString()));
      if (!kernels::IsSharedZeros(t)) addends.push_back(&t);
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

}  // namespace

void RegisterMatMulKernels(KernelRegistry& r) {
  kernels::RegisterCpu<MatMulKernel>(r, "MatMul");
  kernels::RegisterCpu<MatMulKernel>(r, "MatMulAdd");
}

}  // namespace tdf
