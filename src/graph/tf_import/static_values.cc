// What the importer knows of a TensorFlow body before it runs
// (importer.h BodyContext): constant values, and static shapes from
// Placeholder shapes and Const values. tdf takes axes, shapes and
// permutations as attributes, and TensorFlow graphs often compute them
// from shapes (tf.shape(x)[0], tf.stack([batch, -1])), so the importer folds
// those computations where their inputs are known.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/tf_import/importer.h"
#include "tdf/status.h"

namespace tdf {
namespace tf_import {
namespace {

using Dims = std::vector<int64_t>;

bool IsOneOf(const std::string& op, std::initializer_list<const char*> ops) {
  for (const char* o : ops) {
    if (op == o) return true;
  }
  return false;
}

// Ops whose output 0 has the shape of input 0.
bool KeepsShape(const std::string& op) {
  return IsOneOf(op, {"Identity", "Enter", "Exit", "NextIteration", "Switch", "StopGradient", "Snapshot",
                      "PreventGradient", "Neg", "Abs", "Square", "Sign", "Exp", "Log", "Tanh", "Sigmoid", "Relu",
                      "Sqrt", "Rsqrt", "Reciprocal", "Inv", "LogicalNot", "Cast", "ZerosLike", "OnesLike", "Softmax",
                      "BiasAdd", "TanhGrad", "SigmoidGrad"});
}

// Elementwise ops with broadcasting: the broadcast of their inputs' shapes.
bool Broadcasts(const std::string& op) {
  return IsOneOf(op, {"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "TruncateDiv", "FloorDiv", "Mod", "TruncateMod",
                      "FloorMod", "Maximum", "Minimum", "Pow", "SquaredDifference", "Less", "LessEqual", "Greater",
                      "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr", "SelectV2"});
}

std::optional<Dims> Broadcast(const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    int64_t d;
    if (da == 1) {
      d = db;
    } else if (db == 1 || db == -1 || da == db) {
      d = da;  // a -1 beside a known size n can only be n (or 1, giving n)
    } else if (da == -1) {
      d = db;
    } else {
      return std::nullopt;  // incompatible: the run reports it
    }
    out[out.size() - 1 - k] = d;
  }
  return out;
}

// The product of known (non-negative) dims; nullopt on overflow (dims
// come from untrusted shapes).
std::optional<int64_t> Product(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

bool FullyKnown(const Dims& d) {
  for (int64_t x : d) {
    if (x < 0) return false;
  }
  return true;
}

std::optional<std::vector<int64_t>> Ints(const std::optional<Tensor>& t) {
  if (!t.has_value() || t->rank() > 1) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t k = 0; k < t->num_elements(); ++k) {
    if (t->dtype() == DType::kInt32) {
      v.push_back(t->data<int32_t>()[k]);
    } else if (t->dtype() == DType::kInt64) {
      v.push_back(t->data<int64_t>()[k]);
    } else {
      return std::nullopt;
    }
  }
  return v;
}

absl::StatusOr<Tensor> IntTensor(const std::vector<int64_t>& v, DType dtype, bool scalar) {
  const Shape shape = scalar ? Shape() : Shape({static_cast<int64_t>(v.size())});
  if (dtype == DType::kInt64) return Tensor::FromVector<int64_t>(v, shape);
  std::vector<int32_t> narrow(v.begin(), v.end());
  return Tensor::FromVector<int32_t>(narrow, shape);
}

DType OutType(const TfNode& n) {
  const tfpb::AttrValue* a = n.FindAttr("out_type");
  return a != nullptr && a->value_case() == tfpb::AttrValue::kType && a->type() == tfpb::DT_INT64 ? DType::kInt64
                                                                                                    : DType::kInt32;
}

// Python's slice of a vector of `n` elements: x[begin:end:stride], with
// TensorFlow's masks (a set bit means "from the start" / "to the end").
std::optional<std::vector<int64_t>> SliceIndices(int64_t n, int64_t begin, int64_t end, int64_t stride,
                                                 bool begin_full, bool end_full) {
  if (stride == 0) return std::nullopt;
  auto clamp = [&](int64_t i) {
    if (i < 0) i += n;
    if (stride > 0) return std::max<int64_t>(0, std::min(i, n));
    return std::max<int64_t>(-1, std::min(i, n - 1));
  };
  const int64_t b = begin_full ? (stride > 0 ? 0 : n - 1) : clamp(begin);
  const int64_t e = end_full ? (stride > 0 ? n : -1) : clamp(end);
  std::vector<int64_t> out;
  for (int64_t i = b; stride > 0 ? i < e : i > e; i += stride) out.push_back(i);
  return out;
}

// Counts one level of BodyContext::follow_depth while in scope.
class FollowGuard {
 public:
  explicit FollowGuard(int& depth) : depth_(depth) { ++depth_; }
  ~FollowGuard() { --depth_; }
  bool too_deep() const { return depth_ > BodyContext::kMaxFollow; }

 private:
  int& depth_;
};

}  // namespace

std::optional<std::vector<int64_t>> BodyContext::StaticShape(absl::string_view input) const {
  FollowGuard guard(follow_depth);
  if (guard.too_deep()) return std::nullopt;
  absl::StatusOr<InputRef> ref = InputRef::Parse(input);
  if (!ref.ok() || ref->is_control) return std::nullopt;
  const std::string key = absl::StrCat(ref->node, ":", ref->port);
  if (auto it = shape_memo.find(key); it != shape_memo.end()) return it->second;
  shape_memo[key] = std::nullopt;  // in progress: a cycle (a loop's back edge) is unknown
  auto it = by_name.find(ref->node);
  if (it == by_name.end()) return std::nullopt;
  const TfNode& n = *it->second;
  const std::string& op = n.op();
  std::optional<Dims> out;
  if (op == "Const") {
    if (const tfpb::AttrValue* v = n.FindAttr("value"); v != nullptr && v->value_case() == tfpb::AttrValue::kTensor) {
      absl::StatusOr<std::optional<Shape>> s = ConvertShape(v->tensor().tensor_shape(), n, "value");
      if (s.ok() && s->has_value()) out = Dims((*s)->dims().begin(), (*s)->dims().end());
    }
  } else if (op == "Placeholder") {
    if (const tfpb::AttrValue* v = n.FindAttr("shape"); v != nullptr && v->value_case() == tfpb::AttrValue::kShape) {
      absl::StatusOr<std::optional<Shape>> s = ConvertShape(v->shape(), n, "shape");
      if (s.ok() && s->has_value()) out = Dims((*s)->dims().begin(), (*s)->dims().end());
    }
  } else if (op == "Merge") {
    if (ref->port == 1) {
      out = Dims{};
    } else if (!n.data.empty()) {
      // Known only when every input agrees; a loop's NextIteration input is
      // unknown while its Merge is computed, so loop variables are unknown.
      out = StaticShape(n.data[0]);
      for (size_t i = 1; i < n.data.size() && out.has_value(); ++i) {
        if (StaticShape(n.data[i]) != out) out = std::nullopt;
      }
    }
  } else if (KeepsShape(op) && !n.data.empty()) {
    out = StaticShape(n.data[0]);
  } else if (Broadcasts(op) && !n.data.empty()) {
    out = StaticShape(n.data[0]);
    for (size_t i = 1; i < n.data.size() && out.has_value(); ++i) {
      std::optional<Dims> other = StaticShape(n.data[i]);
      out = other.has_value() ? Broadcast(*out, *other) : std::nullopt;
    }
  } else if ((op == "Reshape" || op == "Fill" || op == "BroadcastTo") && n.data.size() == 2) {
    absl::StatusOr<std::optional<Tensor>> shape = ConstantValue(n.data[op == "Fill" ? 0 : 1]);
    if (shape.ok()) out = Ints(*shape);
    if (out.has_value() && op == "Reshape") {
      std::optional<Dims> in = StaticShape(n.data[0]);
      Dims known_dims;
      for (int64_t d : *out) {
        if (d >= 0) known_dims.push_back(d);
      }
      const std::optional<int64_t> known = Product(known_dims);
      const std::optional<int64_t> total = in.has_value() ? Product(*in) : std::nullopt;
      if (known_dims.size() + 1 == out->size() && known.has_value() && *known > 0 && total.has_value()) {
        for (int64_t& d : *out) {
          if (d < 0) d = *total / *known;
        }
      }
    }
  } else if (op == "MatMul" && n.data.size() == 2) {
    std::optional<Dims> a = StaticShape(n.data[0]), b = StaticShape(n.data[1]);
    if (a.has_value() && b.has_value() && a->size() == 2 && b->size() == 2) {
      const bool ta = BoolAttr(n, "transpose_a").value_or(false), tb = BoolAttr(n, "transpose_b").value_or(false);
      out = Dims{(*a)[ta ? 1 : 0], (*b)[tb ? 0 : 1]};
    }
  } else if (op == "Shape") {
    std::optional<Dims> in = n.data.empty() ? std::nullopt : StaticShape(n.data[0]);
    if (in.has_value()) out = Dims{static_cast<int64_t>(in->size())};
  } else if (op == "Size" || op == "Rank") {
    out = Dims{};
  } else if ((op == "ExpandDims" || op == "Squeeze") && !n.data.empty()) {
    absl::StatusOr<std::vector<int64_t>> dims = ExpandedOrSqueezed(n);
    if (dims.ok()) out = *dims;
  }
  shape_memo[key] = out;
  return out;
}

absl::StatusOr<std::vector<int64_t>> BodyContext::ExpandedOrSqueezed(const TfNode& n) const {
  std::optional<Dims> in = StaticShape(n.data[0]);
  const std::string known = [&] {
    if (!in.has_value()) return std::string("unknown rank");
    std::string s = "[";
    for (size_t i = 0; i < in->size(); ++i) absl::StrAppend(&s, i ? "," : "", (*in)[i] < 0 ? "?" : absl::StrCat((*in)[i]));
    return s + "]";
  }();
  if (!in.has_value())
    return n.Unsupported(absl::StrCat("needs the rank of its input, which is not known at import (", known,
                                      "); tdf has no ", n.op(), " and imports it as a Reshape"));
  const int64_t rank = static_cast<int64_t>(in->size());
  Dims out;
  if (n.op() == "ExpandDims") {
    if (n.data.size() != 2) return n.Invalid("takes 2 data inputs (input, axis)");
    TDF_ASSIGN_OR_RETURN(std::optional<Tensor> axis_t, ConstantValue(n.data[1]));
    std::optional<std::vector<int64_t>> axis = Ints(axis_t);
    if (!axis.has_value() || axis->size() != 1)
      return n.Unsupported("input 1 (axis) is not a constant of one value");
    int64_t a = (*axis)[0];
    if (a < -rank - 1 || a > rank) return n.Invalid(absl::StrCat("axis ", a, " is out of range for rank ", rank));
    if (a < 0) a += rank + 1;
    out = *in;
    out.insert(out.begin() + a, 1);
  } else {
    std::vector<bool> drop(in->size(), false);
    const tfpb::AttrValue* dims = n.FindAttr("squeeze_dims");
    if (dims == nullptr) dims = n.FindAttr("axis");
    if (dims != nullptr && dims->value_case() == tfpb::AttrValue::kList && dims->list().i_size() > 0) {
      for (int64_t a : dims->list().i()) {
        if (a < -rank || a >= rank) return n.Invalid(absl::StrCat("squeeze dim ", a, " is out of range for rank ", rank));
        if (a < 0) a += rank;
        if ((*in)[a] > 1) return n.Invalid(absl::StrCat("squeezes dim ", a, " of size ", (*in)[a]));
        drop[a] = true;
      }
    } else {
      for (size_t i = 0; i < in->size(); ++i) {
        if ((*in)[i] < 0)
          return n.Unsupported(absl::StrCat("squeezes every dimension of size 1, and the input's shape ", known,
                                            " is not known at import"));
        drop[i] = (*in)[i] == 1;
      }
    }
    for (size_t i = 0; i < in->size(); ++i) {
      if (!drop[i]) out.push_back((*in)[i]);
    }
  }
  int unknown = 0;
  for (int64_t d : out) unknown += d < 0;
  if (unknown > 1)
    return n.Unsupported(absl::StrCat("the input's shape ", known, " has more than one dimension unknown at import; "
                                      "tdf imports ", n.op(), " as a Reshape, which allows one"));
  return out;
}

absl::StatusOr<std::optional<Tensor>> BodyContext::ConstantValue(absl::string_view input) const {
  FollowGuard guard(follow_depth);
  if (guard.too_deep()) return std::optional<Tensor>();
  // A chain of Identity/Enter nodes is followed as far as kMaxFollow (a
  // longer one is not known; one longer than the body would be a cycle).
  for (int hops = 0; hops < kMaxFollow; ++hops) {
    absl::StatusOr<InputRef> ref = InputRef::Parse(input);
    if (!ref.ok() || ref->is_control) return std::optional<Tensor>();
    auto it = by_name.find(ref->node);
    if (it == by_name.end()) return std::optional<Tensor>();
    const TfNode& n = *it->second;
    const std::string& op = n.op();
    if (ref->port != 0) return std::optional<Tensor>();
    if (op == "Const") {
      const tfpb::AttrValue* v = n.FindAttr("value");
      if (v == nullptr || v->value_case() != tfpb::AttrValue::kTensor)
        return n.Invalid("Const without a tensor attribute 'value'");
      TDF_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(v->tensor(), n, "attr value"));
      return std::optional<Tensor>(std::move(t));
    }
    if (op == "Shape" || op == "Size" || op == "Rank") {
      std::optional<Dims> in = n.data.empty() ? std::nullopt : StaticShape(n.data[0]);
      if (!in.has_value() || (op != "Rank" && !FullyKnown(*in))) return std::optional<Tensor>();
      const std::optional<int64_t> size = Product(*in);
      if (op == "Size" && !size.has_value()) return std::optional<Tensor>();
      const std::vector<int64_t> v = op == "Shape"  ? *in
                                     : op == "Size" ? std::vector<int64_t>{*size}
                                                    : std::vector<int64_t>{static_cast<int64_t>(in->size())};
      const DType dtype = op == "Rank" ? DType::kInt32 : OutType(n);
      for (int64_t x : v) {
        // TensorFlow fails such a Shape at run time; tdf does not know it.
        if (dtype == DType::kInt32 && x > std::numeric_limits<int32_t>::max()) return std::optional<Tensor>();
      }
      TDF_ASSIGN_OR_RETURN(Tensor t, IntTensor(v, dtype, op != "Shape"));
      return std::optional<Tensor>(std::move(t));
    }
    if (op == "Pack") {  // tf.stack of constant scalars (or equal-shaped constants) along axis 0
      if (IntAttr(n, "axis").value_or(0) != 0 || n.data.empty()) return std::optional<Tensor>();
      std::vector<Tensor> parts;
      for (const std::string& in : n.data) {
        TDF_ASSIGN_OR_RETURN(std::optional<Tensor> part, ConstantValue(in));
        if (!part.has_value()) return std::optional<Tensor>();
        if (!parts.empty() && (part->dtype() != parts[0].dtype() || part->shape() != parts[0].shape()))
          return n.Invalid("stacks values of different dtypes or shapes");
        parts.push_back(*std::move(part));
      }
      Shape shape({static_cast<int64_t>(parts.size())});
      for (int64_t d : parts[0].shape().dims()) shape.AddDim(d);
      TDF_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(parts[0].dtype(), shape));
      char* dst = static_cast<char*>(t.raw_mutable_data());
      for (const Tensor& p : parts) {
        std::memcpy(dst, p.raw_data(), p.bytes());
        dst += p.bytes();
      }
      return std::optional<Tensor>(std::move(t));
    }
    if (op == "StridedSlice") {  // of a constant vector: tf.shape(x)[0], x[1:], ...
      if (n.data.size() != 4 || IntAttr(n, "ellipsis_mask").value_or(0) != 0 ||
          IntAttr(n, "new_axis_mask").value_or(0) != 0)
        return std::optional<Tensor>();
      std::optional<std::vector<int64_t>> values, b, e, s;
      TDF_ASSIGN_OR_RETURN(std::optional<Tensor> x, ConstantValue(n.data[0]));
      values = Ints(x);
      for (auto [i, dst] : {std::pair{1, &b}, std::pair{2, &e}, std::pair{3, &s}}) {
        TDF_ASSIGN_OR_RETURN(std::optional<Tensor> v, ConstantValue(n.data[i]));
        *dst = Ints(v);
      }
      if (!values.has_value() || x->rank() != 1 || !b || !e || !s || b->size() != 1 || e->size() != 1 || s->size() != 1)
        return std::optional<Tensor>();
      const int64_t count = static_cast<int64_t>(values->size());
      std::vector<int64_t> picked;
      if (IntAttr(n, "shrink_axis_mask").value_or(0) & 1) {
        int64_t i = (*b)[0] < 0 ? (*b)[0] + count : (*b)[0];
        if (i < 0 || i >= count) return n.Invalid(absl::StrCat("index ", (*b)[0], " is out of range"));
        TDF_ASSIGN_OR_RETURN(Tensor t, IntTensor({(*values)[i]}, x->dtype(), /*scalar=*/true));
        return std::optional<Tensor>(std::move(t));
      }
      std::optional<std::vector<int64_t>> idx =
          SliceIndices(count, (*b)[0], (*e)[0], (*s)[0], IntAttr(n, "begin_mask").value_or(0) & 1,
                       IntAttr(n, "end_mask").value_or(0) & 1);
      if (!idx.has_value()) return n.Invalid("stride 0");
      for (int64_t i : *idx) picked.push_back((*values)[i]);
      TDF_ASSIGN_OR_RETURN(Tensor t, IntTensor(picked, x->dtype(), /*scalar=*/false));
      return std::optional<Tensor>(std::move(t));
    }
    const bool forwards = op == "Identity" || (op == "Enter" && BoolAttr(n, "is_constant").value_or(false));
    if (!forwards || n.data.size() != 1) return std::optional<Tensor>();
    input = n.data[0];
  }
  return std::optional<Tensor>();
}

}  // namespace tf_import
}  // namespace tdf
