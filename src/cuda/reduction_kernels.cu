// Reduction CUDA kernels: Sum, Mean, Max over `axes` (keep_dims), and
// SumToShapeOf; and the row-wise Softmax and SoftmaxCrossEntropy.
//
// Semantics match src/runtime/kernels/reduction.cc and nn_ops.cc: integer
// sums wrap, integer Mean truncates (and over zero elements is an error,
// detected on the host from the shape), float Mean over zero elements is
// NaN, Max over zero elements is -inf (lowest for integers) and propagates
// NaN.
//
// A reduction views the input as (kept dims) x (reduced dims). With many
// elements per output a block reduces one output (threads stride over the
// reduced elements, then a shared-memory tree); otherwise a thread reduces
// one output serially.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "cuda/cuda_kernel_util.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace cuda {
namespace {

enum class ReduceKind { kSum, kMean, kMax };

template <typename T>
__device__ __forceinline__ T Lowest() {
  if constexpr (std::is_same_v<T, float>) return -INFINITY;
  if constexpr (std::is_same_v<T, double>) return -static_cast<double>(INFINITY);
  if constexpr (std::is_same_v<T, int32_t>) return INT32_MIN;
  if constexpr (std::is_same_v<T, int64_t>) return INT64_MIN;
  return T{};
}

template <typename T, ReduceKind K>
__device__ __forceinline__ T Init() {
  if constexpr (K == ReduceKind::kMax) return Lowest<T>();
  return T{0};
}

template <typename T, ReduceKind K>
__device__ __forceinline__ T Combine(T acc, T v) {
  if constexpr (K == ReduceKind::kMax) {
    if constexpr (std::is_floating_point_v<T>) {
      if (isnan(v) || isnan(acc)) return isnan(acc) ? acc : v;
    }
    return v > acc ? v : acc;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(acc) + static_cast<U>(v));
  } else {
    return acc + v;
  }
}

// kept: output dims and their input strides; red: reduced dims and strides.
struct ReduceParams {
  Strides kept;
  Strides red;
  int64_t num_out;
  int64_t num_red;
};

__device__ __forceinline__ int64_t Offset(const Strides& s, int64_t index) {
  int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    off += (index % s.dims[d]) * s.stride[d];
    index /= s.dims[d];
  }
  return off;
}

template <typename T, ReduceKind K>
__device__ __forceinline__ T Finish(T acc, int64_t count) {
  if constexpr (K == ReduceKind::kMean) {
    if constexpr (std::is_floating_point_v<T>) return acc / static_cast<T>(count);
    return static_cast<T>(static_cast<int64_t>(acc) / count);
  }
  return acc;
}

template <typename T, ReduceKind K>
__global__ void ReduceThreadPerOutput(const T* in, T* out, ReduceParams p) {
  constexpr ReduceKind kInner = K == ReduceKind::kMean ? ReduceKind::kSum : K;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < p.num_out;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* base = in + Offset(p.kept, o);
    T acc = Init<T, kInner>();
    for (int64_t r = 0; r < p.num_red; ++r) acc = Combine<T, kInner>(acc, base[Offset(p.red, r)]);
    out[o] = Finish<T, K>(acc, p.num_red);
  }
}

constexpr int kReduceThreads = 256;

template <typename T, ReduceKind K>
__global__ void ReduceBlockPerOutput(const T* in, T* out, ReduceParams p) {
  constexpr ReduceKind kInner = K == ReduceKind::kMean ? ReduceKind::kSum : K;
  __shared__ T partial[kReduceThreads];
  for (int64_t o = blockIdx.x; o < p.num_out; o += gridDim.x) {
    const T* base = in + Offset(p.kept, o);
    T acc = Init<T, kInner>();
    for (int64_t r = threadIdx.x; r < p.num_red; r += blockDim.x) acc = Combine<T, kInner>(acc, base[Offset(p.red, r)]);
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int step = blockDim.x / 2; step > 0; step /= 2) {
      if (threadIdx.x < step) partial[threadIdx.x] = Combine<T, kInner>(partial[threadIdx.x], partial[threadIdx.x + step]);
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = Finish<T, K>(partial[0], p.num_red);
    __syncthreads();
  }
}

absl::Status EmptyIntMeanError() {
  return absl::InvalidArgumentError("Mean of an integer tensor over zero elements (division by zero)");
}

// Launches the reduction of `x` over `reduce` into a new device tensor of
// `out_shape`.
template <ReduceKind K>
absl::StatusOr<Tensor> ReduceOnDevice(const Launch& launch, const Tensor& x, const std::vector<bool>& reduce,
                                      const Shape& out_shape, const char* op) {
  if (x.dtype() == DType::kBool) return UnsupportedDType(op, x.dtype());
  const int rank = x.rank();
  ReduceParams p;
  p.num_out = 1;
  p.num_red = 1;
  const kernels::Dims strides = kernels::RowMajorStrides(x.shape());
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = x.shape().dim(d);
    if (dim == 1) continue;  // contributes nothing to either index space
    Strides& s = reduce[d] ? p.red : p.kept;
    if (s.rank >= kMaxRank) return RankTooHigh(op, rank);
    s.dims[s.rank] = dim;
    s.stride[s.rank] = strides[d];
    ++s.rank;
    (reduce[d] ? p.num_red : p.num_out) *= dim;
  }
  if (K == ReduceKind::kMean && p.num_red == 0 && IsInteger(x.dtype())) return EmptyIntMeanError();
  TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), out_shape, launch.where));
  if (out.num_elements() == 0) return out;
  DispatchDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      if (p.num_red >= 64 || p.num_out < 1024) {
        const unsigned int blocks = static_cast<unsigned int>(std::min<int64_t>(p.num_out, 65535 * 8));
        ReduceBlockPerOutput<T, K><<<blocks, kReduceThreads, 0, launch.stream>>>(x.data<T>(), out.mutable_data<T>(), p);
      } else {
        ReduceThreadPerOutput<T, K><<<GridFor(p.num_out), 256, 0, launch.stream>>>(x.data<T>(), out.mutable_data<T>(), p);
      }
    }
  });
  TDF_CUDA_RETURN_IF_LAUNCH_FAILED("Reduce");
  return out;
}

template <ReduceKind K>
class ReduceKernel final : public OpKernel {
 public:
  ReduceKernel(std::optional<std::vector<int64_t>> axes, bool keep_dims, const char* op, Device device)
      : axes_(std::move(axes)), keep_dims_(keep_dims), op_(op), device_(device) {}

  static absl::StatusOr<std::unique_ptr<OpKernel>> Make(const NodeDef& node, const char* op) {
    std::optional<std::vector<int64_t>> axes;
    if (node.FindAttr("axes") != nullptr) {
      TDF_ASSIGN_OR_RETURN(axes, node.GetIntList("axes"));
    }
    return std::unique_ptr<OpKernel>(
        std::make_unique<ReduceKernel>(std::move(axes), node.GetBoolOr("keep_dims", false), op, KernelDevice(node)));
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    if (x.dtype() == DType::kBool) return UnsupportedDType(op_, x.dtype());
    if (rank == 0 && (!axes_ || axes_->empty())) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    std::vector<bool> reduce(rank, !axes_.has_value());
    if (axes_) {
      for (int64_t a : *axes_) {
        TDF_ASSIGN_OR_RETURN(int axis, kernels::NormalizeAxis(a, rank));
        reduce[axis] = true;
      }
    }
    Shape out_shape;
    for (int i = 0; i < rank; ++i) {
      if (!reduce[i]) {
        out_shape.AddDim(x.shape().dim(i));
      } else if (keep_dims_) {
        out_shape.AddDim(1);
      }
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, ReduceOnDevice<K>(launch, x, reduce, out_shape, op_));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const std::optional<std::vector<int64_t>> axes_;
  const bool keep_dims_;
  const char* const op_;
  const Device device_;
};

// SumToShapeOf(x, like): `like` only contributes its shape, so it may live
// on any device.
class SumToShapeOfKernel final : public OpKernel {
 public:
  explicit SumToShapeOfKernel(Device device) : device_(device) {}

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_, 0, 1));
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    const Shape& ls = ctx.input(1).shape();
    if (xs == ls) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    const int rx = xs.rank(), rl = ls.rank();
    auto not_reducible = [&] {
      return absl::InvalidArgumentError(absl::StrCat("SumToShapeOf: cannot sum shape ", xs.DebugString(),
                                                     " to shape ", ls.DebugString(),
                                                     " (it is not a broadcast of it)"));
    };
    for (int j = 0; j < rl - rx; ++j)
      if (ls.dim(j) != 1) return not_reducible();
    std::vector<bool> reduce(rx, false);
    for (int i = 0; i < rx; ++i) {
      const int j = i - (rx - rl);
      if (j < 0) {
        reduce[i] = true;
      } else if (ls.dim(j) == xs.dim(i)) {
        reduce[i] = false;
      } else if (ls.dim(j) == 1) {
        reduce[i] = true;
      } else {
        return not_reducible();
      }
    }
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, ReduceOnDevice<ReduceKind::kSum>(launch, x, reduce, ls, "SumToShapeOf"));
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

// ---------------------------------------------------------------------------
// Softmax and SoftmaxCrossEntropy over the last axis: one block per row.

template <typename T, bool kMax>
__device__ T BlockReduce(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) {
      const T a = shared[threadIdx.x], b = shared[threadIdx.x + step];
      shared[threadIdx.x] = kMax ? (b > a ? b : a) : a + b;
    }
    __syncthreads();
  }
  const T result = shared[0];
  __syncthreads();
  return result;
}

template <typename T>
__global__ void SoftmaxKernelImpl(const T* x, T* out, int64_t rows, int64_t cols) {
  __shared__ T shared[kReduceThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * cols;
    T* o = out + r * cols;
    T m = Lowest<T>();
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = row[c] > m ? row[c] : m;
    m = BlockReduce<T, true>(m, shared);
    T sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const T e = exp(row[c] - m);
      o[c] = e;
      sum += e;
    }
    sum = BlockReduce<T, false>(sum, shared);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] /= sum;
  }
}

template <typename T>
__global__ void SoftmaxCrossEntropyKernelImpl(const T* x, const T* y, T* loss, T* backprop, int64_t rows,
                                              int64_t cols) {
  __shared__ T shared[kReduceThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (cols == 0) {
      if (threadIdx.x == 0) loss[r] = T{0};
      continue;
    }
    const T* xr = x + r * cols;
    const T* yr = y + r * cols;
    T* br = backprop + r * cols;
    T m = Lowest<T>();
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = xr[c] > m ? xr[c] : m;
    m = BlockReduce<T, true>(m, shared);
    T sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += exp(xr[c] - m);
    sum = BlockReduce<T, false>(sum, shared);
    const T lse = log(sum) + m;
    T l = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      if (yr[c] != T{0}) l += yr[c] * (lse - xr[c]);
      br[c] = exp(xr[c] - lse) - yr[c];
    }
    l = BlockReduce<T, false>(l, shared);
    if (threadIdx.x == 0) loss[r] = l;
  }
}

absl::Status CheckFloatRank1(const Tensor& t, const char* op, const char* what) {
  if (!IsFloating(t.dtype())) return UnsupportedDType(op, t.dtype());
  if (t.rank() < 1)
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " must have rank >= 1, got a scalar"));
  return absl::OkStatus();
}

unsigned int RowGrid(int64_t rows) {
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(rows, 65535 * 8)));
}

class SoftmaxKernel final : public OpKernel {
 public:
  explicit SoftmaxKernel(Device device) : device_(device) {}
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 1));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& x = ctx.input(0);
    TDF_RETURN_IF_ERROR(CheckFloatRank1(x, "Softmax", "input"));
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), x.shape(), device_));
    const int64_t cols = x.shape().dim(x.rank() - 1);
    if (cols > 0 && x.num_elements() > 0) {
      const int64_t rows = x.num_elements() / cols;
      if (x.dtype() == DType::kFloat32) {
        SoftmaxKernelImpl<float><<<RowGrid(rows), kReduceThreads, 0, launch.stream>>>(
            x.data<float>(), out.mutable_data<float>(), rows, cols);
      } else {
        SoftmaxKernelImpl<double><<<RowGrid(rows), kReduceThreads, 0, launch.stream>>>(
            x.data<double>(), out.mutable_data<double>(), rows, cols);
      }
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("SoftmaxKernelImpl");
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

class SoftmaxCrossEntropyKernel final : public OpKernel {
 public:
  explicit SoftmaxCrossEntropyKernel(Device device) : device_(device) {}
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckArity(ctx, 2));
    TDF_RETURN_IF_ERROR(CheckDeviceInputs(ctx, device_));
    const Tensor& logits = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    TDF_RETURN_IF_ERROR(CheckFloatRank1(logits, "SoftmaxCrossEntropy", "logits"));
    if (labels.dtype() != logits.dtype()) return kernels::DTypeMismatchError(logits.dtype(), labels.dtype());
    if (labels.shape() != logits.shape())
      return absl::InvalidArgumentError(absl::StrCat("SoftmaxCrossEntropy: logits shape ",
                                                     logits.shape().DebugString(), " differs from labels shape ",
                                                     labels.shape().DebugString()));
    Shape loss_shape;
    for (int d = 0; d + 1 < logits.rank(); ++d) loss_shape.AddDim(logits.shape().dim(d));
    TDF_ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(ctx, device_));
    TDF_ASSIGN_OR_RETURN(Tensor loss, Tensor::Empty(logits.dtype(), loss_shape, device_));
    TDF_ASSIGN_OR_RETURN(Tensor backprop, Tensor::Empty(logits.dtype(), logits.shape(), device_));
    const int64_t cols = logits.shape().dim(logits.rank() - 1);
    const int64_t rows = loss.num_elements();
    if (rows > 0) {
      if (logits.dtype() == DType::kFloat32) {
        SoftmaxCrossEntropyKernelImpl<float><<<RowGrid(rows), kReduceThreads, 0, launch.stream>>>(
            logits.data<float>(), labels.data<float>(), loss.mutable_data<float>(), backprop.mutable_data<float>(),
            rows, cols);
      } else {
        SoftmaxCrossEntropyKernelImpl<double><<<RowGrid(rows), kReduceThreads, 0, launch.stream>>>(
            logits.data<double>(), labels.data<double>(), loss.mutable_data<double>(),
            backprop.mutable_data<double>(), rows, cols);
      }
      TDF_CUDA_RETURN_IF_LAUNCH_FAILED("SoftmaxCrossEntropyKernelImpl");
    }
    ctx.set_output(0, std::move(loss));
    if (ctx.num_outputs() > 1) ctx.set_output(1, std::move(backprop));
    return absl::OkStatus();
  }

 private:
  const Device device_;
};

}  // namespace

void RegisterCudaReductionKernels(KernelRegistry& r) {
  r.Register("Sum", Device::Type::kCuda,
             [](const NodeDef& n) { return ReduceKernel<ReduceKind::kSum>::Make(n, "Sum"); });
  r.Register("Mean", Device::Type::kCuda,
             [](const NodeDef& n) { return ReduceKernel<ReduceKind::kMean>::Make(n, "Mean"); });
  r.Register("Max", Device::Type::kCuda,
             [](const NodeDef& n) { return ReduceKernel<ReduceKind::kMax>::Make(n, "Max"); });
  RegisterCudaSimple<SumToShapeOfKernel>(r, "SumToShapeOf");
  RegisterCudaSimple<SoftmaxKernel>(r, "Softmax");
  RegisterCudaSimple<SoftmaxCrossEntropyKernel>(r, "SoftmaxCrossEntropy");
}

}  // namespace cuda
}  // namespace tdf
