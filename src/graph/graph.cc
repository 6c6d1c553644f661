#include "tdf/graph.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/node_index.h"
#include "tdf/status.h"

namespace tdf {

absl::string_view AttrValue::TypeName() const {
  switch (value_.index()) {
    case 0: return "none";
    case 1: return "int";
    case 2: return "float";
    case 3: return "bool";
    case 4: return "string";
    case 5: return "type";
    case 6: return "shape";
    case 7: return "tensor";
    case 8: return "list(int)";
    case 9: return "list(float)";
    case 10: return "list(string)";
    case 11: return "list(type)";
  }
  return "none";
}

std::string AttrValue::DebugString() const {
  struct Printer {
    std::string operator()(std::monostate) const { return "none"; }
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const { return absl::StrCat(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return absl::StrCat("\"", v, "\""); }
    std::string operator()(DType v) const { return std::string(DTypeName(v)); }
    std::string operator()(const Shape& v) const { return v.DebugString(); }
    std::string operator()(const Tensor& v) const { return v.DebugString(); }
    std::string operator()(const std::vector<int64_t>& v) const { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }
    std::string operator()(const std::vector<double>& v) const { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }
    std::string operator()(const std::vector<std::string>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ","), "]");
    }
    std::string operator()(const std::vector<DType>& v) const {
      std::vector<std::string> names;
      for (DType d : v) names.emplace_back(DTypeName(d));
      return absl::StrCat("[", absl::StrJoin(names, ","), "]");
    }
  };
  return std::visit(Printer{}, value_);
}

bool operator==(const AttrValue& a, const AttrValue& b) {
  if (a.value_.index() != b.value_.index()) return false;
  if (const Tensor* ta = a.get_if<Tensor>()) return ta->Equals(*b.get_if<Tensor>());
  return a.value_ == b.value_;
}

absl::StatusOr<InputRef> InputRef::Parse(absl::string_view text) {
  TDF_ASSIGN_OR_RETURN(InputView view, ParseInputView(text));
  InputRef ref;
  ref.node = std::string(view.node);
  ref.port = view.port;
  ref.is_control = view.is_control;
  return ref;
}

std::string InputRef::ToString() const {
  if (is_control) return absl::StrCat("^", node);
  if (port == 0) return node;
  return absl::StrCat(node, ":", port);
}

std::string NodeLabel(const NodeDef& node) { return absl::StrCat("node '", node.name, "' (", node.op, ")"); }

absl::Status NodeError(const NodeDef& node, absl::StatusCode code, absl::string_view message) {
  return absl::Status(code, absl::StrCat(NodeLabel(node), ": ", message));
}

absl::Status WithNodeLabel(const NodeDef& node, const absl::Status& s) {
  if (s.ok()) return s;
  const std::string prefix = absl::StrCat(NodeLabel(node), ": ");
  if (absl::StartsWith(s.message(), prefix)) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

const AttrValue* NodeDef::FindAttr(absl::string_view attr_name) const {
  // Most nodes have a few attributes: a scan that compares lengths first
  // calls memcmp less often than the tree's comparisons (Session::Create
  // looks several up per node, in every pass).
  if (attr.size() <= 4) {
    for (const auto& [key, value] : attr)
      if (absl::string_view(key) == attr_name) return &value;
    return nullptr;
  }
  auto it = attr.find(attr_name);
  return it == attr.end() ? nullptr : &it->second;
}

namespace {
template <typename T>
absl::StatusOr<T> GetAttrAs(const NodeDef& node, absl::string_view name, absl::string_view type) {
  const AttrValue* v = node.FindAttr(name);
  if (v == nullptr) return NodeError(node, absl::StatusCode::kInvalidArgument, absl::StrCat("missing attribute '", name, "'"));
  const T* p = v->get_if<T>();
  if (p == nullptr)
    return NodeError(node, absl::StatusCode::kInvalidArgument,
                     absl::StrCat("attribute '", name, "' should be ", type, ", is ", v->TypeName()));
  return *p;
}
}  // namespace

absl::StatusOr<int64_t> NodeDef::GetInt(absl::string_view n) const { return GetAttrAs<int64_t>(*this, n, "int"); }
absl::StatusOr<double> NodeDef::GetFloat(absl::string_view n) const { return GetAttrAs<double>(*this, n, "float"); }
absl::StatusOr<bool> NodeDef::GetBool(absl::string_view n) const { return GetAttrAs<bool>(*this, n, "bool"); }
absl::StatusOr<std::string> NodeDef::GetString(absl::string_view n) const {
  return GetAttrAs<std::string>(*this, n, "string");
}
absl::StatusOr<DType> NodeDef::GetType(absl::string_view n) const { return GetAttrAs<DType>(*this, n, "type"); }
absl::StatusOr<Tensor> NodeDef::GetTensor(absl::string_view n) const { return GetAttrAs<Tensor>(*this, n, "tensor"); }
absl::StatusOr<std::vector<int64_t>> NodeDef::GetIntList(absl::string_view n) const {
  return GetAttrAs<std::vector<int64_t>>(*this, n, "list(int)");
}
absl::StatusOr<std::vector<DType>> NodeDef::GetTypeList(absl::string_view n) const {
  return GetAttrAs<std::vector<DType>>(*this, n, "list(type)");
}
int64_t NodeDef::GetIntOr(absl::string_view n, int64_t fallback) const {
  const AttrValue* v = FindAttr(n);
  const int64_t* p = v ? v->get_if<int64_t>() : nullptr;
  return p ? *p : fallback;
}
bool NodeDef::GetBoolOr(absl::string_view n, bool fallback) const {
  const AttrValue* v = FindAttr(n);
  const bool* p = v ? v->get_if<bool>() : nullptr;
  return p ? *p : fallback;
}

int NodeDef::num_data_inputs() const {
  int n = 0;
  for (const std::string& in : input) {
    if (!in.empty() && in[0] == '^') break;
    ++n;
  }
  return n;
}

bool operator==(const NodeDef& a, const NodeDef& b) {
  return a.name == b.name && a.op == b.op && a.input == b.input && a.attr == b.attr && a.device == b.device;
}

absl::Status FunctionLibrary::Declare(const FunctionSignature& signature) {
  if (signature.name.empty()) return absl::InvalidArgumentError("a function needs a name");
  auto it = functions_.find(signature.name);
  if (it != functions_.end()) {
    if (it->second.signature == signature) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("function '", signature.name, "' is already declared with another signature"));
  }
  FunctionDef f;
  f.signature = signature;
  functions_.emplace(signature.name, std::move(f));
  return absl::OkStatus();
}

absl::Status FunctionLibrary::Define(const FunctionSignature& signature, std::vector<NodeDef> body) {
  absl::Status s = Declare(signature);
  if (!s.ok()) return s;
  FunctionDef& f = functions_[signature.name];
  if (f.defined) return absl::AlreadyExistsError(absl::StrCat("function '", signature.name, "' is already defined"));
  f.defined = true;
  f.node = std::move(body);
  return absl::OkStatus();
}

void FunctionLibrary::Put(FunctionDef function) {
  std::string name = function.signature.name;
  functions_[name] = std::move(function);
}

const FunctionDef* FunctionLibrary::Find(absl::string_view name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

FunctionDef* FunctionLibrary::FindMutable(absl::string_view name) {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

const NodeDef* Graph::FindNode(absl::string_view name) const {
  for (const NodeDef& n : node)
    if (n.name == name) return &n;
  return nullptr;
}

}  // namespace tdf
