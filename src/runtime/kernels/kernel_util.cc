#include "runtime/kernels/kernel_util.h"

#include <sys/mman.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/sync.h"
#include "base/tasks.h"
#include "oneapi/tbb/task_arena.h"

namespace tdf {
namespace kernels {

namespace {

// 256 MiB of address space, never written: private anonymous memory reads as
// zeros and, read-only, is backed by the kernel's shared zero page only.
constexpr size_t kZeroMappingBytes = size_t{256} << 20;
constexpr size_t kSharedZerosMinBytes = 4096;

// The mapping as a Buffer that lives for the process (one reference is never
// dropped); nullptr if mmap failed, and Zeros then allocates.
Buffer* ZeroBuffer() {
  static Buffer* const buffer = []() -> Buffer* {
    void* p = mmap(nullptr, kZeroMappingBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    return Buffer::Wrap(p, kZeroMappingBytes, Device::Cpu(),
                        [](void* data, size_t bytes, Device) { munmap(data, bytes); });
  }();
  return buffer;
}

}  // namespace

absl::StatusOr<Tensor> Zeros(DType dtype, const Shape& shape) {
  TDF_RETURN_IF_ERROR(shape.Validate());
  // In elements, not bytes: a byte count can wrap (int64 [2^61 + 512] is
  // 4096 bytes mod 2^64) and would pass a huge shape off as the mapping.
  const uint64_t elements = static_cast<uint64_t>(shape.num_elements());
  const size_t size = DTypeSize(dtype);
  if (size > 0 && elements >= kSharedZerosMinBytes / size && elements <= kZeroMappingBytes / size) {
    if (Buffer* zeros = ZeroBuffer()) return Tensor::FromBuffer(dtype, shape, zeros);
  }
  return Tensor::Zeros(dtype, shape);
}

bool IsSharedZeros(const Tensor& t) {
  return !t.is_inline_scalar() && t.buffer() == ZeroBuffer() && t.buffer() != nullptr;
}

absl::Status ArityError(int want, int got) {
  return absl::InvalidArgumentError(absl::StrCat("expects ", want, " inputs, got ", got));
}

absl::Status MinArityError(int want, int got) {
  return absl::InvalidArgumentError(absl::StrCat("expects at least ", want, " inputs, got ", got));
}

absl::Status NotOnCpuError(int input, Device device) {
  return absl::FailedPreconditionError(
      absl::StrCat("input ", input, " is on ", device.ToString(), "; CPU kernels need CPU tensors"));
}

absl::Status DTypeMismatchError(DType a, DType b) {
  return absl::InvalidArgumentError(
      absl::StrCat("dtype mismatch: input 0 is ", DTypeName(a), ", input 1 is ", DTypeName(b)));
}

absl::Status UnsupportedDTypeError(const char* what, DType dtype) {
  return absl::InvalidArgumentError(absl::StrCat(what, " does not support dtype ", DTypeName(dtype)));
}

absl::Status BroadcastError(const Shape& a, const Shape& b) {
  return absl::InvalidArgumentError(
      absl::StrCat("incompatible shapes for broadcasting: ", a.DebugString(), " vs ", b.DebugString()));
}

absl::Status AxisError(int64_t axis, int rank) {
  return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
}

absl::StatusOr<Shape> BroadcastShapes(absl::Span<const Shape* const> shapes) {
  int rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->rank());
  Dims dims(rank, 1);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& s = *shapes[k];
    const int offset = rank - s.rank();
    for (int i = 0; i < s.rank(); ++i) {
      const int64_t d = s.dim(i);
      int64_t& o = dims[offset + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      // Name the first shape that disagrees with shape k.
      for (size_t j = 0; j < k; ++j) {
        const Shape& p = *shapes[j];
        const int pi = offset + i - (rank - p.rank());
        if (pi >= 0 && p.dim(pi) != 1 && p.dim(pi) != d) return BroadcastError(p, s);
      }
      return BroadcastError(*shapes[0], s);
    }
  }
  return Shape(absl::MakeConstSpan(dims));
}

Dims RowMajorStrides(const Shape& shape) {
  Dims strides(shape.rank(), 1);
  for (int i = shape.rank() - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape.dim(i + 1);
  return strides;
}

Dims BroadcastStrides(const Shape& shape, const Shape& out) {
  Dims strides(out.rank(), 0);
  const int offset = out.rank() - shape.rank();
  int64_t stride = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[offset + i] = shape.dim(i) == 1 ? 0 : stride;
    stride *= shape.dim(i);
  }
  return strides;
}

// Below ~100k multiply-adds per block (5-10 us of Eigen GEMM here) waking a
// worker and splitting the operands costs more than it saves.
constexpr double kMinCostPerBlock = 1e5;

int64_t ParallelBlocks(int64_t n, double cost) {
  if (cost < 2 * kMinCostPerBlock) return 1;
  const int workers = tbb::this_task_arena::max_concurrency();
  return std::min<int64_t>({workers, n, static_cast<int64_t>(cost / kMinCostPerBlock)});
}

void RunBlocks(int64_t n, int64_t blocks, const std::function<void(int64_t, int64_t)>& block) {
  // At most one block per worker, each large: a task per block, the caller
  // running the last one (oneTBB's parallel_for would split the range
  // further and build task objects TSan cannot see being handed off).
  [[maybe_unused]] char done = 0;
  tbb::this_task_arena::isolate([&] {
    tbb::task_group group;
    for (int64_t b = 0; b + 1 < blocks; ++b) {
      base::SpawnTask(group, [&block, &done, n, blocks, b] {
        static_cast<void>(done);  // used by the TSan annotation only
        base::TaskStarts();
        block(n * b / blocks, n * (b + 1) / blocks);
        TDF_TSAN_RELEASE(&done);
        base::TaskEnds();
      });
    }
    block(n * (blocks - 1) / blocks, n);
    group.wait();
  });
  TDF_TSAN_ACQUIRE(&done);  // what the blocks wrote
}

}  // namespace kernels
}  // namespace tdf
