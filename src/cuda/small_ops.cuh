// Internal (CUDA builds only): single-launch kernels for the small tensors
// of a recursive network's nodes, where the fixed cost of a library call
// dominates. On an H200, any one kernel launch costs ~4 us of a worker
// thread's time, a cudaMemcpy2DAsync ~5 us per piece, and cublasSgemm ~10 us
// for a TreeRNN node's [1, 300] x [300, 150] (tdf_treernn_bench --gpu with
// TDF_TRACE): past these sizes the library paths win and are used.
#ifndef TDF_SRC_CUDA_SMALL_OPS_CUH_
#define TDF_SRC_CUDA_SMALL_OPS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_kernel_util.h"

namespace tdf {
namespace cuda {

// ---------------------------------------------------------------------------
// Side-by-side pieces of a row-major [outer, total] matrix (Concat, and its
// gradient ConcatGrad): piece k is [outer, width[k]] at column offset[k].

inline constexpr int kMaxBlockPieces = 8;
inline constexpr int64_t kMaxBlockCopyBytes = int64_t{4} << 20;

struct BlockPieces {
  char* ptr[kMaxBlockPieces];
  int64_t width[kMaxBlockPieces];   // elements per row of the piece
  int64_t offset[kMaxBlockPieces];  // its first column in the whole
  int n = 0;
};

// kToWhole: the pieces are copied into `whole` (Concat); else `whole` is
// copied out to the pieces (ConcatGrad).
template <typename U, bool kToWhole>
__global__ void BlockCopyKernel(BlockPieces p, U* whole, int64_t outer, int64_t total) {
  const int64_t count = outer * total;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = e / total;
    const int64_t c = e - r * total;
    int k = 0;
    while (k + 1 < p.n && c >= p.offset[k] + p.width[k]) ++k;
    U* piece = reinterpret_cast<U*>(p.ptr[k]) + r * p.width[k] + (c - p.offset[k]);
    if constexpr (kToWhole) {
      whole[e] = *piece;
    } else {
      *piece = whole[e];
    }
  }
}

// Launches BlockCopyKernel for `elem`-byte elements. The caller checked
// that the pieces fit (n <= kMaxBlockPieces, outer * total > 0).
template <bool kToWhole>
absl::Status LaunchBlockCopy(const BlockPieces& p, void* whole, int64_t outer, int64_t total, size_t elem,
                             cudaStream_t stream) {
  const int64_t n = outer * total;
  switch (elem) {
    case 1:
      BlockCopyKernel<uint8_t, kToWhole><<<GridFor(n), 256, 0, stream>>>(p, static_cast<uint8_t*>(whole), outer, total);
      break;
    case 2:
      BlockCopyKernel<uint16_t, kToWhole><<<GridFor(n), 256, 0, stream>>>(p, static_cast<uint16_t*>(whole), outer,
                                                                          total);
      break;
    case 4:
      BlockCopyKernel<uint32_t, kToWhole><<<GridFor(n), 256, 0, stream>>>(p, static_cast<uint32_t*>(whole), outer,
                                                                          total);
      break;
    case 8:
      BlockCopyKernel<uint64_t, kToWhole><<<GridFor(n), 256, 0, stream>>>(p, static_cast<uint64_t*>(whole), outer,
                                                                          total);
      break;
    default:
      return absl::InternalError(absl::StrCat("block copy of ", elem, "-byte elements"));
  }
  TDF_CUDA_RETURN_IF_LAUNCH_FAILED("BlockCopyKernel");
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// C [m, n] = op(A) op(B), or C += op(A) op(B) with `accumulate`: one thread
// per element of C. op(A)[i, p] is a[p * lda + i] when transposed, else
// a[i * lda + p] (lda: the stored matrix's row length); likewise B.

inline constexpr int64_t kMaxSmallGemmMacs = int64_t{1} << 20;

inline bool UseSmallGemm(int64_t m, int64_t n, int64_t k) {
  return m > 0 && n > 0 && k > 0 && m <= kMaxSmallGemmMacs && n <= kMaxSmallGemmMacs && k <= kMaxSmallGemmMacs &&
         m * n <= kMaxSmallGemmMacs && m * n * k <= kMaxSmallGemmMacs;
}

template <typename T>
__global__ void SmallGemmKernel(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                                int64_t lda, int64_t ldb, bool accumulate) {
  const int64_t count = m * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t i = e / n;
    const int64_t j = e - i * n;
    T acc = 0;
    for (int64_t p = 0; p < k; ++p) acc += a[ta ? p * lda + i : i * lda + p] * b[tb ? j * ldb + p : p * ldb + j];
    c[e] = accumulate ? c[e] + acc : acc;
  }
}

template <typename T>
absl::Status LaunchSmallGemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                             int64_t lda, int64_t ldb, bool accumulate, cudaStream_t stream) {
  SmallGemmKernel<T><<<GridFor(m * n, 128), 128, 0, stream>>>(a, b, c, m, n, k, ta, tb, lda, ldb, accumulate);
  TDF_CUDA_RETURN_IF_LAUNCH_FAILED("SmallGemmKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace tdf

#endif  // TDF_SRC_CUDA_SMALL_OPS_CUH_
