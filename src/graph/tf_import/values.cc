// TensorFlow attribute values, dtypes, shapes and tensors -> tdf's
// (importer.h), with TensorFlow's own decoding rules and tdf's limits on
// untrusted input (tdf/serialize.h).
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/tf_import/importer.h"
#include "tdf/serialize.h"
#include "tdf/status.h"

namespace tdf {
namespace tf_import {

absl::Status TfNode::Error(absl::StatusCode code, absl::string_view message) const {
  NodeDef label;
  label.name = def->name();
  label.op = def->op();
  return NodeError(label, code, message);
}

const tfpb::AttrValue* TfNode::FindAttr(absl::string_view name) const {
  if (absl::StartsWith(name, "_")) return nullptr;
  auto it = def->attr().find(std::string(name));
  return it == def->attr().end() ? nullptr : &it->second;
}

absl::StatusOr<DType> ConvertDType(int value, const TfNode& node, absl::string_view what) {
  switch (value) {
    case tfpb::DT_FLOAT: return DType::kFloat32;
    case tfpb::DT_DOUBLE: return DType::kFloat64;
    case tfpb::DT_INT32: return DType::kInt32;
    case tfpb::DT_INT64: return DType::kInt64;
    case tfpb::DT_BOOL: return DType::kBool;
    default: break;
  }
  const std::string name =
      tfpb::DataType_IsValid(value) ? tfpb::DataType_Name(static_cast<tfpb::DataType>(value)) : absl::StrCat(value);
  if (value == tfpb::DT_INVALID) return node.Invalid(absl::StrCat(what, " is DT_INVALID"));
  return node.Unsupported(absl::StrCat(what, " is ", name,
                                       ", a dtype tdf does not have (it has DT_FLOAT, DT_DOUBLE, DT_INT32, "
                                       "DT_INT64, DT_BOOL)"));
}

absl::StatusOr<std::optional<Shape>> ConvertShape(const tfpb::TensorShapeProto& p, const TfNode& node,
                                                  absl::string_view what) {
  if (p.unknown_rank()) {
    if (p.dim_size() > 0) return node.Invalid(absl::StrCat(what, ": unknown_rank with dimensions"));
    return std::optional<Shape>();
  }
  if (p.dim_size() > kMaxRank)
    return node.Invalid(absl::StrCat(what, ": rank ", p.dim_size(), " exceeds the limit of ", kMaxRank));
  Shape shape;
  for (const tfpb::TensorShapeProto::Dim& d : p.dim()) {
    if (d.size() < -1) return node.Invalid(absl::StrCat(what, ": dimension ", d.size(), " is negative"));
    shape.AddDim(d.size());
  }
  return std::optional<Shape>(std::move(shape));
}

namespace {

// TensorFlow's rule (Tensor::FromProto): n values fill the tensor; fewer
// fill it and the last repeats (the compressed form constant folding
// writes); none means zeros.
template <typename T, typename Field>
absl::Status FillTyped(const Field& values, int64_t n, Tensor& t, const TfNode& node, absl::string_view what) {
  T* dst = t.mutable_data<T>();
  const int64_t count = values.size();
  if (count > n) return node.Invalid(absl::StrCat(what, ": ", count, " values for a tensor of ", n, " elements"));
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = count == 0 ? T{} : static_cast<T>(values.Get(static_cast<int>(i < count ? i : count - 1)));
  }
  return absl::OkStatus();
}

int TypedValueCount(const tfpb::TensorProto& p) {
  return p.float_val_size() + p.double_val_size() + p.int_val_size() + p.int64_val_size() + p.bool_val_size() +
         p.half_val_size() + p.string_val_size() + p.scomplex_val_size() + p.dcomplex_val_size() +
         p.uint32_val_size() + p.uint64_val_size();
}

}  // namespace

absl::StatusOr<Tensor> ConvertTensor(const tfpb::TensorProto& p, const TfNode& node, absl::string_view what) {
  TDF_ASSIGN_OR_RETURN(DType dtype, ConvertDType(p.dtype(), node, absl::StrCat(what, " dtype")));
  TDF_ASSIGN_OR_RETURN(std::optional<Shape> maybe_shape, ConvertShape(p.tensor_shape(), node, what));
  if (!maybe_shape.has_value()) return node.Invalid(absl::StrCat(what, ": a tensor of unknown rank"));
  const Shape& shape = *maybe_shape;
  int64_t n = 1;
  bool has_zero = false;
  for (int64_t d : shape.dims()) {
    if (d < 0) return node.Invalid(absl::StrCat(what, ": dimension ", d, " is negative"));
    has_zero = has_zero || d == 0;
  }
  if (has_zero) {
    n = 0;
  } else {
    for (int64_t d : shape.dims()) {
      if (n > kMaxTensorElements / d)
        return node.Invalid(absl::StrCat(what, ": tensor of shape ", shape.DebugString(), " has more than ",
                                         kMaxTensorElements, " elements"));
      n *= d;
    }
  }
  int typed = 0;
  switch (dtype) {
    case DType::kBool: typed = p.bool_val_size(); break;
    case DType::kInt32: typed = p.int_val_size(); break;
    case DType::kInt64: typed = p.int64_val_size(); break;
    case DType::kFloat32: typed = p.float_val_size(); break;
    case DType::kFloat64: typed = p.double_val_size(); break;
    case DType::kInvalid: break;
  }
  if (TypedValueCount(p) != typed)
    return node.Invalid(absl::StrCat(what, ": values of another type in a ", DTypeName(dtype), " tensor"));
  const std::string& content = p.tensor_content();
  if (!content.empty() && typed > 0) return node.Invalid(absl::StrCat(what, ": both tensor_content and values"));
  const size_t elem = DTypeSize(dtype);
  if (!content.empty() && content.size() != static_cast<size_t>(n) * elem)
    return node.Invalid(absl::StrCat(what, ": tensor_content has ", content.size(), " bytes; ", DTypeName(dtype),
                                     shape.DebugString(), " needs ", static_cast<size_t>(n) * elem));
  if (content.empty() && typed < n && n > kMaxSplatElements)
    return node.Invalid(absl::StrCat(what, ": ", typed, " values for a tensor of ", n, " elements (at most ",
                                     kMaxSplatElements, " may be filled from fewer values)"));
  TDF_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(dtype, shape));
  if (!content.empty()) {
    if (dtype == DType::kBool) {
      bool* dst = t.mutable_data<bool>();
      for (int64_t i = 0; i < n; ++i) dst[i] = content[static_cast<size_t>(i)] != 0;
    } else {
      std::memcpy(t.raw_mutable_data(), content.data(), content.size());
    }
    return t;
  }
  absl::Status s;
  switch (dtype) {
    case DType::kBool: s = FillTyped<bool>(p.bool_val(), n, t, node, what); break;
    case DType::kInt32: s = FillTyped<int32_t>(p.int_val(), n, t, node, what); break;
    case DType::kInt64: s = FillTyped<int64_t>(p.int64_val(), n, t, node, what); break;
    case DType::kFloat32: s = FillTyped<float>(p.float_val(), n, t, node, what); break;
    case DType::kFloat64: s = FillTyped<double>(p.double_val(), n, t, node, what); break;
    case DType::kInvalid: break;
  }
  TDF_RETURN_IF_ERROR(s);
  return t;
}

absl::StatusOr<DType> TypeAttr(const TfNode& node, absl::string_view name) {
  const tfpb::AttrValue* a = node.FindAttr(name);
  if (a == nullptr) return node.Invalid(absl::StrCat("missing attribute '", name, "'"));
  if (a->value_case() != tfpb::AttrValue::kType)
    return node.Invalid(absl::StrCat("attribute '", name, "' is not a type"));
  return ConvertDType(a->type(), node, absl::StrCat("attr ", name));
}

std::optional<int64_t> IntAttr(const TfNode& node, absl::string_view name) {
  const tfpb::AttrValue* a = node.FindAttr(name);
  if (a == nullptr || a->value_case() != tfpb::AttrValue::kI) return std::nullopt;
  return a->i();
}

std::optional<bool> BoolAttr(const TfNode& node, absl::string_view name) {
  const tfpb::AttrValue* a = node.FindAttr(name);
  if (a == nullptr || a->value_case() != tfpb::AttrValue::kB) return std::nullopt;
  return a->b();
}

std::optional<std::string> StringAttr(const TfNode& node, absl::string_view name) {
  const tfpb::AttrValue* a = node.FindAttr(name);
  if (a == nullptr || a->value_case() != tfpb::AttrValue::kS) return std::nullopt;
  return a->s();
}

}  // namespace tf_import
}  // namespace tdf
