// TensorFlow GraphDefs -> tdf graphs (tdf/tf_import.h): parsing (binary or
// text), the main graph and each FunctionDef converted node by node
// (ops.cc), function signatures and `ret` maps turned into Arg and Retval
// nodes, and the result validated so nothing unsupported reaches a run.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "graph/proto_conversion.h"
#include "graph/tf_import/importer.h"
#include "tdf/serialize.h"
#include "tdf/status.h"
#include "tdf/tf_import.h"
#include "tdf/validate.h"

namespace tdf {
namespace tf_import {
namespace {

using FunctionMap = std::map<std::string, const tfpb::FunctionDef*>;

bool LooksLikeText(absl::string_view data) {
  for (char c : data) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return true;
}

absl::Status ParseText(absl::string_view bytes, tfpb::GraphDef* p) {
  serialization::TextErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(true);  // fields of newer TensorFlows than proto/tf_graph.proto lists
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  if (!parser.Parse(&stream, p))
    return absl::InvalidArgumentError(absl::StrCat("malformed TensorFlow graph text: ", errors.Summary()));
  return absl::OkStatus();
}

absl::Status ParseBinary(absl::string_view bytes, tfpb::GraphDef* p) {
  if (!p->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return absl::InvalidArgumentError("malformed TensorFlow GraphDef: not a binary GraphDef protobuf");
  return absl::OkStatus();
}

absl::Status Parse(absl::string_view bytes, TensorFlowGraphEncoding encoding, tfpb::GraphDef* p) {
  if (bytes.size() > static_cast<size_t>(kMaxSerializedGraphBytes))
    return absl::InvalidArgumentError(absl::StrCat("TensorFlow graph of ", bytes.size(),
                                                   " bytes exceeds the limit of ", kMaxSerializedGraphBytes));
  switch (encoding) {
    case TensorFlowGraphEncoding::kBinary: return ParseBinary(bytes, p);
    case TensorFlowGraphEncoding::kText: return ParseText(bytes, p);
    case TensorFlowGraphEncoding::kAuto: break;
  }
  // Text has no control characters but newlines and tabs; a binary
  // GraphDef almost always has (field tags, short lengths). Text first,
  // then binary, so either form loads whatever the guess.
  if (LooksLikeText(bytes)) {
    absl::Status text = ParseText(bytes, p);
    if (text.ok()) return text;
    p->Clear();
    if (ParseBinary(bytes, p).ok()) return absl::OkStatus();
    return text;
  }
  return ParseBinary(bytes, p);
}

absl::StatusOr<std::string> ConvertDevice(const tfpb::NodeDef& node) {
  if (node.device().empty()) return std::string();
  absl::StatusOr<DeviceName> name = DeviceName::Parse(node.device());
  if (!name.ok()) {
    NodeDef label;
    label.name = node.name();
    label.op = node.op();
    return NodeError(label, absl::StatusCode::kInvalidArgument, name.status().message());
  }
  // /job:localhost is this process: no rank, just the device.
  if (absl::StrContains(node.device(), "/job:localhost")) name->rank = DeviceName::kAnyRank;
  return name->ToString();
}

// TensorFlow 1 variables are references that their consumers read
// implicitly; a tdf Variable is a handle read by a Read node. Every data
// input naming a variable, except the variable operand of the ops that
// update it, reads it through "<variable>/tdf_read" (ops.cc VariableMapper
// emits that Read).
void ReadVariablesThroughReads(std::vector<TfNode>& nodes) {
  std::set<std::string> variables;
  for (const TfNode& n : nodes) {
    if (IsVariableOp(n.op())) variables.insert(n.name());
  }
  if (variables.empty()) return;
  for (TfNode& n : nodes) {
    for (size_t i = 0; i < n.data.size(); ++i) {
      if (i == 0 && UpdatesVariable(n.op())) continue;
      absl::StatusOr<InputRef> ref = InputRef::Parse(n.data[i]);
      if (ref.ok() && ref->port == 0 && variables.count(ref->node) > 0) n.data[i] = VariableReadName(ref->node);
    }
  }
}

// The nodes of one body with inputs split and resolved. In a function body
// `args` holds the argument names and inputs are "arg" or "node:out:index".
absl::StatusOr<std::vector<TfNode>> ResolveNodes(const google::protobuf::RepeatedPtrField<tfpb::NodeDef>& defs,
                                                 const std::set<std::string>* args, const FunctionMap& functions) {
  std::map<std::string, const tfpb::NodeDef*> by_name;
  for (const tfpb::NodeDef& d : defs) {
    if (d.name().empty()) return absl::InvalidArgumentError(absl::StrCat("a node without a name (op ", d.op(), ")"));
    if (!by_name.emplace(d.name(), &d).second || (args != nullptr && args->count(d.name()) > 0))
      return absl::InvalidArgumentError(absl::StrCat("two nodes named '", d.name(), "'"));
  }
  std::vector<TfNode> nodes;
  nodes.reserve(defs.size());
  for (const tfpb::NodeDef& d : defs) {
    TfNode n;
    n.def = &d;
    TDF_ASSIGN_OR_RETURN(n.device, ConvertDevice(d));
    for (const std::string& in : d.input()) {
      if (absl::StartsWith(in, "^")) {
        n.control.push_back(in);
        continue;
      }
      if (!n.control.empty()) return n.Invalid(absl::StrCat("data input '", in, "' after a control input"));
      std::vector<absl::string_view> parts = absl::StrSplit(in, ':');
      if (args == nullptr || parts.size() != 3) {
        n.data.push_back(in);  // "node" / "node:port", or an argument name
        continue;
      }
      // A function body's "node:output_arg:index".
      auto producer = by_name.find(std::string(parts[0]));
      int index = 0;
      if (producer == by_name.end() || !absl::SimpleAtoi(parts[2], &index) || index < 0)
        return n.Invalid(absl::StrCat("input '", in, "' names no node of the function body"));
      absl::StatusOr<int> port = OutputPort(*producer->second, parts[1], index, functions);
      if (!port.ok()) return n.Invalid(absl::StrCat("input '", in, "': ", port.status().message()));
      n.data.push_back(*port == 0 ? std::string(parts[0]) : absl::StrCat(parts[0], ":", *port));
    }
    nodes.push_back(std::move(n));
  }
  if (args == nullptr) ReadVariablesThroughReads(nodes);
  return nodes;
}

absl::Status ConvertBody(const std::vector<TfNode>& nodes, const FunctionMap& functions, std::vector<NodeDef>* out) {
  BodyContext ctx;
  ctx.functions = &functions;
  ctx.out = out;
  for (const TfNode& n : nodes) ctx.by_name.emplace(n.name(), &n);
  for (const TfNode& n : nodes) TDF_RETURN_IF_ERROR(ConvertNode(n, ctx));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ArgDef>> ConvertArgs(const google::protobuf::RepeatedPtrField<tfpb::OpDef::ArgDef>& args,
                                                const tfpb::FunctionDef& f, absl::string_view kind) {
  std::vector<ArgDef> out;
  TfNode label;
  tfpb::NodeDef label_def;
  label_def.set_name(f.signature().name());
  label_def.set_op("FunctionDef");
  label.def = &label_def;
  for (const tfpb::OpDef::ArgDef& a : args) {
    const std::string what = absl::StrCat(kind, " '", a.name(), "'");
    if (!a.type_attr().empty() || !a.number_attr().empty() || !a.type_list_attr().empty())
      return absl::UnimplementedError(absl::StrCat(
          what, " is polymorphic (type_attr/number_attr/type_list_attr); tdf imports functions whose arguments "
                "and results each have one fixed dtype"));
    if (a.is_ref()) return absl::UnimplementedError(absl::StrCat(what, " is a reference (TensorFlow 1 variables)"));
    absl::StatusOr<DType> t = ConvertDType(a.type(), label, what);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(what, ": dtype ",
                                                                     tfpb::DataType_Name(a.type()),
                                                                     " is not one tdf has"));
    out.push_back(ArgDef{a.name(), *t});
  }
  return out;
}

absl::StatusOr<FunctionDef> ConvertFunction(const tfpb::FunctionDef& f, const FunctionMap& functions) {
  const tfpb::OpDef& sig = f.signature();
  FunctionDef fn;
  fn.signature.name = sig.name();
  fn.defined = true;
  if (sig.attr_size() > 0)
    return absl::UnimplementedError(absl::StrCat("attr '", sig.attr(0).name(),
                                                 "': polymorphic functions are not supported"));
  TDF_ASSIGN_OR_RETURN(fn.signature.inputs, ConvertArgs(sig.input_arg(), f, "argument"));
  TDF_ASSIGN_OR_RETURN(fn.signature.outputs, ConvertArgs(sig.output_arg(), f, "result"));
  std::set<std::string> args;
  for (size_t i = 0; i < fn.signature.inputs.size(); ++i) {
    const ArgDef& a = fn.signature.inputs[i];
    if (!args.insert(a.name).second) return absl::InvalidArgumentError(absl::StrCat("two arguments named '", a.name, "'"));
    NodeDef arg;
    arg.name = a.name;
    arg.op = "Arg";
    arg.attr["T"] = a.type;
    arg.attr["index"] = static_cast<int64_t>(i);
    fn.node.push_back(std::move(arg));
  }
  TDF_ASSIGN_OR_RETURN(std::vector<TfNode> nodes, ResolveNodes(f.node_def(), &args, functions));
  TDF_RETURN_IF_ERROR(ConvertBody(nodes, functions, &fn.node));
  // Results: ret maps each output_arg name to "node:out:index" or an argument.
  std::set<std::string> names;
  for (const NodeDef& n : fn.node) names.insert(n.name);
  std::map<std::string, const tfpb::NodeDef*> by_name;
  for (const tfpb::NodeDef& d : f.node_def()) by_name.emplace(d.name(), &d);
  for (size_t i = 0; i < fn.signature.outputs.size(); ++i) {
    const ArgDef& r = fn.signature.outputs[i];
    auto ret = f.ret().find(r.name);
    if (ret == f.ret().end()) return absl::InvalidArgumentError(absl::StrCat("result '", r.name, "' has no ret entry"));
    std::string input = ret->second;
    std::vector<absl::string_view> parts = absl::StrSplit(ret->second, ':');
    if (parts.size() == 3) {
      auto producer = by_name.find(std::string(parts[0]));
      int index = 0;
      if (producer == by_name.end() || !absl::SimpleAtoi(parts[2], &index) || index < 0)
        return absl::InvalidArgumentError(absl::StrCat("ret '", r.name, "' = '", ret->second, "' names no node"));
      TDF_ASSIGN_OR_RETURN(int port, OutputPort(*producer->second, parts[1], index, functions));
      input = port == 0 ? std::string(parts[0]) : absl::StrCat(parts[0], ":", port);
    }
    std::string name = absl::StrCat(r.name, "_retval");
    while (names.count(name) > 0) name += "_";
    names.insert(name);
    NodeDef retval;
    retval.name = name;
    retval.op = "Retval";
    retval.input.push_back(std::move(input));
    retval.attr["T"] = r.type;
    retval.attr["index"] = static_cast<int64_t>(i);
    fn.node.push_back(std::move(retval));
  }
  for (const auto& [key, value] : f.ret()) {
    bool known = false;
    for (const ArgDef& r : fn.signature.outputs) known = known || r.name == key;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("ret '", key, "' is not a result of the signature"));
  }
  return fn;
}

absl::StatusOr<Graph> Convert(const tfpb::GraphDef& p) {
  // TensorFlow's `versions` say which TensorFlow wrote the graph; they are
  // not tdf's format version and are not read.
  FunctionMap functions;
  for (const tfpb::FunctionDef& f : p.library().function()) {
    if (f.signature().name().empty()) return absl::InvalidArgumentError("a library function without a name");
    if (!functions.emplace(f.signature().name(), &f).second)
      return absl::InvalidArgumentError(absl::StrCat("function '", f.signature().name(), "' is defined twice"));
  }
  Graph g;
  TDF_ASSIGN_OR_RETURN(std::vector<TfNode> nodes, ResolveNodes(p.node(), nullptr, functions));
  TDF_RETURN_IF_ERROR(ConvertBody(nodes, functions, &g.node));
  for (const auto& [name, f] : functions) {
    absl::StatusOr<FunctionDef> fn = ConvertFunction(*f, functions);
    if (!fn.ok()) return absl::Status(fn.status().code(), absl::StrCat("function '", name, "': ", fn.status().message()));
    g.library.Put(*std::move(fn));
  }
  return g;
}

bool HasTensorFlowForms(const tfpb::NodeDef& n, bool in_function) {
  if (IsTensorFlowOnlyForm(n)) return true;
  if (n.attr().count("_output_shapes") > 0 || n.attr().count("_class") > 0) return true;
  if (in_function) {
    for (const std::string& in : n.input()) {
      if (std::count(in.begin(), in.end(), ':') == 2) return true;
    }
  }
  return false;
}

bool IsTensorFlow(const tfpb::GraphDef& p) {
  if (p.versions().producer() > kGraphFormatVersion) return true;
  for (const tfpb::NodeDef& n : p.node()) {
    if (HasTensorFlowForms(n, false)) return true;
  }
  for (const tfpb::FunctionDef& f : p.library().function()) {
    if (!f.ret().empty()) return true;
    for (const tfpb::NodeDef& n : f.node_def()) {
      if (HasTensorFlowForms(n, true)) return true;
    }
  }
  return false;
}

TensorFlowGraphEncoding EncodingOfPath(const std::string& path) {
  if (absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".pbtext") || absl::EndsWith(path, ".txt"))
    return TensorFlowGraphEncoding::kText;
  if (absl::EndsWith(path, ".pb") || absl::EndsWith(path, ".bin")) return TensorFlowGraphEncoding::kBinary;
  return TensorFlowGraphEncoding::kAuto;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return absl::UnavailableError(absl::StrCat("cannot read '", path, "'"));
  if (size > kMaxSerializedGraphBytes)
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' has ", size, " bytes, more than the limit of ", kMaxSerializedGraphBytes));
  in.seekg(0, std::ios::beg);
  std::string data(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(data.data(), size)) return absl::UnavailableError(absl::StrCat("cannot read '", path, "'"));
  return data;
}

}  // namespace
}  // namespace tf_import

absl::StatusOr<Graph> ImportTensorFlowGraph(absl::string_view bytes, TensorFlowGraphEncoding encoding) {
  tf_import::tfpb::GraphDef p;
  TDF_RETURN_IF_ERROR(tf_import::Parse(bytes, encoding, &p));
  TDF_ASSIGN_OR_RETURN(Graph g, tf_import::Convert(p));
  TDF_RETURN_IF_ERROR(Validate(g));
  return g;
}

absl::StatusOr<Graph> ImportTensorFlowGraphFile(const std::string& path) {
  TDF_ASSIGN_OR_RETURN(std::string bytes, tf_import::ReadFile(path));
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(bytes, tf_import::EncodingOfPath(path));
  if (!g.ok()) return absl::Status(g.status().code(), absl::StrCat(path, ": ", g.status().message()));
  return g;
}

bool IsTensorFlowGraph(absl::string_view bytes, TensorFlowGraphEncoding encoding) {
  tf_import::tfpb::GraphDef p;
  if (!tf_import::Parse(bytes, encoding, &p).ok()) return false;
  return tf_import::IsTensorFlow(p);
}

absl::StatusOr<Graph> LoadGraphOrTensorFlowGraph(const std::string& path) {
  absl::StatusOr<std::string> bytes = tf_import::ReadFile(path);
  if (bytes.ok() && IsTensorFlowGraph(*bytes, tf_import::EncodingOfPath(path))) return ImportTensorFlowGraphFile(path);
  return LoadGraph(path);  // tdf's form, or tdf's own error for the file
}

}  // namespace tdf
