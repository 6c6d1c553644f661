// IR <-> proto/graph.proto messages (proto_conversion.h): graphs with
// their function libraries, attributes of every kind, tensors of every
// dtype, named tensors.
#include "graph/proto_conversion.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tdf/status.h"

namespace tdf {
namespace serialization {

namespace pb = ::tdf::proto;

namespace {

absl::Status Malformed(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed graph: ", where, ": ", what));
}

// ---------------------------------------------------------------------------
// IR -> proto

absl::StatusOr<pb::DataType> ToProtoDType(DType dtype) {
  switch (dtype) {
    case DType::kInvalid: return pb::DT_INVALID;
    case DType::kBool: return pb::DT_BOOL;
    case DType::kInt32: return pb::DT_INT32;
    case DType::kInt64: return pb::DT_INT64;
    case DType::kFloat32: return pb::DT_FLOAT;
    case DType::kFloat64: return pb::DT_DOUBLE;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", static_cast<int>(dtype), " has no protobuf form"));
}

// proto3 enums are open: any int32 can arrive, so this is a full check.
absl::StatusOr<DType> FromProtoDType(int value, absl::string_view where) {
  switch (value) {
    case pb::DT_INVALID: return DType::kInvalid;
    case pb::DT_BOOL: return DType::kBool;
    case pb::DT_INT32: return DType::kInt32;
    case pb::DT_INT64: return DType::kInt64;
    case pb::DT_FLOAT: return DType::kFloat32;
    case pb::DT_DOUBLE: return DType::kFloat64;
  }
  return Malformed(where, absl::StrCat("unsupported DataType ", value));
}

// True if a float holds `v` exactly, so the TensorFlow field `f` can carry it.
bool FitsFloat(double v) {
  if (std::isnan(v)) return false;  // NaN payloads: keep every bit via f64
  if (std::isinf(v)) return true;
  if (std::fabs(v) > static_cast<double>(FLT_MAX)) return false;  // the cast would be undefined
  return static_cast<double>(static_cast<float>(v)) == v;  // -0.0 keeps its sign through the cast
}

bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int extra;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= n) return false;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// protobuf `string` fields must be UTF-8 (a reader rejects anything else), so
// the writer refuses up front rather than produce a file nobody can load.
absl::Status CheckName(absl::string_view what, absl::string_view value) {
  if (IsUtf8(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("cannot serialize ", what, ": not valid UTF-8"));
}

void ShapeToProto(const Shape& shape, pb::TensorShapeProto* out) {
  for (int64_t d : shape.dims()) out->add_dim()->set_size(d);
}

absl::Status TensorToProto(const Tensor& t, pb::TensorProto* out) {
  if (!t.valid()) return absl::OkStatus();  // DT_INVALID and nothing else
  if (!t.device().is_cpu())
    return absl::InvalidArgumentError(absl::StrCat("cannot serialize a tensor on ", t.device().ToString()));
  TDF_ASSIGN_OR_RETURN(pb::DataType dtype, ToProtoDType(t.dtype()));
  out->set_dtype(dtype);
  ShapeToProto(t.shape(), out->mutable_tensor_shape());
  // Typed fields, not tensor_content: readable in text form and free of
  // byte-order questions. Loaders accept both.
  const int64_t n = t.num_elements();
  switch (t.dtype()) {
    case DType::kBool: {
      const bool* d = t.data<bool>();
      for (int64_t i = 0; i < n; ++i) out->add_bool_val(d[i]);
      break;
    }
    case DType::kInt32: {
      const int32_t* d = t.data<int32_t>();
      out->mutable_int_val()->Add(d, d + n);
      break;
    }
    case DType::kInt64: {
      const int64_t* d = t.data<int64_t>();
      for (int64_t i = 0; i < n; ++i) out->add_int64_val(d[i]);
      break;
    }
    case DType::kFloat32: {
      const float* d = t.data<float>();
      out->mutable_float_val()->Add(d, d + n);
      break;
    }
    case DType::kFloat64: {
      const double* d = t.data<double>();
      out->mutable_double_val()->Add(d, d + n);
      break;
    }
    case DType::kInvalid: break;
  }
  return absl::OkStatus();
}

absl::Status AttrToProto(const AttrValue& attr, pb::AttrValue* out) {
  struct Visitor {
    pb::AttrValue* out;
    absl::Status operator()(std::monostate) { return absl::OkStatus(); }
    absl::Status operator()(int64_t v) {
      out->set_i(v);
      return absl::OkStatus();
    }
    absl::Status operator()(double v) {
      if (FitsFloat(v)) {
        out->set_f(static_cast<float>(v));
      } else {
        out->set_f64(v);
      }
      return absl::OkStatus();
    }
    absl::Status operator()(bool v) {
      out->set_b(v);
      return absl::OkStatus();
    }
    absl::Status operator()(const std::string& v) {
      out->set_s(v);
      return absl::OkStatus();
    }
    absl::Status operator()(DType v) {
      TDF_ASSIGN_OR_RETURN(pb::DataType t, ToProtoDType(v));
      out->set_type(t);
      return absl::OkStatus();
    }
    absl::Status operator()(const Shape& v) {
      ShapeToProto(v, out->mutable_shape());
      return absl::OkStatus();
    }
    absl::Status operator()(const Tensor& v) { return TensorToProto(v, out->mutable_tensor()); }
    absl::Status operator()(const std::vector<int64_t>& v) {
      pb::AttrValue::ListValue* list = out->mutable_list();
      list->mutable_i()->Add(v.begin(), v.end());
      if (v.empty()) list->set_empty_list_kind("int");
      return absl::OkStatus();
    }
    absl::Status operator()(const std::vector<double>& v) {
      pb::AttrValue::ListValue* list = out->mutable_list();
      bool all_float = true;
      for (double d : v) all_float = all_float && FitsFloat(d);
      for (double d : v) {
        if (all_float) {
          list->add_f(static_cast<float>(d));
        } else {
          list->add_f64(d);
        }
      }
      if (v.empty()) list->set_empty_list_kind("float");
      return absl::OkStatus();
    }
    absl::Status operator()(const std::vector<std::string>& v) {
      pb::AttrValue::ListValue* list = out->mutable_list();
      for (const std::string& s : v) list->add_s(s);
      if (v.empty()) list->set_empty_list_kind("string");
      return absl::OkStatus();
    }
    absl::Status operator()(const std::vector<DType>& v) {
      pb::AttrValue::ListValue* list = out->mutable_list();
      for (DType d : v) {
        TDF_ASSIGN_OR_RETURN(pb::DataType t, ToProtoDType(d));
        list->add_type(t);
      }
      if (v.empty()) list->set_empty_list_kind("type");
      return absl::OkStatus();
    }
  };
  return std::visit(Visitor{out}, attr.value());
}

absl::Status NodeToProto(const NodeDef& node, pb::NodeDef* out) {
  const std::string label = NodeLabel(node);
  TDF_RETURN_IF_ERROR(CheckName(absl::StrCat(label, " name"), node.name));
  TDF_RETURN_IF_ERROR(CheckName(absl::StrCat(label, " op"), node.op));
  TDF_RETURN_IF_ERROR(CheckName(absl::StrCat(label, " device"), node.device));
  out->set_name(node.name);
  out->set_op(node.op);
  out->set_device(node.device);
  for (const std::string& in : node.input) {
    TDF_RETURN_IF_ERROR(CheckName(absl::StrCat(label, " input"), in));
    out->add_input(in);
  }
  auto* attrs = out->mutable_attr();
  for (const auto& [key, value] : node.attr) {
    TDF_RETURN_IF_ERROR(CheckName(absl::StrCat(label, " attribute name"), key));
    absl::Status s = AttrToProto(value, &(*attrs)[key]);
    if (!s.ok()) return NodeError(node, s.code(), absl::StrCat("attribute '", key, "': ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ArgsToProto(const std::vector<ArgDef>& args, absl::string_view fn,
                         google::protobuf::RepeatedPtrField<pb::OpDef::ArgDef>* out) {
  for (const ArgDef& a : args) {
    TDF_RETURN_IF_ERROR(CheckName(absl::StrCat("function '", fn, "' argument name"), a.name));
    pb::OpDef::ArgDef* p = out->Add();
    p->set_name(a.name);
    TDF_ASSIGN_OR_RETURN(pb::DataType t, ToProtoDType(a.type));
    p->set_type(t);
  }
  return absl::OkStatus();
}

}  // namespace

// Converts as much as it can; the first error is returned, and `out` holds
// everything before it (GraphToText shows that partial form).
absl::Status GraphToProto(const Graph& graph, pb::GraphDef* out) {
  out->mutable_versions()->set_producer(kGraphFormatVersion);
  out->mutable_versions()->set_min_consumer(kGraphFormatVersion);
  for (const NodeDef& node : graph.node) TDF_RETURN_IF_ERROR(NodeToProto(node, out->add_node()));
  for (const auto& [name, fn] : graph.library.functions()) {
    if (name.empty()) return absl::InvalidArgumentError("cannot serialize a function with an empty name");
    TDF_RETURN_IF_ERROR(CheckName("function name", name));
    pb::FunctionDef* f = out->mutable_library()->add_function();
    f->mutable_signature()->set_name(name);
    TDF_RETURN_IF_ERROR(ArgsToProto(fn.signature.inputs, name, f->mutable_signature()->mutable_input_arg()));
    TDF_RETURN_IF_ERROR(ArgsToProto(fn.signature.outputs, name, f->mutable_signature()->mutable_output_arg()));
    if (!fn.defined) {
      if (!fn.node.empty())
        return absl::InvalidArgumentError(
            absl::StrCat("function '", name, "' is declared only but has ", fn.node.size(), " body nodes"));
      f->set_declared_only(true);
    }
    for (const NodeDef& node : fn.node) {
      absl::Status s = NodeToProto(node, f->add_node_def());
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat("function '", name, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// proto -> IR. Every size is checked before anything is allocated from it.

namespace {

absl::StatusOr<Shape> ShapeFromProto(const pb::TensorShapeProto& p, int64_t min_dim, absl::string_view where) {
  if (p.dim_size() > kMaxRank)
    return Malformed(where, absl::StrCat("rank ", p.dim_size(), " exceeds the limit of ", kMaxRank));
  Shape shape;
  for (const pb::TensorShapeProto::Dim& d : p.dim()) {
    if (d.size() < min_dim) return Malformed(where, absl::StrCat("dimension ", d.size(), " is negative"));
    shape.AddDim(d.size());
  }
  return shape;
}

template <typename T, typename Field>
absl::Status FillTyped(const Field& values, int64_t n, Tensor& t, absl::string_view where) {
  T* dst = t.mutable_data<T>();
  const int64_t count = values.size();
  if (count == n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(values.Get(static_cast<int>(i)));
  } else if (count == 1 || count == 0) {
    // TensorFlow's short forms: one value repeated, or no values for zeros.
    const T v = count == 1 ? static_cast<T>(values.Get(0)) : T{};
    for (int64_t i = 0; i < n; ++i) dst[i] = v;
  } else {
    return Malformed(where, absl::StrCat(count, " values for a tensor of ", n, " elements"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TensorFromProto(const pb::TensorProto& p, absl::string_view where) {
  TDF_ASSIGN_OR_RETURN(DType dtype, FromProtoDType(p.dtype(), where));
  const int value_fields = (p.float_val_size() > 0) + (p.double_val_size() > 0) + (p.int_val_size() > 0) +
                           (p.int64_val_size() > 0) + (p.bool_val_size() > 0);
  if (dtype == DType::kInvalid) {
    // The form of an invalid (empty) Tensor: nothing at all.
    if (p.has_tensor_shape() || value_fields > 0 || !p.tensor_content().empty())
      return Malformed(where, "a tensor of DT_INVALID with a shape or values");
    return Tensor();
  }
  TDF_ASSIGN_OR_RETURN(Shape shape, ShapeFromProto(p.tensor_shape(), 0, where));
  // Element count with overflow and size checks; a zero dim makes the whole
  // tensor empty however large the others are.
  int64_t n = 1;
  bool has_zero = false;
  for (int64_t d : shape.dims()) has_zero = has_zero || d == 0;
  if (has_zero) {
    n = 0;
  } else {
    for (int64_t d : shape.dims()) {
      if (n > kMaxTensorElements / d)
        return Malformed(where, absl::StrCat("tensor of shape ", shape.DebugString(), " has more than ",
                                             kMaxTensorElements, " elements"));
      n *= d;
    }
  }
  const std::string& content = p.tensor_content();
  int typed_count = 0;
  bool typed_matches = false;
  switch (dtype) {
    case DType::kBool: typed_count = p.bool_val_size(); break;
    case DType::kInt32: typed_count = p.int_val_size(); break;
    case DType::kInt64: typed_count = p.int64_val_size(); break;
    case DType::kFloat32: typed_count = p.float_val_size(); break;
    case DType::kFloat64: typed_count = p.double_val_size(); break;
    case DType::kInvalid: break;
  }
  typed_matches = typed_count > 0;
  if (value_fields > 1 || (value_fields == 1 && !typed_matches))
    return Malformed(where, absl::StrCat("values of another type in a ", DTypeName(dtype), " tensor"));
  if (!content.empty() && value_fields > 0) return Malformed(where, "both tensor_content and typed values");
  const size_t elem = DTypeSize(dtype);
  if (!content.empty()) {
    if (content.size() != static_cast<size_t>(n) * elem)
      return Malformed(where, absl::StrCat("tensor_content has ", content.size(), " bytes; ", DTypeName(dtype),
                                           shape.DebugString(), " needs ", static_cast<size_t>(n) * elem));
  } else if (typed_count != n && n > kMaxSplatElements) {
    // One value (or none) standing for a huge tensor: refuse rather than let
    // a few bytes of input allocate gigabytes.
    return Malformed(where, absl::StrCat(typed_count, " values for a tensor of ", n, " elements (at most ",
                                         kMaxSplatElements, " may be filled from fewer values)"));
  }
  if (n == 0 && typed_count > 0) return Malformed(where, "values for an empty tensor");
  TDF_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(dtype, shape));
  if (!content.empty()) {
    if (dtype == DType::kBool) {
      bool* dst = t.mutable_data<bool>();
      for (int64_t i = 0; i < n; ++i) dst[i] = content[static_cast<size_t>(i)] != 0;  // only 0 and 1 are bools
    } else {
      std::memcpy(t.raw_mutable_data(), content.data(), content.size());
    }
    return t;
  }
  absl::Status s;
  switch (dtype) {
    case DType::kBool: s = FillTyped<bool>(p.bool_val(), n, t, where); break;
    case DType::kInt32: s = FillTyped<int32_t>(p.int_val(), n, t, where); break;
    case DType::kInt64: s = FillTyped<int64_t>(p.int64_val(), n, t, where); break;
    case DType::kFloat32: s = FillTyped<float>(p.float_val(), n, t, where); break;
    case DType::kFloat64: s = FillTyped<double>(p.double_val(), n, t, where); break;
    case DType::kInvalid: break;
  }
  TDF_RETURN_IF_ERROR(s);
  return t;
}

absl::StatusOr<AttrValue> AttrFromProto(const pb::AttrValue& p, absl::string_view where) {
  switch (p.value_case()) {
    case pb::AttrValue::VALUE_NOT_SET: return AttrValue();
    case pb::AttrValue::kS: return AttrValue(p.s());
    case pb::AttrValue::kI: return AttrValue(static_cast<int64_t>(p.i()));
    case pb::AttrValue::kF: return AttrValue(static_cast<double>(p.f()));
    case pb::AttrValue::kF64: return AttrValue(p.f64());
    case pb::AttrValue::kB: return AttrValue(p.b());
    case pb::AttrValue::kType: {
      TDF_ASSIGN_OR_RETURN(DType t, FromProtoDType(p.type(), where));
      return AttrValue(t);
    }
    case pb::AttrValue::kShape: {
      TDF_ASSIGN_OR_RETURN(Shape s, ShapeFromProto(p.shape(), -1, where));
      return AttrValue(std::move(s));
    }
    case pb::AttrValue::kTensor: {
      TDF_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(p.tensor(), where));
      return AttrValue(std::move(t));
    }
    case pb::AttrValue::kList: {
      const pb::AttrValue::ListValue& l = p.list();
      if (l.b_size() > 0) return Malformed(where, "list(bool) attributes are not supported");
      const int kinds = (l.s_size() > 0) + (l.i_size() > 0) + (l.f_size() + l.f64_size() > 0) + (l.type_size() > 0);
      if (kinds > 1) return Malformed(where, "a list attribute with values of several kinds");
      if (l.f_size() > 0 && l.f64_size() > 0) return Malformed(where, "a list(float) split between f and f64");
      if (kinds == 1 && !l.empty_list_kind().empty()) return Malformed(where, "empty_list_kind on a non-empty list");
      const std::string& kind = l.empty_list_kind();
      if (l.s_size() > 0 || kind == "string") return AttrValue(std::vector<std::string>(l.s().begin(), l.s().end()));
      if (l.f_size() > 0) return AttrValue(std::vector<double>(l.f().begin(), l.f().end()));
      if (l.f64_size() > 0 || kind == "float") return AttrValue(std::vector<double>(l.f64().begin(), l.f64().end()));
      if (l.type_size() > 0 || kind == "type") {
        std::vector<DType> types;
        types.reserve(l.type_size());
        for (int t : l.type()) {
          TDF_ASSIGN_OR_RETURN(DType d, FromProtoDType(t, where));
          types.push_back(d);
        }
        return AttrValue(std::move(types));
      }
      if (!kind.empty() && kind != "int") return Malformed(where, absl::StrCat("unknown empty_list_kind '", kind, "'"));
      // Non-empty ints, or a TensorFlow-style empty list with no kind: list(int).
      return AttrValue(std::vector<int64_t>(l.i().begin(), l.i().end()));
    }
  }
  return Malformed(where, "unknown attribute value kind");
}

// The binary parser rejects strings that are not UTF-8 but the text parser
// does not: check here, so both loaders accept exactly what the writer writes.
absl::Status CheckLoadedName(absl::string_view where, absl::string_view what, absl::string_view value) {
  if (IsUtf8(value)) return absl::OkStatus();
  return Malformed(where, absl::StrCat(what, " is not valid UTF-8"));
}

absl::StatusOr<NodeDef> NodeFromProto(const pb::NodeDef& p, absl::string_view where) {
  TDF_RETURN_IF_ERROR(CheckLoadedName(where, "a node name", p.name()));
  TDF_RETURN_IF_ERROR(CheckLoadedName(where, "an op name", p.op()));
  TDF_RETURN_IF_ERROR(CheckLoadedName(where, "a device", p.device()));
  for (const std::string& in : p.input()) TDF_RETURN_IF_ERROR(CheckLoadedName(where, "an input", in));
  for (const auto& entry : p.attr()) TDF_RETURN_IF_ERROR(CheckLoadedName(where, "an attribute name", entry.first));
  NodeDef node;
  node.name = p.name();
  node.op = p.op();
  node.device = p.device();
  node.input.assign(p.input().begin(), p.input().end());
  const std::string node_where = absl::StrCat(where, "node '", p.name(), "' (", p.op(), ")");
  for (const auto& [key, value] : p.attr()) {
    TDF_ASSIGN_OR_RETURN(AttrValue v, AttrFromProto(value, absl::StrCat(node_where, " attribute '", key, "'")));
    node.attr.emplace(key, std::move(v));
  }
  return node;
}

absl::StatusOr<std::vector<ArgDef>> ArgsFromProto(const google::protobuf::RepeatedPtrField<pb::OpDef::ArgDef>& args,
                                                  absl::string_view where) {
  std::vector<ArgDef> out;
  out.reserve(args.size());
  for (const pb::OpDef::ArgDef& a : args) {
    TDF_RETURN_IF_ERROR(CheckLoadedName(where, "an argument name", a.name()));
    TDF_ASSIGN_OR_RETURN(DType t, FromProtoDType(a.type(), absl::StrCat(where, " argument '", a.name(), "'")));
    out.push_back(ArgDef{a.name(), t});
  }
  return out;
}

}  // namespace

absl::StatusOr<Graph> GraphFromProto(const pb::GraphDef& p) {
  if (p.has_versions() && p.versions().min_consumer() > kGraphFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat("graph needs format version ", p.versions().min_consumer(),
                                                   "; this tdf reads version ", kGraphFormatVersion));
  Graph g;
  g.node.reserve(p.node_size());
  for (const pb::NodeDef& n : p.node()) {
    TDF_ASSIGN_OR_RETURN(NodeDef node, NodeFromProto(n, ""));
    g.node.push_back(std::move(node));
  }
  for (const pb::FunctionDef& f : p.library().function()) {
    const std::string& name = f.signature().name();
    const std::string where = absl::StrCat("function '", name, "'");
    if (name.empty()) return Malformed("library", "a function without a name");
    TDF_RETURN_IF_ERROR(CheckLoadedName("library", "a function name", name));
    if (g.library.Find(name) != nullptr) return Malformed(where, "defined twice in the library");
    if (f.declared_only() && f.node_def_size() > 0) return Malformed(where, "declared_only but has a body");
    FunctionDef fn;
    fn.signature.name = name;
    TDF_ASSIGN_OR_RETURN(fn.signature.inputs, ArgsFromProto(f.signature().input_arg(), where));
    TDF_ASSIGN_OR_RETURN(fn.signature.outputs, ArgsFromProto(f.signature().output_arg(), where));
    fn.defined = !f.declared_only();
    fn.node.reserve(f.node_def_size());
    for (const pb::NodeDef& n : f.node_def()) {
      TDF_ASSIGN_OR_RETURN(NodeDef node, NodeFromProto(n, absl::StrCat(where, " ")));
      fn.node.push_back(std::move(node));
    }
    g.library.Put(std::move(fn));
  }
  return g;
}

absl::Status CheckInputSize(size_t size) {
  if (size > static_cast<size_t>(kMaxSerializedGraphBytes))
    return absl::InvalidArgumentError(absl::StrCat("serialized graph of ", size, " bytes exceeds the limit of ",
                                                   kMaxSerializedGraphBytes));
  return absl::OkStatus();
}

// ---- Named tensors ----

namespace {

absl::Status MalformedTensors(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed tensors: ", where, ": ", what));
}

}  // namespace

absl::Status NamedTensorsToProto(const NamedTensors& tensors, pb::NamedTensorsProto* out) {
  std::set<absl::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) return absl::InvalidArgumentError("cannot serialize a tensor with an empty name");
    TDF_RETURN_IF_ERROR(CheckName(absl::StrCat("tensor name '", name, "'"), name));
    if (!names.insert(name).second)
      return absl::InvalidArgumentError(absl::StrCat("cannot serialize two tensors named '", name, "'"));
    if (!tensor.valid())
      return absl::InvalidArgumentError(absl::StrCat("cannot serialize tensor '", name, "': it holds no value"));
    pb::NamedTensorsProto::Entry* entry = out->add_entry();
    entry->set_name(name);
    absl::Status s = TensorToProto(tensor, entry->mutable_tensor());
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("tensor '", name, "': ", s.message()));
  }
  out->mutable_versions()->set_producer(kGraphFormatVersion);
  out->mutable_versions()->set_min_consumer(kGraphFormatVersion);
  if (out->ByteSizeLong() > static_cast<size_t>(kMaxSerializedTensorsBytes))
    return absl::InvalidArgumentError(absl::StrCat("tensors serialize to ", out->ByteSizeLong(),
                                                   " bytes, more than loaders accept (", kMaxSerializedTensorsBytes,
                                                   ")"));
  return absl::OkStatus();
}

absl::StatusOr<NamedTensors> NamedTensorsFromProto(const pb::NamedTensorsProto& p) {
  if (p.has_versions() && p.versions().min_consumer() > kGraphFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat("tensors need format version ", p.versions().min_consumer(),
                                                   "; this tdf reads version ", kGraphFormatVersion));
  NamedTensors out;
  out.reserve(p.entry_size());
  std::set<absl::string_view> names;
  for (int i = 0; i < p.entry_size(); ++i) {
    const pb::NamedTensorsProto::Entry& e = p.entry(i);
    const std::string where = absl::StrCat("tensor '", e.name(), "'");
    if (e.name().empty()) return MalformedTensors(absl::StrCat("entry ", i), "a tensor without a name");
    if (!names.insert(e.name()).second) return MalformedTensors(where, "the name appears twice");
    absl::StatusOr<Tensor> t = TensorFromProto(e.tensor(), where);
    if (!t.ok()) {
      // TensorFromProto speaks of graphs, where its tensors usually are.
      std::string message(t.status().message());
      if (absl::StartsWith(message, "malformed graph: ")) message.replace(0, 15, "malformed tensors");
      return absl::Status(t.status().code(), message);
    }
    if (!t->valid()) return MalformedTensors(where, "no value (DT_INVALID)");
    out.emplace_back(e.name(), *std::move(t));
  }
  return out;
}

}  // namespace serialization
}  // namespace tdf
