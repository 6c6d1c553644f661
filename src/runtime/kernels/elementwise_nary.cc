// Elementwise CPU kernels of more than two inputs: Select(cond, x, y), with
// NumPy broadcasting, and AddN, the sum of same-shaped inputs (which skips
// known zeros). Integer sums wrap (elementwise.h).
#include <array>

#include <Eigen/Core>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "runtime/kernels/elementwise.h"
#include "runtime/kernels/kernel_util.h"

namespace tdf {
namespace {

using kernels::CheckCpuInputs;
using kernels::CheckInputs;
using kernels::Dims;
using kernels::InvalidInputError;
using kernels::kIsFloat;
using kernels::WrapAdd;

// ---------------------------------------------------------------------------
// Select(cond, x, y)

class SelectKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    TDF_RETURN_IF_ERROR(CheckInputs(ctx, 3));
    const Tensor& c = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    TDF_RETURN_IF_ERROR(c.CheckDType(DType::kBool, "Select condition"));
    if (!x.valid()) return InvalidInputError(1);
    if (x.dtype() != y.dtype())
      return absl::InvalidArgumentError(
          absl::StrCat("dtype mismatch: x is ", DTypeName(x.dtype()), ", y is ", DTypeName(y.dtype())));
    // One condition for same-shaped branches: forward a branch, no copy.
    if (c.num_elements() == 1 && x.shape() == y.shape() && c.rank() <= x.rank()) {
      ctx.set_output(0, c.scalar<bool>() ? x : y);
      return absl::OkStatus();
    }
    const Shape* shapes[] = {&c.shape(), &x.shape(), &y.shape()};
    TDF_ASSIGN_OR_RETURN(Shape so, kernels::BroadcastShapes(shapes));
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x.dtype(), so));
    std::array<Dims, 3> strides = {kernels::BroadcastStrides(c.shape(), so), kernels::BroadcastStrides(x.shape(), so),
                                   kernels::BroadcastStrides(y.shape(), so)};
    const bool* pc = c.data<bool>();
    DispatchDType(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.data<T>();
      const T* py = y.data<T>();
      T* po = out.mutable_data<T>();
      kernels::ForEachBroadcast<3>(so, strides, [&](int64_t o, int64_t ic, int64_t ix, int64_t iy) {
        po[o] = pc[ic] ? px[ix] : py[iy];
      });
    });
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// AddN: sum of same-shaped inputs.

class AddNKernel final : public OpKernel {
 public:
  absl::Status Compute(KernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (ABSL_PREDICT_FALSE(n < 1)) return kernels::MinArityError(1, n);
    const Tensor& first = ctx.input(0);
    const DType dtype = first.dtype();
    bool all_inline = true;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != dtype)
        return absl::InvalidArgumentError(
            absl::StrCat("dtype mismatch: input 0 is ", DTypeName(dtype), ", input ", i, " is ", DTypeName(t.dtype())));
      all_inline &= t.is_inline_scalar();
    }
    if (!first.valid()) return InvalidInputError(0);
    if (dtype == DType::kBool) return kernels::UnsupportedDTypeError("AddN", dtype);
    if (n == 1) {
      TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
      ctx.set_output(0, first);
      return absl::OkStatus();
    }
    absl::Status status;
    if (all_inline) {
      DispatchDType(dtype, [&](auto zero) {
        using T = decltype(zero);
        T acc = first.scalar<T>();
        for (int i = 1; i < n; ++i) acc = WrapAdd(acc, ctx.input(i).scalar<T>());
        ctx.set_output(0, Tensor::Scalar<T>(acc));
      });
      return status;
    }
    TDF_RETURN_IF_ERROR(CheckCpuInputs(ctx));
    for (int i = 1; i < n; ++i) {
      if (ctx.input(i).shape() != first.shape())
        return absl::InvalidArgumentError(absl::StrCat("AddN inputs must have the same shape: input 0 is ",
                                                       first.shape().DebugString(), ", input ", i, " is ",
                                                       ctx.input(i).shape().DebugString()));
    }
    // Known zeros (gradients of unused branches) add nothing: skip them, and
    // pass a lone remaining term through without copying.
    absl::InlinedVector<const Tensor*, 8> terms;
    for (int i = 0; i < n; ++i)
      if (!kernels::IsSharedZeros(ctx.input(i))) terms.push_back(&ctx.input(i));
    if (terms.size() <= 1) {
      ctx.set_output(0, terms.empty() ? first : *terms[0]);
      return status;
    }
    TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(dtype, first.shape()));
    DispatchDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      const int64_t m = first.num_elements();
      T* po = out.mutable_data<T>();
      if constexpr (kIsFloat<T>) {
        using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
        auto in = [&](size_t k) { return Eigen::Map<const Arr>(terms[k]->data<T>(), m); };
        Eigen::Map<Arr> o(po, m);
        // Up to three more terms per pass over the output, added left to
        // right (the same rounding as one term at a time).
        const size_t t = terms.size();
        size_t k = 2;
        if (t == 2) {
          o = in(0) + in(1);
        } else {
          o = in(0) + in(1) + in(2);
          k = 3;
        }
        for (; k + 3 <= t; k += 3) o = o + in(k) + in(k + 1) + in(k + 2);
        if (k + 2 == t) o = o + in(k) + in(k + 1);
        if (k + 1 == t) o = o + in(k);
      } else {
        const T* p0 = terms[0]->data<T>();
        for (int64_t j = 0; j < m; ++j) po[j] = p0[j];
        for (size_t k = 1; k < terms.size(); ++k) {
          const T* pk = terms[k]->data<T>();
          for (int64_t j = 0; j < m; ++j) po[j] = WrapAdd(po[j], pk[j]);
        }
      }
    });
    ctx.set_output(0, std::move(out));
    return status;
  }
};

}  // namespace

void RegisterElementwiseNaryKernels(KernelRegistry& r) {
  kernels::RegisterSimpleCpu<SelectKernel>(r, "Select");
  kernels::RegisterSimpleCpu<AddNKernel>(r, "AddN");
}

}  // namespace tdf
