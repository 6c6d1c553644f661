// Indexed rows: the gradient of a table P [R, ...] that a recursive function
// reads by Gather(P, idx) along axis 0 (autodiff.cc, RowsKind::kIndexed),
// kept as the rows [idx | dy row] of one [m, 1 + D] tensor (D the size of a
// row of P) instead of a dense tensor of P's shape per invocation: summing
// two such gradients is concatenating rows. The index is stored bit for bit
// in the row's first element (an int32 in a float32, an int64 in a float64):
// these tensors are only copied, never computed on, and the ops below are
// their only readers. A sum of more than R rows is compacted to one row per
// distinct index, so its size stays bounded however deep the recursion goes.
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

// The integer type whose bits a row's first element holds.
template <typename T>
using IndexBits = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

template <typename T>
int64_t DecodeIndex(const T* row) {
  IndexBits<T> i;
  std::memcpy(&i, row, sizeof(i));
  return i;
}

template <typename T>
void EncodeIndex(int64_t index, T* row) {
  const IndexBits<T> i = static_cast<IndexBits<T>>(index);
  std::memcpy(row, &i, sizeof(i));
}

// The table P and the shapes of the rows are checked by kernel_util.h's
// CheckIndexedRows* (shared with the CUDA kernels, src/cuda/row_kernels.cu);
// the indices, which the CUDA kernels check on the device, here.

// Checks that `t` is [m, 1 + D] of the table's dtype with indices in [0, R).
template <typename T>
absl::Status CheckRowsOf(const Tensor& t, int64_t R, int64_t D, const char* op, int input) {
  TDF_RETURN_IF_ERROR(kernels::CheckIndexedRowsShape(t, D, op, input));
  const T* p = t.data<T>();
  for (int64_t r = 0; r < t.shape().dim(0); ++r, p += 1 + D) {
    const int64_t i = DecodeIndex(p);
    if (i < 0 || i >= R)
      return absl::InvalidArgumentError(absl::StrCat(op, ": input ", input, " row ", r, " has index ", i,
                                                     ", out of range [0, ", R, ")"));
  }
  return absl::OkStatus();
}

// dense [R, D] += every row, at its index.
template <typename T>
void ScatterRows(absl::Span<const Tensor* const> pieces, int64_t D, T* dense, std::vector<char>* touched) {
  for (const Tensor* t : pieces) {
    const T* p = t->data<T>();
    for (int64_t r = 0; r < t->shape().dim(0); ++r, p += 1 + D) {
      const int64_t i = DecodeIndex(p);
      T* out = dense + i * D;
      for (int64_t k = 0; k < D; ++k) out[k] += p[1 + k];
      if (touched != nullptr) (*touched)[i] = 1;
    }
  }
}

// IndexedRows(P, indices, dy) -> [count, 1 + D]: the rows of Gather(P,
// indices)'s gradient dy (indices of any shape, dy of Gather's output
// shape), each with its index.
class IndexedRowsKernel final : public OpKernel {
 public:
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return kernels::CreateSimple<IndexedRowsKernel>(node);
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 3));
    const Tensor& like = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(kernels::CheckIndexedRows(like, indices, dy, &R, &D));
    const int64_t count = indices.num_elements();
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(like.dtype(), Shape({count, 1 + D})));
    absl::Status s = like.dtype() == DType::kFloat32 ? Fill<float>(indices, dy, R, D, out)
                                                      : Fill<double>(indices, dy, R, D, out);
    if (!s.ok()) return s;
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static absl::Status Fill(const Tensor& indices, const Tensor& dy, int64_t R, int64_t D, Tensor& out) {
    const int64_t count = indices.num_elements();
    const T* src = dy.data<T>();
    T* dst = out.mutable_data<T>();
    for (int64_t j = 0; j < count; ++j, src += D, dst += 1 + D) {
      const int64_t i = indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
      if (i < 0 || i >= R)
        return absl::InvalidArgumentError(
            absl::StrCat("IndexedRows: index ", i, " (at position ", j, ") is out of range [0, ", R, ")"));
      EncodeIndex(i, dst);
      if (D > 0) std::memcpy(dst + 1, src, sizeof(T) * D);
    }
    return absl::OkStatus();
  }
};

// IndexedRowsConcat(P, rows...) -> [m, 1 + D]: the rows of every input (a
// sum of their sums); more than R rows are compacted to one per distinct
// index. With no rows inputs: the empty sum, [0, 1 + D].
class IndexedRowsConcatKernel final : public OpKernel {
 public:
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return kernels::CreateSimple<IndexedRowsConcatKernel>(node);
  }

  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n < 1) return kernels::MinArityError(1, n);
    TDF_RETURN_IF_ERROR(kernels::CheckCpuInputs(ctx));
    const Tensor& like = ctx.input(0);
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(kernels::CheckIndexedRowsTable(like, "IndexedRowsConcat", &R, &D));
    absl::InlinedVector<const Tensor*, 4> pieces;
    int64_t m = 0;
    for (int i = 1; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != like.dtype()) return kernels::DTypeMismatchError(like.dtype(), t.dtype());
      absl::Status s = like.dtype() == DType::kFloat32 ? CheckRowsOf<float>(t, R, D, "IndexedRowsConcat", i)
                                                        : CheckRowsOf<double>(t, R, D, "IndexedRowsConcat", i);
      if (!s.ok()) return s;
      m += t.shape().dim(0);
      if (t.shape().dim(0) > 0) pieces.push_back(&t);
    }
    if (pieces.size() == 1 && m <= R) {
      ctx.set_output(0, *pieces[0]);  // one non-empty sum: shared, not copied
      return absl::OkStatus();
    }
    absl::StatusOr<Tensor> out = like.dtype() == DType::kFloat32 ? Join<float>(pieces, m, R, D)
                                                                  : Join<double>(pieces, m, R, D);
    if (!out.ok()) return out.status();
    ctx.set_output(0, *std::move(out));
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static absl::StatusOr<Tensor> Join(absl::Span<const Tensor* const> pieces, int64_t m, int64_t R, int64_t D) {
    if (m <= R) {
      TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(DTypeOf<T>::value, Shape({m, 1 + D})));
      char* dst = static_cast<char*>(out.raw_mutable_data());
      for (const Tensor* p : pieces) {
        const size_t bytes = static_cast<size_t>(p->num_elements()) * sizeof(T);
        std::memcpy(dst, p->raw_data(), bytes);
        dst += bytes;
      }
      return out;
    }
    // Compact: one row per distinct index, in index order.
    std::vector<T> dense(static_cast<size_t>(R * D), T(0));
    std::vector<char> touched(static_cast<size_t>(R), 0);
    ScatterRows<T>(pieces, D, dense.data(), &touched);
    int64_t distinct = 0;
    for (char t : touched) distinct += t;
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(DTypeOf<T>::value, Shape({distinct, 1 + D})));
    T* dst = out.mutable_data<T>();
    for (int64_t i = 0; i < R; ++i) {
      if (!touched[i]) continue;
      EncodeIndex(i, dst);
      if (D > 0) std::memcpy(dst + 1, dense.data() + i * D, sizeof(T) * D);
      dst += 1 + D;
    }
    return out;
  }
};

// IndexedRowsSum(rows, P) -> P's shape: zeros with every row added at its index.
class IndexedRowsSumKernel final : public OpKernel {
 public:
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return kernels::CreateSimple<IndexedRowsSumKernel>(node);
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 2));
    const Tensor& rows = ctx.input(0);
    const Tensor& like = ctx.input(1);
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(kernels::CheckIndexedRowsTable(like, "IndexedRowsSum", &R, &D));
    if (rows.dtype() != like.dtype()) return kernels::DTypeMismatchError(rows.dtype(), like.dtype());
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(like.dtype(), like.shape()));
    const Tensor* pieces[] = {&rows};
    if (like.dtype() == DType::kFloat32) {
      TDF_RETURN_IF_ERROR(CheckRowsOf<float>(rows, R, D, "IndexedRowsSum", 0));
      ScatterRows<float>(pieces, D, out.mutable_data<float>(), nullptr);
    } else {
      TDF_RETURN_IF_ERROR(CheckRowsOf<double>(rows, R, D, "IndexedRowsSum", 0));
      ScatterRows<double>(pieces, D, out.mutable_data<double>(), nullptr);
    }
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

// IndexedRowsSplit(rows, P) -> (indices int64 [m], values [m, P's row
// shape]): the rows taken apart, for a sparse update of a variable P
// (ScatterAdd; AddSgdStep).
class IndexedRowsSplitKernel final : public OpKernel {
 public:
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const NodeDef& node) {
    return kernels::CreateSimple<IndexedRowsSplitKernel>(node);
  }

  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(kernels::CheckInputs(ctx, 2));
    // Two outputs, as the schema gives the node: never write past them.
    if (ctx.num_outputs() != 2)
      return absl::InvalidArgumentError(
          absl::StrCat("IndexedRowsSplit has 2 outputs, the node has ", ctx.num_outputs()));
    const Tensor& rows = ctx.input(0);
    const Tensor& like = ctx.input(1);
    int64_t R = 0, D = 0;
    TDF_RETURN_IF_ERROR(kernels::CheckIndexedRowsTable(like, "IndexedRowsSplit", &R, &D));
    if (rows.dtype() != like.dtype()) return kernels::DTypeMismatchError(rows.dtype(), like.dtype());
    absl::Status s = like.dtype() == DType::kFloat32 ? CheckRowsOf<float>(rows, R, D, "IndexedRowsSplit", 0)
                                                      : CheckRowsOf<double>(rows, R, D, "IndexedRowsSplit", 0);
    if (!s.ok()) return s;
    const int64_t m = rows.shape().dim(0);
    Shape value_shape({m});
    for (int d = 1; d < like.rank(); ++d) value_shape.AddDim(like.shape().dim(d));
    TDF_ASSIGN_OR_RETURN(Tensor indices, Tensor::Empty(DType::kInt64, Shape({m})));
    TDF_ASSIGN_OR_RETURN(Tensor values, Tensor::Empty(like.dtype(), value_shape));
    if (like.dtype() == DType::kFloat32) {
      Split<float>(rows, D, indices, values);
    } else {
      Split<double>(rows, D, indices, values);
    }
    ctx.set_output(0, std::move(indices));
    ctx.set_output(1, std::move(values));
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static void Split(const Tensor& rows, int64_t D, Tensor& indices, Tensor& values) {
    const T* p = rows.data<T>();
    int64_t* idx = indices.mutable_data<int64_t>();
    T* v = values.mutable_data<T>();
    for (int64_t r = 0; r < rows.shape().dim(0); ++r, p += 1 + D, v += D) {
      idx[r] = DecodeIndex(p);
      if (D > 0) std::memcpy(v, p + 1, sizeof(T) * D);
    }
  }
};

}  // namespace

void RegisterIndexedRowsKernels(KernelRegistry& r) {
  kernels::RegisterCpu<IndexedRowsKernel>(r, "IndexedRows");
  kernels::RegisterCpu<IndexedRowsConcatKernel>(r, "IndexedRowsConcat");
  kernels::RegisterCpu<IndexedRowsSumKernel>(r, "IndexedRowsSum");
  kernels::RegisterCpu<IndexedRowsSplitKernel>(r, "IndexedRowsSplit");
}

}  // namespace tdf
