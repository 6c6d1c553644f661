#include "tdf/validate.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/frames.h"
#include "graph/node_index.h"
#include "graph/op_schema_cache.h"
#include "tdf/op_registry.h"
#include "tdf/status.h"

namespace tdf {
namespace {

// The state ops whose variable input is checked. By length first: five
// string compares per node were a fifth of the body checks on a 10^6-node
// graph.
bool ReadsOrWritesAVariable(absl::string_view op) {
  switch (op.size()) {
    case 4:
      return op == "Read";
    case 6:
      return op == "Assign";
    case 9:
      return op == "AssignAdd" || op == "AssignSub";
    case 10:
      return op == "ScatterAdd";
    default:
      return false;
  }
}

absl::Status Invalid(const NodeDef& node, absl::string_view message) {
  return NodeError(node, absl::StatusCode::kInvalidArgument, message);
}

struct Edge {
  int src;
  int port;
  bool is_control;
  bool is_back;  // closes a loop (NextIteration) or a recursion (Call/Return)
};

// A BodyValidator's per-node vectors, shared by the validators of one
// graph's bodies one after another: allocated per body, they were a dozen
// allocations for each of 10^4 small functions.
struct BodyBuffers {
  std::vector<const OpSchema*> schemas;
  std::vector<Edge> edges;
  std::vector<uint32_t> edge_offsets;
  std::vector<int> topo;
  std::vector<std::vector<DType>> types;
  std::vector<DType> input_types;
  std::vector<int> pending, out_begin, out, fill;  // CheckAcyclic's
};

// Validates one list of nodes: the main graph (function == nullptr) or the
// body of `function`.
class BodyValidator {
 public:
  // `ops` and `buffers` may be shared by the validators of one graph's
  // bodies (one at a time).
  BodyValidator(const std::vector<NodeDef>& nodes, const FunctionDef* function, const FunctionLibrary& library,
                OpSchemaCache& ops, BodyBuffers& buffers)
      : nodes_(nodes),
        function_(function),
        library_(library),
        ops_(ops),
        buffers_(buffers),
        schemas_(buffers.schemas),
        edges_(buffers.edges),
        edge_offsets_(buffers.edge_offsets),
        topo_(buffers.topo),
        types_(buffers.types),
        input_types_(buffers.input_types) {
    edges_.clear();
    edge_offsets_.clear();
    topo_.clear();
  }

  absl::Status Run() {
    TDF_RETURN_IF_ERROR(CheckNodesAndInputs());
    TDF_RETURN_IF_ERROR(CheckAcyclic());
    TDF_RETURN_IF_ERROR(InferAndCheckTypes());
    TDF_RETURN_IF_ERROR(CheckCalls());
    TDF_RETURN_IF_ERROR(CheckVariables());
    if (function_ != nullptr) TDF_RETURN_IF_ERROR(CheckArgsAndRetvals());
    absl::StatusOr<FrameInfo> frames =
        InferFrames(nodes_, index_, function_ != nullptr ? function_->signature.name : std::string());
    return frames.status();
  }

  // The dtypes of every node's outputs, without the checks that do not need
  // them (calls, variables, Arg/Retval coverage, frames).
  absl::StatusOr<std::vector<std::vector<DType>>> InferTypes() {
    TDF_RETURN_IF_ERROR(CheckNodesAndInputs());
    TDF_RETURN_IF_ERROR(CheckAcyclic());
    TDF_RETURN_IF_ERROR(InferAndCheckTypes());
    return std::move(types_);
  }

 private:
  // Names, ops, input syntax, dangling inputs, data-after-control, and the
  // ops that belong only inside (Arg, Retval) or outside (Variable,
  // Placeholder) a function body.
  absl::Status CheckNodesAndInputs() {
    schemas_.resize(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      if (n.name.empty()) return Invalid(n, "empty node name");
      // Such a name could not be written as an input ("x:1" reads port 1).
      if (n.name.find(':') != std::string::npos || n.name[0] == '^')
        return Invalid(n, "node names may not contain ':' or start with '^'");
      schemas_[i] = ops_.Find(n.op);
      if (schemas_[i] == nullptr) return Invalid(n, absl::StrCat("unknown op '", n.op, "'"));
      const OpKind kind = schemas_[i]->kind();
      if (function_ == nullptr && (kind == OpKind::kArg || kind == OpKind::kRetval))
        return Invalid(n, absl::StrCat(n.op, " outside a function body"));
      if (function_ != nullptr && (kind == OpKind::kVariable || absl::string_view(n.op) == "Placeholder"))
        return Invalid(n, absl::StrCat(n.op, " inside a function body; ",
                                       kind == OpKind::kVariable ? "create variables in the main graph"
                                                                 : "pass the value as an argument"));
    }
    // Duplicate names, input syntax and dangling inputs.
    TDF_ASSIGN_OR_RETURN(index_, NodeIndex::Build(nodes_));
    edge_offsets_.reserve(nodes_.size() + 1);
    edge_offsets_.push_back(0);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      bool seen_control = false;
      absl::Span<const ResolvedInput> inputs = index_.inputs(i);
      for (size_t k = 0; k < inputs.size(); ++k) {
        const ResolvedInput& ref = inputs[k];
        if (ref.is_control) {
          seen_control = true;
        } else if (seen_control) {
          return Invalid(n, absl::StrCat("data input '", n.input[k], "' after a control input"));
        }
        const OpKind src_kind = schemas_[ref.src]->kind();
        const bool back = src_kind == OpKind::kNextIteration ||
                          (!ref.is_control && (src_kind == OpKind::kCall || schemas_[i]->kind() == OpKind::kReturn));
        edges_.push_back({ref.src, ref.port, ref.is_control, back});
      }
      edge_offsets_.push_back(static_cast<uint32_t>(edges_.size()));
    }
    return absl::OkStatus();
  }

  absl::Span<const Edge> in_edges(int i) const {
    return absl::MakeConstSpan(edges_.data() + edge_offsets_[i], edge_offsets_[i + 1] - edge_offsets_[i]);
  }

  // Kahn's algorithm over the forward edges; fills topo_.
  absl::Status CheckAcyclic() {
    const int n = static_cast<int>(nodes_.size());
    std::vector<int>& pending = buffers_.pending;
    pending.assign(n, 0);
    // Forward out edges by producer: node i's consumers are out[out_begin[i], out_begin[i + 1]).
    std::vector<int>& out_begin = buffers_.out_begin;
    out_begin.assign(n + 1, 0);
    for (int i = 0; i < n; ++i) {
      for (const Edge& e : in_edges(i)) {
        if (e.is_back) continue;
        ++pending[i];
        ++out_begin[e.src + 1];
      }
    }
    for (int i = 0; i < n; ++i) out_begin[i + 1] += out_begin[i];
    std::vector<int>& out = buffers_.out;
    out.resize(out_begin[n]);  // every entry written below
    {
      std::vector<int>& fill = buffers_.fill;
      fill.assign(out_begin.begin(), out_begin.end() - 1);
      for (int i = 0; i < n; ++i)
        for (const Edge& e : in_edges(i))
          if (!e.is_back) out[fill[e.src]++] = i;
    }
    // topo_ is the queue too: a node is appended when it becomes ready.
    topo_.reserve(n);
    for (int i = 0; i < n; ++i)
      if (pending[i] == 0) topo_.push_back(i);
    for (size_t next = 0; next < topo_.size(); ++next) {
      const int i = topo_[next];
      for (int k = out_begin[i]; k < out_begin[i + 1]; ++k)
        if (--pending[out[k]] == 0) topo_.push_back(out[k]);
    }
    if (static_cast<int>(topo_.size()) == n) return absl::OkStatus();
    // Every node left has a forward predecessor that is also left: walking
    // predecessors from one of them must revisit a node, which is on a cycle.
    int start = 0;
    while (pending[start] == 0) ++start;
    std::vector<int> position(n, -1);
    std::vector<int> path;
    int cur = start;
    while (position[cur] < 0) {
      position[cur] = static_cast<int>(path.size());
      path.push_back(cur);
      for (const Edge& e : in_edges(cur)) {
        if (!e.is_back && pending[e.src] > 0) {
          cur = e.src;
          break;
        }
      }
    }
    // path[position[cur]..] walks the cycle backwards; print it forwards.
    std::vector<std::string> names = {nodes_[cur].name};
    for (size_t k = path.size(); k-- > static_cast<size_t>(position[cur]);) names.push_back(nodes_[path[k]].name);
    return Invalid(nodes_[cur], absl::StrCat("is on a cycle not closed through NextIteration (or Call/Return): ",
                                             absl::StrJoin(names, " -> ")));
  }

  absl::StatusOr<std::vector<DType>> InferNode(int i, bool use_back_edges) {
    const NodeDef& n = nodes_[i];
    std::vector<DType>& inputs = input_types_;  // reused: one allocation per body, not per node
    inputs.clear();
    for (const Edge& e : in_edges(i)) {
      if (e.is_control) continue;
      if (e.is_back && !use_back_edges) {
        inputs.push_back(DType::kInvalid);
        continue;
      }
      const std::vector<DType>& produced = types_[e.src];
      if (e.port >= static_cast<int>(produced.size())) {
        const NodeDef& src = nodes_[e.src];
        return Invalid(n, absl::StrCat("input '", InputRef{src.name, e.port, false}.ToString(), "' refers to output ",
                                       e.port, " of ", NodeLabel(src), ", which has ", produced.size(),
                                       produced.size() == 1 ? " output" : " outputs"));
      }
      inputs.push_back(produced[e.port]);
    }
    if (schemas_[i]->kind() == OpKind::kInvoke) TDF_RETURN_IF_ERROR(CheckInvokeTarget(n));
    InferenceContext ctx{n, inputs, &library_};
    return schemas_[i]->InferTypes(ctx);
  }

  absl::Status CheckInvokeTarget(const NodeDef& n) {
    const AttrValue* attr = n.FindAttr("function");
    const std::string* name = attr ? attr->get_if<std::string>() : nullptr;
    if (name == nullptr) return absl::OkStatus();  // the schema reports it
    const FunctionDef* f = library_.Find(*name);
    if (f != nullptr && !f->defined)
      return Invalid(n, absl::StrCat("function '", *name, "' is declared but has no definition"));
    return absl::OkStatus();
  }

  // Forward edges first, in topological order; then the nodes fed by a back
  // edge again, now that every producer's types are known.
  absl::Status InferAndCheckTypes() {
    types_.assign(nodes_.size(), {});
    for (int i : topo_) {
      TDF_ASSIGN_OR_RETURN(types_[i], InferNode(i, /*use_back_edges=*/false));
    }
    for (int i : topo_) {
      bool has_back = false;
      for (const Edge& e : in_edges(i)) has_back |= e.is_back && !e.is_control;
      if (has_back) TDF_RETURN_IF_ERROR(InferNode(i, /*use_back_edges=*/true).status());
    }
    return absl::OkStatus();
  }

  // Call/Return: a call site, and indices within the callee's signature when
  // the library has it (a transformed graph may come without one).
  absl::Status CheckCalls() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      const bool is_call = schemas_[i]->kind() == OpKind::kCall;
      if (!is_call && schemas_[i]->kind() != OpKind::kReturn) continue;
      TDF_ASSIGN_OR_RETURN(int64_t site, n.GetInt("call_site"));
      if (site < 0) return Invalid(n, absl::StrCat("call_site must be >= 0, is ", site));
      const AttrValue* function_attr = n.FindAttr("function");
      const std::string* function_name = function_attr ? function_attr->get_if<std::string>() : nullptr;
      if (function_name == nullptr) return n.GetString("function").status();  // its error
      const std::string& fname = *function_name;
      const FunctionDef* f = library_.Find(fname);
      if (f == nullptr) continue;
      if (is_call && n.num_data_inputs() == 0) {
        // A call of a function without arguments only creates the
        // invocation; it carries arg_index -1 (tdf/transform.h).
        TDF_ASSIGN_OR_RETURN(int64_t index, n.GetInt("arg_index"));
        if (index != -1) return Invalid(n, absl::StrCat("a Call without a data input must have arg_index -1, has ", index));
        if (!f->signature.inputs.empty())
          return Invalid(n, absl::StrCat("has no data input, but function '", fname, "' takes ",
                                         f->signature.inputs.size(), " arguments"));
        continue;
      }
      const char* index_attr = is_call ? "arg_index" : "result_index";
      const std::vector<ArgDef>& params = is_call ? f->signature.inputs : f->signature.outputs;
      TDF_ASSIGN_OR_RETURN(int64_t index, n.GetInt(index_attr));
      if (index < 0 || index >= static_cast<int64_t>(params.size()))
        return Invalid(n, absl::StrCat(index_attr, " ", index, " is out of range: function '", fname, "' has ",
                                       params.size(), is_call ? " arguments" : " results"));
      TDF_ASSIGN_OR_RETURN(DType t, n.GetType("T"));
      if (t != params[index].type)
        return Invalid(n, absl::StrCat("attr T is ", DTypeName(t), " but ", is_call ? "argument " : "result ", index,
                                       " of '", fname, "' is ", DTypeName(params[index].type)));
    }
    return absl::OkStatus();
  }

  // Read/Assign/AssignAdd/AssignSub/ScatterAdd: input 0 is a variable handle. Within one
  // body we follow pass-through ops back to the handle's source; a Variable
  // there must have the op's dtype, and a kernel that cannot make a handle is
  // an error. Handles that arrive through Merge, Arg or a call are not
  // followed.
  absl::Status CheckVariables() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      if (!ReadsOrWritesAVariable(n.op)) continue;
      TDF_ASSIGN_OR_RETURN(DType want, n.GetType("dtype"));
      int cur = in_edges(i).front().src;
      for (size_t steps = 0; steps <= nodes_.size(); ++steps) {
        const std::string& op = nodes_[cur].op;
        if (op != "Identity" && op != "Enter" && op != "Exit" && op != "Switch" && op != "NextIteration") break;
        cur = in_edges(cur).front().src;
      }
      const NodeDef& src = nodes_[cur];
      const OpKind kind = schemas_[cur]->kind();
      if (kind == OpKind::kVariable) {
        TDF_ASSIGN_OR_RETURN(DType have, src.GetType("dtype"));
        if (have != want)
          return Invalid(n, absl::StrCat("attr dtype is ", DTypeName(want), " but variable '", src.name, "' is ",
                                         DTypeName(have)));
      } else if (kind == OpKind::kKernel && src.op != "Placeholder") {
        return Invalid(n, absl::StrCat("input 0 must be a variable handle; it comes from ", NodeLabel(src)));
      }
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      if (schemas_[i]->kind() != OpKind::kVariable) continue;
      const AttrValue* init = n.FindAttr("initial_value");
      const Tensor* t = init ? init->get_if<Tensor>() : nullptr;
      TDF_ASSIGN_OR_RETURN(DType want, n.GetType("dtype"));
      if (t != nullptr && t->valid() && t->dtype() != want)
        return Invalid(n, absl::StrCat("initial_value is ", DTypeName(t->dtype()), ", attr dtype is ", DTypeName(want)));
    }
    return absl::OkStatus();
  }

  absl::Status CheckOneSide(absl::string_view op, const std::vector<ArgDef>& params) {
    std::vector<int> owner(params.size(), -1);
    const std::string& fname = function_->signature.name;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeDef& n = nodes_[i];
      if (n.op != op) continue;
      TDF_ASSIGN_OR_RETURN(int64_t index, n.GetInt("index"));
      if (index < 0 || index >= static_cast<int64_t>(params.size()))
        return Invalid(n, absl::StrCat("index ", index, " is out of range: function '", fname, "' has ",
                                       params.size(), op == "Arg" ? " arguments" : " results"));
      if (owner[index] >= 0)
        return Invalid(n, absl::StrCat("duplicate ", op, " index ", index, " (also node '",
                                       nodes_[owner[index]].name, "')"));
      owner[index] = static_cast<int>(i);
      TDF_ASSIGN_OR_RETURN(DType t, n.GetType("T"));
      if (t != params[index].type)
        return Invalid(n, absl::StrCat("attr T is ", DTypeName(t), " but the signature says ",
                                       DTypeName(params[index].type), " for ", op == "Arg" ? "argument " : "result ",
                                       index));
    }
    for (size_t k = 0; k < params.size(); ++k) {
      if (owner[k] < 0)
        return absl::InvalidArgumentError(absl::StrCat("function '", fname, "': no ", op, " node for ",
                                                       op == "Arg" ? "argument " : "result ", k, " ('",
                                                       params[k].name, "')"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckArgsAndRetvals() {
    TDF_RETURN_IF_ERROR(CheckOneSide("Arg", function_->signature.inputs));
    return CheckOneSide("Retval", function_->signature.outputs);
  }

  const std::vector<NodeDef>& nodes_;
  const FunctionDef* function_;
  const FunctionLibrary& library_;
  OpSchemaCache& ops_;
  BodyBuffers& buffers_;
  NodeIndex index_;
  std::vector<const OpSchema*>& schemas_;
  std::vector<Edge>& edges_;  // node i's inputs: [edge_offsets_[i], edge_offsets_[i + 1])
  std::vector<uint32_t>& edge_offsets_;
  std::vector<int>& topo_;
  std::vector<std::vector<DType>>& types_;
  std::vector<DType>& input_types_;  // InferNode's
};

absl::Status InFunction(const std::string& name, const absl::Status& s) {
  if (s.ok()) return s;
  const std::string prefix = absl::StrCat("function '", name, "'");
  if (absl::StartsWith(s.message(), prefix)) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, ": ", s.message()));
}

absl::Status ValidateFunctionWith(const FunctionDef& function, const FunctionLibrary& library, OpSchemaCache& ops,
                                  BodyBuffers& buffers) {
  const FunctionSignature& sig = function.signature;
  if (sig.name.empty()) return absl::InvalidArgumentError("a function has an empty name");
  if (!function.defined)
    return absl::InvalidArgumentError(absl::StrCat("function '", sig.name, "' is declared but has no definition"));
  for (const auto* params : {&sig.inputs, &sig.outputs}) {
    for (size_t k = 0; k < params->size(); ++k) {
      if ((*params)[k].type == DType::kInvalid)
        return absl::InvalidArgumentError(absl::StrCat("function '", sig.name, "': ",
                                                       params == &sig.inputs ? "argument " : "result ", k,
                                                       " has an invalid dtype"));
    }
  }
  return InFunction(sig.name, BodyValidator(function.node, &function, library, ops, buffers).Run());
}

}  // namespace

absl::Status ValidateFunction(const FunctionDef& function, const FunctionLibrary& library) {
  OpSchemaCache ops;
  BodyBuffers buffers;
  return ValidateFunctionWith(function, library, ops, buffers);
}

absl::StatusOr<std::vector<std::vector<DType>>> InferOutputTypes(const std::vector<NodeDef>& nodes,
                                                                 const FunctionDef* function,
                                                                 const FunctionLibrary& library) {
  OpSchemaCache ops;
  BodyBuffers buffers;
  absl::StatusOr<std::vector<std::vector<DType>>> types =
      BodyValidator(nodes, function, library, ops, buffers).InferTypes();
  if (function != nullptr && !types.ok()) return InFunction(function->signature.name, types.status());
  return types;
}

absl::Status Validate(const Graph& graph) {
  OpSchemaCache ops;  // one registry lookup per op of the graph, not per node
  BodyBuffers buffers;
  TDF_RETURN_IF_ERROR(BodyValidator(graph.node, nullptr, graph.library, ops, buffers).Run());
  for (const auto& [name, f] : graph.library.functions()) {
    if (name != f.signature.name)
      return absl::InvalidArgumentError(
          absl::StrCat("function '", f.signature.name, "' is stored under the name '", name, "'"));
    // A declared-only function is fine until something calls it; the Invoke
    // check reports that call.
    if (!f.defined) continue;
    TDF_RETURN_IF_ERROR(ValidateFunctionWith(f, graph.library, ops, buffers));
  }
  return absl::OkStatus();
}

}  // namespace tdf
