// MatMul: the product of two rank-2 float tensors, optionally transposing
// either operand (attrs transpose_a / transpose_b, parsed once). Tensors are
// row-major, so they are viewed as row-major Eigen maps; Eigen picks a
// blocked, vectorized GEMM.
#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

class MatMulKernel final : public OpKernel {
 public:
  MatMulKernel(bool transpose_a, bool transpose_b) : transpose_a_(transpose_a), transpose_b_(transpose_b) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return std::unique_ptr<OpKernel>(
        std::make_unique<MatMulKernel>(node.GetBoolOr("transpose_a", false), node.GetBoolOr("transpose_b", false)));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 2));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype()) return kernels::DTypeMismatchError(a.dtype(), b.dtype());
    if (!IsFloating(a.dtype())) return kernels::UnsupportedDTypeError("MatMul", a.dtype());
    if (a.rank() != 2 || b.rank() != 2)
      return absl::InvalidArgumentError(absl::StrCat("MatMul needs rank-2 operands, got ", a.shape().DebugString(),
                                                     " and ", b.shape().DebugString()));
    const int64_t m = a.shape().dim(transpose_a_ ? 1 : 0);
    const int64_t k = a.shape().dim(transpose_a_ ? 0 : 1);
    const int64_t kb = b.shape().dim(transpose_b_ ? 1 : 0);
    const int64_t n = b.shape().dim(transpose_b_ ? 0 : 1);
    if (k != kb)
      return absl::InvalidArgumentError(absl::StrCat(
          "MatMul inner dimensions differ: ", a.shape().DebugString(), transpose_a_ ? " (transposed)" : "", " x ",
          b.shape().DebugString(), transpose_b_ ? " (transposed)" : "", ": ", k, " vs ", kb));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(a.dtype(), Shape({m, n})));
    if (a.dtype() == DType::kFloat32) {
      Multiply<float>(a, b, out);
    } else {
      Multiply<double>(a, b, out);
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  template <typename T>
  void Multiply(const Tensor& a, const Tensor& b, Tensor& out) const {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Mat> ma(a.data<T>(), a.shape().dim(0), a.shape().dim(1));
    Eigen::Map<const Mat> mb(b.data<T>(), b.shape().dim(0), b.shape().dim(1));
    Eigen::Map<Mat> mo(out.mutable_data<T>(), out.shape().dim(0), out.shape().dim(1));
    if (mo.size() == 0) return;
    const int64_t depth = transpose_a_ ? ma.rows() : ma.cols();
    if (depth == 0) {
      mo.setZero();  // k == 0: an empty sum.
      return;
    }
    if (depth == 1) {
      // An outer product (e.g. a weight gradient x^T dy of one example):
      // written row by row, without GEMM's zero fill and packing.
      // With k == 1 both operands are contiguous vectors, transposed or not.
      Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> col(a.data<T>(), mo.rows());
      Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>> row(b.data<T>(), mo.cols());
      mo.noalias() = col * row;
      return;
    }
    if (!transpose_a_ && !transpose_b_) {
      mo.noalias() = ma * mb;
    } else if (transpose_a_ && !transpose_b_) {
      mo.noalias() = ma.transpose() * mb;
    } else if (!transpose_a_ && transpose_b_) {
      mo.noalias() = ma * mb.transpose();
    } else {
      mo.noalias() = ma.transpose() * mb.transpose();
    }
  }

  const bool transpose_a_;
  const bool transpose_b_;
};

}  // namespace

void RegisterMatMulKernels(KernelRegistry& r) { kernels::RegisterCpu<MatMulKernel>(r, "MatMul"); }

}  // namespace tdf
