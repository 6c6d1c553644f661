#include "runtime/kernels/kernel_util.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <limits>

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

// ---- Input checks shared by a CPU kernel and its CUDA twin ----

absl::Status InvalidInputError(int input) {
  return absl::InvalidArgumentError(absl::StrCat("input ", input, " is an invalid (empty) tensor"));
}

namespace {

// The products of x's dims before and after `axis`, wrapping: the product
// of some dims can only overflow when another dim is 0.
void OuterInner(const Shape& x, int axis, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < axis; ++d) *outer = WrapMul(*outer, x.dim(d));
  for (int d = axis + 1; d < x.rank(); ++d) *inner = WrapMul(*inner, x.dim(d));
}

// True when x has ref's rank and dims, but along `axis`.
bool SameButAlong(const Shape& x, const Shape& ref, int axis) {
  bool ok = x.rank() == ref.rank();
  for (int d = 0; ok && d < ref.rank(); ++d) ok = d == axis || x.dim(d) == ref.dim(d);
  return ok;
}

}  // namespace

absl::StatusOr<ConcatGeometry> CheckConcat(const KernelContext& ctx, int64_t axis_attr) {
  const int n = ctx.num_inputs();
  const Tensor& first = ctx.input(0);
  if (!first.valid()) return InvalidInputError(0);
  const int rank = first.rank();
  if (rank == 0) return absl::InvalidArgumentError("Concat of scalars: inputs need rank >= 1");
  TDF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_attr, rank));
  ConcatGeometry g{axis, 0, 1, 1};
  for (int i = 0; i < n; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != first.dtype())
      return absl::InvalidArgumentError(absl::StrCat("dtype mismatch: input 0 is ", DTypeName(first.dtype()),
                                                     ", input ", i, " is ", DTypeName(t.dtype())));
    if (!SameButAlong(t.shape(), first.shape(), axis))
      return absl::InvalidArgumentError(absl::StrCat("Concat along axis ", axis, ": input 0 has shape ",
                                                     first.shape().DebugString(), ", input ", i, " has shape ",
                                                     t.shape().DebugString()));
    g.axis_total += t.shape().dim(axis);
  }
  OuterInner(first.shape(), axis, &g.outer, &g.inner);
  return g;
}

absl::Status CheckConcatGradArity(const KernelContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  if (n < 1) return MinArityError(2, ctx.num_inputs());
  // One output per x_k, as the schema gives the node: never write past them.
  if (ctx.num_outputs() != n)
    return absl::InvalidArgumentError(
        absl::StrCat("ConcatGrad: ", n, " parts to split need ", n, " outputs, the node has ", ctx.num_outputs()));
  return absl::OkStatus();
}

absl::StatusOr<ConcatGeometry> CheckConcatGrad(const KernelContext& ctx, int64_t axis_attr) {
  const int n = ctx.num_inputs() - 1;
  const Tensor& dy = ctx.input(0);
  if (!dy.valid()) return InvalidInputError(0);
  const int rank = dy.rank();
  if (rank == 0) return absl::InvalidArgumentError("ConcatGrad: dy must have rank >= 1, got a scalar");
  TDF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_attr, rank));
  ConcatGeometry g{axis, 0, 1, 1};
  for (int i = 1; i <= n; ++i) {
    const Tensor& x = ctx.input(i);
    if (!x.valid()) return InvalidInputError(i);
    if (!SameButAlong(x.shape(), dy.shape(), axis))
      return absl::InvalidArgumentError(absl::StrCat("ConcatGrad along axis ", axis, ": dy has shape ",
                                                     dy.shape().DebugString(), ", input ", i, " has shape ",
                                                     x.shape().DebugString()));
    g.axis_total += x.shape().dim(axis);
  }
  if (g.axis_total != dy.shape().dim(axis))
    return absl::InvalidArgumentError(absl::StrCat("ConcatGrad along axis ", axis, ": the inputs add up to ",
                                                   g.axis_total, " but dy has shape ", dy.shape().DebugString()));
  OuterInner(dy.shape(), axis, &g.outer, &g.inner);
  return g;
}

absl::StatusOr<SliceAttrs> GetSliceAttrs(const NodeDef& node, const char* op) {
  SliceAttrs attrs;
  TDF_ASSIGN_OR_RETURN(attrs.begin, node.GetIntList("begin"));
  TDF_ASSIGN_OR_RETURN(attrs.size, node.GetIntList("size"));
  if (attrs.begin.size() != attrs.size.size())
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": begin has ", attrs.begin.size(), " entries but size has ", attrs.size.size()));
  return attrs;
}

absl::StatusOr<SliceGeometry> CheckSlice(const char* op, const char* what, const Shape& x,
                                         absl::Span<const int64_t> begin, absl::Span<const int64_t> size) {
  const int rank = x.rank();
  if (static_cast<int>(begin.size()) != rank)
    return absl::InvalidArgumentError(absl::StrCat(op, ": begin/size have ", begin.size(), " entries but ", what,
                                                   " has rank ", rank, " (shape ", x.DebugString(), ")"));
  SliceGeometry g;
  g.strides = RowMajorStrides(x);
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = x.dim(d);
    const int64_t b = begin[d];
    // dim - b only once b is known to be in [0, dim]: begin comes from an
    // attr and may be INT64_MIN.
    const bool begin_ok = b >= 0 && b <= dim;
    const int64_t s = !begin_ok ? 0 : size[d] == -1 ? dim - b : size[d];
    if (!begin_ok || s < 0 || s > dim - b)
      return absl::InvalidArgumentError(absl::StrCat(op, ": dim ", d, " of shape ", x.DebugString(), ": begin ", b,
                                                     ", size ", size[d], " is out of bounds"));
    g.slice.AddDim(s);
    g.base += b * g.strides[d];
  }
  return g;
}

absl::StatusOr<SliceGeometry> CheckSliceGrad(const Tensor& x, const Tensor& dy, absl::Span<const int64_t> begin,
                                             absl::Span<const int64_t> size) {
  TDF_ASSIGN_OR_RETURN(SliceGeometry g, CheckSlice("SliceGrad", "x", x.shape(), begin, size));
  if (dy.shape() != g.slice || dy.dtype() != x.dtype())
    return absl::InvalidArgumentError(absl::StrCat("SliceGrad: dy is ", DTypeName(dy.dtype()), " ",
                                                   dy.shape().DebugString(), ", the slice of x is ",
                                                   DTypeName(x.dtype()), " ", g.slice.DebugString()));
  return g;
}

absl::StatusOr<int> CheckGatherGrad(const Tensor& params, const Tensor& indices, const Tensor& dy, int64_t axis_attr) {
  if (params.rank() == 0) return absl::InvalidArgumentError("GatherGrad: params must have rank >= 1, got a scalar");
  if (dy.dtype() != params.dtype()) return DTypeMismatchError(params.dtype(), dy.dtype());
  TDF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_attr, params.rank()));
  if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32)
    return absl::InvalidArgumentError(
        absl::StrCat("GatherGrad: indices must be int32 or int64, got ", DTypeName(indices.dtype())));
  // dy must have Gather's output shape.
  const Shape& ps = params.shape();
  Shape want;
  for (int d = 0; d < axis; ++d) want.AddDim(ps.dim(d));
  for (int64_t d : indices.shape().dims()) want.AddDim(d);
  for (int d = axis + 1; d < ps.rank(); ++d) want.AddDim(ps.dim(d));
  if (dy.shape() != want)
    return absl::InvalidArgumentError(absl::StrCat("GatherGrad: dy has shape ", dy.shape().DebugString(),
                                                   ", Gather of params ", ps.DebugString(), " by indices ",
                                                   indices.shape().DebugString(), " gives ", want.DebugString()));
  return axis;
}

absl::StatusOr<MatMulGeometry> CheckMatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                                           const char* op) {
  if (a.dtype() != b.dtype()) return DTypeMismatchError(a.dtype(), b.dtype());
  if (!IsFloating(a.dtype())) return UnsupportedDTypeError(op, a.dtype());
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
  return MatMulGeometry{m, k, n};
}

absl::Status CheckMatMulAddends(const KernelContext& ctx, DType dtype, const Shape& shape) {
  for (int i = 2; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != dtype)
      return absl::InvalidArgumentError(absl::StrCat("MatMulAdd: addend ", i - 2, " is ", DTypeName(t.dtype()),
                                                     ", the operands are ", DTypeName(dtype)));
    if (t.shape() != shape)
      return absl::InvalidArgumentError(absl::StrCat("MatMulAdd: addend ", i - 2, " has shape ",
                                                     t.shape().DebugString(), ", the product has shape ",
                                                     shape.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status CheckIndexedRowsTable(const Tensor& like, const char* op, int64_t* rows, int64_t* row_size) {
  if (!IsFloating(like.dtype())) return UnsupportedDTypeError(op, like.dtype());
  if (like.rank() < 1)
    return absl::InvalidArgumentError(absl::StrCat(op, ": the table must have rank >= 1, got a scalar"));
  *rows = like.shape().dim(0);
  *row_size = 1;
  for (int d = 1; d < like.rank(); ++d) *row_size *= like.shape().dim(d);
  if (like.dtype() == DType::kFloat32 && *rows > std::numeric_limits<int32_t>::max())
    return absl::InvalidArgumentError(absl::StrCat(op, ": a float32 table of more than 2^31 rows"));
  return absl::OkStatus();
}

absl::Status CheckIndexedRowsShape(const Tensor& t, int64_t row_size, const char* op, int input) {
  if (t.rank() != 2 || t.shape().dim(1) != 1 + row_size)
    return absl::InvalidArgumentError(absl::StrCat(op, ": input ", input, " must be indexed rows [m, ", 1 + row_size,
                                                   "], got ", t.shape().DebugString()));
  return absl::OkStatus();
}

absl::Status CheckIndexedRows(const Tensor& like, const Tensor& indices, const Tensor& dy, int64_t* rows,
                              int64_t* row_size) {
  TDF_RETURN_IF_ERROR(CheckIndexedRowsTable(like, "IndexedRows", rows, row_size));
  if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32)
    return absl::InvalidArgumentError(
        absl::StrCat("IndexedRows: indices must be int32 or int64, got ", DTypeName(indices.dtype())));
  if (dy.dtype() != like.dtype()) return DTypeMismatchError(like.dtype(), dy.dtype());
  Shape want = indices.shape();
  for (int d = 1; d < like.rank(); ++d) want.AddDim(like.shape().dim(d));
  if (dy.shape() != want)
    return absl::InvalidArgumentError(absl::StrCat("IndexedRows: dy has shape ", dy.shape().DebugString(),
                                                   ", Gather of a table ", like.shape().DebugString(),
                                                   " by indices ", indices.shape().DebugString(), " gives ",
                                                   want.DebugString()));
  return absl::OkStatus();
}

absl::Status CheckOuterRowsWeight(const Tensor& like, const char* op) {
  if (!IsFloating(like.dtype())) return UnsupportedDTypeError(op, like.dtype());
  if (like.rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the weight must have rank 2, got ", like.shape().DebugString()));
  return absl::OkStatus();
}

absl::Status CheckOuterRows(const Tensor& rows, const Tensor& like, const char* op) {
  TDF_RETURN_IF_ERROR(CheckOuterRowsWeight(like, op));
  if (rows.dtype() != like.dtype()) return DTypeMismatchError(rows.dtype(), like.dtype());
  const int64_t width = like.shape().dim(0) + like.shape().dim(1);
  if (rows.rank() != 2 || rows.shape().dim(1) != width)
    return absl::InvalidArgumentError(absl::StrCat(op, ": outer-product rows for a weight of shape ",
                                                   like.shape().DebugString(), " must be [m, ", width,
                                                   "], got ", rows.shape().DebugString()));
  return absl::OkStatus();
}

absl::StatusOr<OuterRowsConcatGeometry> CheckOuterRowsConcat(const KernelContext& ctx) {
  const Tensor& like = ctx.input(0);
  TDF_RETURN_IF_ERROR(CheckOuterRowsWeight(like, "OuterRowsConcat"));
  OuterRowsConcatGeometry g;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    TDF_RETURN_IF_ERROR(CheckOuterRows(t, like, "OuterRowsConcat"));
    g.m += t.shape().dim(0);
    if (t.shape().dim(0) > 0) g.pieces.push_back(&t);
  }
  g.K = like.shape().dim(0);
  g.N = like.shape().dim(1);
  g.cap = std::min(g.K, g.N);
  return g;
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
