// MatMul through cuBLAS. tdf tensors are row-major and cuBLAS is
// column-major; a row-major [r, c] matrix read as column-major is its
// transpose, so C = op(A)·op(B) is computed as C^T = op(B)^T·op(A)^T, which
// cuBLAS sees as a plain column-major product of the same buffers with the
// operands swapped (the "transpose trick": no copies, no transposes).
#include <cublas_v2.h>

#include <algorithm>

#include "cuda/cuda_kernel_util.h"
#include "cuda/small_ops.cuh"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace cuda {
namespace {

class MatMulKernel final : public OpKernel {
 public:
  MatMulKernel(bool transpose_a, bool transpose_b, Device device)
      : transpose_a_(transpose_a), transpose_b_(transpose_b), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node, Device device) {
    return std::unique_ptr<OpKernel>(std::make_unique<MatMulKernel>(
        node.GetBoolOr("transpose_a", false), node.GetBoolOr("transpose_b", false), device));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    // The CPU kernel's checks (kernel_util.h), with its messages and codes.
    TDF_ASSIGN_OR_RETURN(const kernels::MatMulGeometry d,
                         kernels::CheckMatMul(a, b, transpose_a_, transpose_b_, "MatMul"));
    const int64_t m = d.m, k = d.k, n = d.n;
    const int64_t kMaxDim = 0x7fffffff;
    if (m > kMaxDim || n > kMaxDim || k > kMaxDim)
      return absl::UnimplementedError("MatMul on CUDA: a dimension exceeds 2^31-1 (cuBLAS int API)");
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(a.dtype(), Shape({m, n}), device_));
    if (m > 0 && n > 0) {
      if (k == 0) {
        // An empty sum; cuBLAS would not touch C.
        TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_mutable_data(), 0, out.bytes(), launch.stream));
      } else {
        TDF_RETURN_IF_ERROR(GemmInto(launch, a, b, transpose_a_, transpose_b_, /*accumulate=*/false, out));
      }
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const bool transpose_a_;
  const bool transpose_b_;
  const Device device_;
};

}  // namespace

absl::Status GemmInto(const Launch& launch, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                      bool accumulate, Tensor& out) {
  const int64_t m = out.shape().dim(0), n = out.shape().dim(1);
  const int64_t k = a.shape().dim(transpose_a ? 0 : 1);
  if (UseSmallGemm(m, n, k)) {
    // A recursive network node's product: one plain kernel launches faster
    // than cuBLAS (small_ops.cuh).
    if (a.dtype() == DType::kFloat32)
      return LaunchSmallGemm<float>(a.data<float>(), b.data<float>(), out.mutable_data<float>(), m, n, k, transpose_a,
                                    transpose_b, a.shape().dim(1), b.shape().dim(1), accumulate, launch.stream);
    return LaunchSmallGemm<double>(a.data<double>(), b.data<double>(), out.mutable_data<double>(), m, n, k,
                                   transpose_a, transpose_b, a.shape().dim(1), b.shape().dim(1), accumulate,
                                   launch.stream);
  }
  cublasHandle_t handle = launch.device->cublas();
  const CublasFunctions& blas = launch.device->blas();
  TDF_CUBLAS_RETURN_IF_ERROR(blas.set_stream(handle, launch.stream));
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // cuBLAS is column-major: C^T = op(B)^T op(A)^T. Leading dims are the row
  // length of each row-major buffer.
  const int lda = static_cast<int>(std::max<int64_t>(1, a.shape().dim(1)));
  const int ldb = static_cast<int>(std::max<int64_t>(1, b.shape().dim(1)));
  const int ldc = static_cast<int>(n);
  if (a.dtype() == DType::kFloat32) {
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    TDF_CUBLAS_RETURN_IF_ERROR(blas.sgemm(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                          static_cast<int>(k), &one, b.data<float>(), ldb, a.data<float>(), lda, &beta,
                                          out.mutable_data<float>(), ldc));
  } else {
    const double one = 1.0, beta = accumulate ? 1.0 : 0.0;
    TDF_CUBLAS_RETURN_IF_ERROR(blas.dgemm(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                          static_cast<int>(k), &one, b.data<double>(), ldb, a.data<double>(), lda,
                                          &beta, out.mutable_data<double>(), ldc));
  }
  return absl::OkStatus();
}

void RegisterCudaMatMulKernels(KernelRegistry& r) { RegisterCuda<MatMulKernel>(r, "MatMul"); }

}  // namespace cuda
}  // namespace tdf
