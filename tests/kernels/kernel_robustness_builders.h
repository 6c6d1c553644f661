// Valid cases, or nearly, for every op the kernel robustness test calls
// (kernel_robustness.h says what it checks): without them random inputs
// would rarely get past the first check of the ops with several inputs.
// MakeCase draws an op's case: one of these, mutated or not, or a wholly
// random one.
#ifndef TDF_TESTS_KERNELS_KERNEL_ROBUSTNESS_BUILDERS_H_
#define TDF_TESTS_KERNELS_KERNEL_ROBUSTNESS_BUILDERS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_robustness.h"
#include "runtime/kernels/kernel_util.h"
#include "tdf/op_registry.h"
#include "tdf/tensor.h"

namespace tdf {
namespace kernel_robustness {

using Builder = std::function<Case(Gen&)>;

inline Case Binary(Gen& g, DType t) {
  Shape s = g.AnyShape();
  Shape s2 = g.Chance(0.5) ? s : g.BroadcastableTo(s);
  if (g.Chance(0.5)) std::swap(s, s2);
  return {{g.Fill(t, s), g.Fill(t, s2)}, {}};
}

// A factorization of `s`'s element count for Reshape: dims shuffled,
// merged, padded with 1s, one of them -1 now and then.
inline std::vector<int64_t> ReshapeTarget(Gen& g, const Shape& s) {
  std::vector<int64_t> dims(s.dims().begin(), s.dims().end());
  std::shuffle(dims.begin(), dims.end(), g.rng());
  while (dims.size() > 1 && g.Chance(0.3)) {
    const int64_t last = dims.back();
    dims.pop_back();
    dims.back() *= last;
  }
  if (g.Chance(0.3)) dims.insert(dims.begin() + g.Uniform(0, static_cast<int64_t>(dims.size())), 1);
  if (!dims.empty() && g.Chance(0.4)) dims[g.Uniform(0, static_cast<int64_t>(dims.size()) - 1)] = -1;
  return dims;
}

// Shapes for Concat along `axis` (shared dims, the axis dim varying).
inline std::vector<Shape> ConcatShapes(Gen& g, const Shape& base, int axis, int n) {
  std::vector<Shape> out;
  for (int i = 0; i < n; ++i) {
    Shape s = base;
    s.set_dim(axis, g.Dim());
    out.push_back(s);
  }
  return out;
}

// A row of indexed rows: the index's bits in element 0 (indexed_rows.cc).
inline Tensor IndexedRowsOf(Gen& g, DType t, int64_t m, int64_t D, int64_t R) {
  Tensor rows = g.Fill(t, Shape({m, 1 + D}));
  for (int64_t r = 0; r < m; ++r) {
    int64_t index = R > 0 ? g.Uniform(0, R - 1) : 0;
    if (g.Chance(0.05)) index = g.Pick<int64_t>({-1, R, std::numeric_limits<int32_t>::max()});
    char* row = static_cast<char*>(rows.raw_mutable_data()) + r * (1 + D) * DTypeSize(t);
    if (t == DType::kFloat32) {
      const int32_t i = static_cast<int32_t>(index);
      std::memcpy(row, &i, sizeof(i));
    } else {
      std::memcpy(row, &index, sizeof(index));
    }
  }
  return rows;
}

inline int64_t RowSize(const Shape& s) {
  int64_t d = 1;
  for (int i = 1; i < s.rank(); ++i) d *= s.dim(i);
  return d;
}

// Cases that are valid, or nearly, for each op: without them random inputs
// would rarely get past the first check of the ops with several inputs.
inline const std::map<std::string, Builder>& ValidBuilders() {
  static const auto* const builders = [] {
    auto* b = new std::map<std::string, Builder>;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Maximum", "Minimum", "Pow"})
      (*b)[op] = [](Gen& g) { return Binary(g, g.NumericDType()); };
    for (const char* op : {"TanhGrad", "SigmoidGrad", "ReluGrad"})
      (*b)[op] = [](Gen& g) { return Binary(g, g.FloatDType()); };
    for (const char* op : {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"})
      (*b)[op] = [](Gen& g) { return Binary(g, g.AnyDType()); };
    for (const char* op : {"LogicalAnd", "LogicalOr"}) (*b)[op] = [](Gen& g) { return Binary(g, DType::kBool); };
    for (const char* op : {"Neg", "Abs", "Square", "Sign"})
      (*b)[op] = [](Gen& g) { return Case{{g.Fill(g.NumericDType(), g.AnyShape())}, {}}; };
    for (const char* op : {"Exp", "Log", "Tanh", "Sigmoid", "Relu", "Sqrt", "Rsqrt", "Reciprocal", "Softmax"})
      (*b)[op] = [](Gen& g) { return Case{{g.Fill(g.FloatDType(), g.AnyShape())}, {}}; };
    (*b)["LogicalNot"] = [](Gen& g) { return Case{{g.Fill(DType::kBool, g.AnyShape())}, {}}; };
    (*b)["LoopCond"] = [](Gen& g) { return Case{{g.Fill(DType::kBool, Shape())}, {}}; };
    for (const char* op : {"Identity", "ZerosLike", "OnesLike", "CopyToHost"})
      (*b)[op] = [](Gen& g) { return Case{{g.Chance(0.2) ? g.SharedZeros(g.AnyDType()) : g.AnyTensor()}, {}}; };
    (*b)["CopyToDevice"] = [](Gen& g) { return Case{{g.AnyTensor()}, {{"device", "cuda:0"}}}; };
    (*b)["NoOp"] = [](Gen&) { return Case{}; };
    (*b)["Const"] = [](Gen& g) {
      Tensor v = g.AnyTensor();
      return Case{{}, {{"value", v}, {"dtype", v.dtype()}}};
    };
    (*b)["Cast"] = [](Gen& g) { return Case{{g.AnyTensor()}, {{"DstT", g.AnyDType()}}}; };
    (*b)["Select"] = [](Gen& g) {
      const DType t = g.AnyDType();
      Shape s = g.AnyShape();
      return Case{{g.Fill(DType::kBool, g.BroadcastableTo(s)), g.Fill(t, g.Chance(0.5) ? s : g.BroadcastableTo(s)),
                   g.Fill(t, g.Chance(0.5) ? s : g.BroadcastableTo(s))},
                  {}};
    };
    (*b)["AddN"] = [](Gen& g) {
      const DType t = g.NumericDType();
      const bool big = g.Chance(0.2);
      Shape s = big ? g.SharedZeros(t).shape() : g.AnyShape();
      Case c;
      for (int i = 0, n = static_cast<int>(g.Uniform(1, 5)); i < n; ++i)
        c.inputs.push_back(big && g.Chance(0.5) ? *kernels::Zeros(t, s) : g.Fill(t, s));
      return c;
    };
    for (const char* op : {"MatMul", "MatMulAdd"}) {
      const bool add = std::string(op) == "MatMulAdd";
      (*b)[op] = [add](Gen& g) {
        const DType t = g.FloatDType();
        const bool ta = g.Chance(0.3), tb = g.Chance(0.3);
        // Now and then a product big enough that its zero addends are shared
        // zeros, or to be split among workers (kernels::ParallelFor).
        const bool parallel = g.Chance(0.03);
        const int64_t m = parallel || g.Chance(0.1) ? 64 : g.Dim(), k = parallel ? 64 : g.Dim(),
                      n = parallel ? 64 : g.Chance(0.1) ? 8 : g.Dim();
        Case c{{g.Fill(t, ta ? Shape({k, m}) : Shape({m, k})), g.Fill(t, tb ? Shape({n, k}) : Shape({k, n}))},
               {{"transpose_a", ta}, {"transpose_b", tb}}};
        if (add)
          for (int i = 0, a = static_cast<int>(g.Uniform(0, 3)); i < a; ++i)
            c.inputs.push_back(g.Chance(0.3) ? *kernels::Zeros(t, Shape({m, n})) : g.Fill(t, Shape({m, n})));
        return c;
      };
    }
    (*b)["OuterRowsConcat"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const int64_t K = g.Dim(), N = g.Dim();
      Case c{{g.Fill(t, Shape({K, N}))}, {}};
      for (int i = 0, n = static_cast<int>(g.Uniform(0, 4)); i < n; ++i)
        c.inputs.push_back(g.Fill(t, Shape({g.Dim(), K + N})));
      return c;
    };
    (*b)["OuterRowsSum"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const bool parallel = g.Chance(0.03);  // big enough for kernels::ParallelFor
      const int64_t K = parallel ? 64 : g.Dim(), N = parallel ? 64 : g.Dim(), m = parallel ? 64 : g.Dim();
      return Case{{g.Fill(t, Shape({m, K + N})), g.Fill(t, Shape({K, N}))}, {}};
    };
    (*b)["IndexedRows"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const Shape p = g.AnyShape(1, 3);
      Tensor idx = g.Indices(g.IndexDType(), g.AnyShape(0, 2), p.dim(0));
      Shape dy = idx.shape();
      for (int d = 1; d < p.rank(); ++d) dy.AddDim(p.dim(d));
      return Case{{g.Fill(t, p), idx, g.Fill(t, dy)}, {}};
    };
    (*b)["IndexedRowsConcat"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const Shape p = g.AnyShape(1, 3);
      Case c{{g.Fill(t, p)}, {}};
      for (int i = 0, n = static_cast<int>(g.Uniform(0, 4)); i < n; ++i)
        c.inputs.push_back(IndexedRowsOf(g, t, g.Dim(), RowSize(p), p.dim(0)));
      return c;
    };
    for (const char* op : {"IndexedRowsSum", "IndexedRowsSplit"})
      (*b)[op] = [](Gen& g) {
        const DType t = g.FloatDType();
        const Shape p = g.AnyShape(1, 3);
        return Case{{IndexedRowsOf(g, t, g.Dim(), RowSize(p), p.dim(0)), g.Fill(t, p)}, {}};
      };
    for (const char* op : {"Sum", "Mean", "Max"})
      (*b)[op] = [](Gen& g) {
        Tensor x = g.Fill(g.NumericDType(), g.AnyShape());
        Case c{{x}, {{"keep_dims", g.Chance(0.5)}}};
        if (g.Chance(0.8)) {
          std::vector<int64_t> axes;
          for (int d = 0; d < x.rank(); ++d)
            if (g.Chance(0.5)) axes.push_back(g.Chance(0.3) ? d - x.rank() : d);
          c.attrs["axes"] = axes;
        }
        return c;
      };
    (*b)["Reshape"] = [](Gen& g) {
      Tensor x = g.AnyTensor();
      return Case{{x}, {{"shape", ReshapeTarget(g, x.shape())}}};
    };
    (*b)["ReshapeLike"] = [](Gen& g) {
      Tensor x = g.AnyTensor();
      Shape like;
      for (int64_t d : ReshapeTarget(g, x.shape())) like.AddDim(d < 0 ? x.num_elements() : d);
      return Case{{x, g.Fill(g.AnyDType(), like)}, {}};
    };
    (*b)["Transpose"] = [](Gen& g) {
      Tensor x = g.AnyTensor();
      Case c{{x}, {}};
      if (g.Chance(0.8)) {
        std::vector<int64_t> perm(x.rank());
        for (int i = 0; i < x.rank(); ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), g.rng());
        c.attrs["perm"] = perm;
      }
      return c;
    };
    (*b)["Concat"] = [](Gen& g) {
      const DType t = g.AnyDType();
      const Shape base = g.AnyShape(1, 4);
      const int axis = static_cast<int>(g.Uniform(0, base.rank() - 1));
      Case c{{}, {{"axis", g.Chance(0.3) ? int64_t{axis - base.rank()} : int64_t{axis}}}};
      for (const Shape& s : ConcatShapes(g, base, axis, static_cast<int>(g.Uniform(1, 4))))
        c.inputs.push_back(g.Fill(t, s));
      return c;
    };
    (*b)["ConcatGrad"] = [](Gen& g) {
      const DType t = g.AnyDType();
      const Shape base = g.AnyShape(1, 4);
      const int axis = static_cast<int>(g.Uniform(0, base.rank() - 1));
      Case c{{Tensor()}, {{"axis", g.Chance(0.3) ? int64_t{axis - base.rank()} : int64_t{axis}}}};
      int64_t total = 0;
      for (const Shape& s : ConcatShapes(g, base, axis, static_cast<int>(g.Uniform(1, 4)))) {
        c.inputs.push_back(g.Fill(t, s));
        total += s.dim(axis);
      }
      Shape dy = base;
      dy.set_dim(axis, total);
      c.inputs[0] = g.Fill(t, dy);
      return c;
    };
    for (const char* op : {"Slice", "SliceGrad"}) {
      const bool grad = std::string(op) == "SliceGrad";
      (*b)[op] = [grad](Gen& g) {
        const DType t = grad ? g.NumericDType() : g.AnyDType();
        Tensor x = g.Fill(t, g.AnyShape());
        std::vector<int64_t> begin, size;
        Shape slice;
        for (int d = 0; d < x.rank(); ++d) {
          const int64_t dim = x.shape().dim(d);
          begin.push_back(g.Uniform(0, dim));
          const int64_t s = g.Uniform(0, dim - begin.back());
          size.push_back(g.Chance(0.2) && s == dim - begin.back() ? -1 : s);
          slice.AddDim(s);
        }
        Case c{{x}, {{"begin", begin}, {"size", size}}};
        if (grad) c.inputs.push_back(g.Fill(t, slice));
        return c;
      };
    }
    for (const char* op : {"Gather", "GatherGrad"}) {
      const bool grad = std::string(op) == "GatherGrad";
      (*b)[op] = [grad](Gen& g) {
        const DType t = grad ? g.NumericDType() : g.AnyDType();
        Tensor params = g.Fill(t, g.AnyShape(1, 4));
        const int axis = static_cast<int>(g.Uniform(0, params.rank() - 1));
        Tensor idx = g.Indices(g.IndexDType(), g.AnyShape(0, 2), params.shape().dim(axis));
        Case c{{params, idx}, {}};
        if (g.Chance(0.8)) c.attrs["axis"] = g.Chance(0.3) ? int64_t{axis - params.rank()} : int64_t{axis};
        else if (axis != 0) c.attrs["axis"] = int64_t{axis};
        if (grad) {
          Shape dy;
          for (int d = 0; d < axis; ++d) dy.AddDim(params.shape().dim(d));
          for (int64_t d : idx.shape().dims()) dy.AddDim(d);
          for (int d = axis + 1; d < params.rank(); ++d) dy.AddDim(params.shape().dim(d));
          c.inputs.push_back(g.Fill(t, dy));
        }
        return c;
      };
    }
    (*b)["SoftmaxCrossEntropy"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const Shape s = g.AnyShape(1, 4);
      return Case{{g.Fill(t, s), g.Fill(t, s)}, {}};
    };
    (*b)["BroadcastTo"] = [](Gen& g) {
      const Shape s = g.AnyShape();
      return Case{{g.Fill(g.AnyDType(), g.BroadcastableTo(s)), g.Fill(g.AnyDType(), s)}, {}};
    };
    (*b)["SumToShapeOf"] = [](Gen& g) {
      const Shape s = g.AnyShape();
      // x: s with its 1s widened and leading dims added.
      Shape x;
      for (int i = 0, lead = static_cast<int>(g.Uniform(0, 2)); i < lead && s.rank() + i < 4; ++i) x.AddDim(g.Dim());
      for (int64_t d : s.dims()) x.AddDim(d == 1 && g.Chance(0.5) ? g.Dim() : d);
      const DType t = g.NumericDType();
      return Case{{g.Fill(t, x), g.Fill(g.Chance(0.8) ? t : g.AnyDType(), s)}, {}};
    };
    return b;
  }();
  return *builders;
}

inline Case MakeCase(Gen& g, const std::string& op, const OpSchema& schema) {
  auto it = ValidBuilders().find(op);
  if (it == ValidBuilders().end() || g.Chance(0.3)) return RandomCase(g, schema);
  Case c = it->second(g);
  if (g.Chance(0.6)) Mutate(g, schema, c);
  return c;
}

}  // namespace kernel_robustness
}  // namespace tdf

#endif  // TDF_TESTS_KERNELS_KERNEL_ROBUSTNESS_BUILDERS_H_
