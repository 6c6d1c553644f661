// Optimizer steps as graph ops (tdf/autodiff.h). Every state change is one
// AssignAdd/AssignSub, which the runtime applies atomically (seeds/001), so
// concurrent runs of a step never lose an update to a torn read-modify-write.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "autodiff/emitter.h"
#include "tdf/autodiff.h"
#include "tdf/status.h"

namespace tdf {
namespace {

using autodiff::Emitter;
using autodiff::Key;

struct VarInfo {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;  // of its value: initial_value's, else attr shape's (as the session creates it)
};

absl::StatusOr<std::vector<VarInfo>> FindVariables(const Graph& graph, const std::vector<std::string>& variables,
                                                   const std::vector<std::string>& gradients) {
  if (variables.size() != gradients.size())
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: ", variables.size(), " variables but ", gradients.size(), " gradients"));
  std::vector<VarInfo> out;
  for (const std::string& v : variables) {
    const NodeDef* n = graph.FindNode(v);
    if (n == nullptr || n->op != "Variable")
      return absl::InvalidArgumentError(absl::StrCat("optimizer: '", v, "' is not a Variable of the main graph"));
    VarInfo info;
    info.name = v;
    TDF_ASSIGN_OR_RETURN(info.dtype, n->GetType("dtype"));
    if (info.dtype != DType::kFloat32 && info.dtype != DType::kFloat64)
      return NodeError(*n, absl::StatusCode::kInvalidArgument, "optimizers update floating variables only");
    if (n->FindAttr("initial_value") != nullptr) {
      TDF_ASSIGN_OR_RETURN(Tensor initial, n->GetTensor("initial_value"));
      info.shape = initial.shape();
    } else if (const AttrValue* sh = n->FindAttr("shape"); sh != nullptr && sh->get_if<Shape>() != nullptr) {
      info.shape = *sh->get_if<Shape>();
    }
    out.push_back(std::move(info));
  }
  return out;
}

Tensor ScalarOf(DType t, double v) {
  return t == DType::kFloat32 ? Tensor::Scalar<float>(static_cast<float>(v)) : Tensor::Scalar<double>(v);
}

std::string Const(Emitter& e, DType t, double v) {
  Tensor value = ScalarOf(t, v);
  return e.Op("Const", {}, {{"value", value}, {"dtype", t}});
}

std::string NewVariable(Emitter& e, Graph& graph, const std::string& name, const Tensor& initial) {
  NodeDef var;
  var.name = name;
  var.op = "Variable";
  var.attr = {{"dtype", initial.dtype()}, {"shape", initial.shape()}, {"initial_value", initial}};
  graph.node.push_back(var);
  e.Reinfer(graph.node.back());
  return name;
}

std::string Finish(Emitter& e, const std::vector<std::string>& updates) {
  return e.Op("NoOp", {}, {}, updates);
}

// The main-graph GatherGrad node (axis 0) that `gradient` names, when no node
// reads it: its dense [rows, ...] result exists only to be added to a
// variable, so the step can add dy's rows alone (ScatterAdd) and drop it.
// Likewise an IndexedRowsSum: the gradient of a table that a recursive
// function read by Gather (autodiff.cc), whose rows the step adds alone.
const NodeDef* SparseGatherGradient(const Graph& graph, const std::string& gradient) {
  absl::StatusOr<InputRef> ref = InputRef::Parse(gradient);
  if (!ref.ok() || ref->is_control || ref->port != 0) return nullptr;
  const NodeDef* n = graph.FindNode(ref->node);
  if (n == nullptr) return nullptr;
  const bool gather_grad = n->op == "GatherGrad" && n->GetIntOr("axis", 0) == 0 && n->num_data_inputs() == 3;
  const bool indexed_rows = n->op == "IndexedRowsSum" && n->num_data_inputs() == 2;
  if (!gather_grad && !indexed_rows) return nullptr;
  for (const NodeDef& other : graph.node) {
    for (const std::string& in : other.input) {
      absl::StatusOr<InputRef> r = InputRef::Parse(in);
      if (r.ok() && r->node == n->name) return nullptr;
    }
  }
  return n;
}

}  // namespace

absl::StatusOr<std::string> AddSgdStep(Graph& graph, const std::vector<std::string>& variables,
                                       const std::vector<std::string>& gradients, double learning_rate) {
  TDF_ASSIGN_OR_RETURN(std::vector<VarInfo> vars, FindVariables(graph, variables, gradients));
  Emitter e(&graph.node, &graph.library, "sgd/");
  e.Init();
  std::vector<std::string> updates;
  std::set<std::string> dropped;
  for (size_t i = 0; i < vars.size(); ++i) {
    const std::string lr = Const(e, vars[i].dtype, -learning_rate);
    if (const NodeDef* gg = SparseGatherGradient(graph, gradients[i]); gg != nullptr) {
      // v[indices] += -lr * dy: O(rows gathered), not O(rows of v).
      std::string indices, dy;
      if (gg->op == "GatherGrad") {
        indices = gg->input[1], dy = gg->input[2];
      } else {
        const std::string split = e.Op("IndexedRowsSplit", {gg->input[0], gg->input[1]});
        indices = split, dy = Key(split, 1);
      }
      dropped.insert(gg->name);
      updates.push_back(e.Op("ScatterAdd", {vars[i].name, indices, e.Mul(lr, dy)}, {{"dtype", vars[i].dtype}}));
      continue;
    }
    updates.push_back(e.Op("AssignAdd", {vars[i].name, e.Mul(lr, gradients[i])}, {{"dtype", vars[i].dtype}}));
  }
  std::string step = Finish(e, updates);
  TDF_RETURN_IF_ERROR(e.status());
  graph.node.erase(std::remove_if(graph.node.begin(), graph.node.end(),
                                  [&](const NodeDef& n) { return dropped.count(n.name) > 0; }),
                   graph.node.end());
  return step;
}

absl::StatusOr<std::string> AddAdamStep(Graph& graph, const std::vector<std::string>& variables,
                                        const std::vector<std::string>& gradients, const AdamOptions& o) {
  TDF_ASSIGN_OR_RETURN(std::vector<VarInfo> vars, FindVariables(graph, variables, gradients));
  if (vars.empty()) return absl::InvalidArgumentError("AddAdamStep: no variables");
  std::set<std::string> distinct;
  for (const VarInfo& v : vars)
    if (!distinct.insert(v.name).second)
      return absl::InvalidArgumentError(absl::StrCat("AddAdamStep: variable '", v.name, "' is listed twice"));
  Emitter e(&graph.node, &graph.library, "adam/");
  e.Init();
  // The state variables' names (tdf/autodiff.h), so that users can find them
  // (checkpoints, ReadVariable): "adam_t/<first var>", then "<var>/adam_m"
  // and "<var>/adam_v" per variable. When one is taken (an earlier Adam step
  // on the same variable), all of this step's get the suffix "_<k>", the
  // smallest k >= 1 that frees them all: one suffix per step, predictable.
  std::vector<std::string> state = {absl::StrCat("adam_t/", vars[0].name)};
  for (const VarInfo& v : vars) {
    state.push_back(v.name + "/adam_m");
    state.push_back(v.name + "/adam_v");
  }
  if (std::set<std::string>(state.begin(), state.end()).size() != state.size())
    return absl::InvalidArgumentError("AddAdamStep: the variables' names make two state names equal");
  for (int k = 0;; ++k) {
    const std::string suffix = k == 0 ? "" : absl::StrCat("_", k);
    if (std::none_of(state.begin(), state.end(), [&](const std::string& s) { return e.Taken(s + suffix); })) {
      for (std::string& s : state) s += suffix;
      break;
    }
  }
  const DType t0 = vars[0].dtype;
  std::string counter = NewVariable(e, graph, state[0], ScalarOf(t0, 0));
  std::string t = e.Op("AssignAdd", {counter, Const(e, t0, 1)}, {{"dtype", t0}});
  std::vector<std::string> updates;
  for (const VarInfo& v : vars) {
    const DType d = v.dtype;
    const size_t i = &v - vars.data();
    TDF_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(d, v.shape));
    std::string m = NewVariable(e, graph, state[1 + 2 * i], zeros);
    std::string s = NewVariable(e, graph, state[2 + 2 * i], zeros);
    const std::string& g = gradients[i];
    std::string td = d == t0 ? t : e.Op("Cast", {t}, {{"DstT", d}});
    // m += (1 - b1) (g - m); v += (1 - b2) (g^2 - v).
    std::string m_read = e.Op("Read", {m}, {{"dtype", d}});
    std::string m_new = e.Op("AssignAdd", {m, e.Mul(Const(e, d, 1 - o.beta1), e.Sub(g, m_read))}, {{"dtype", d}});
    std::string s_read = e.Op("Read", {s}, {{"dtype", d}});
    std::string s_new =
        e.Op("AssignAdd", {s, e.Mul(Const(e, d, 1 - o.beta2), e.Sub(e.Mul(g, g), s_read))}, {{"dtype", d}});
    // lr_t = lr sqrt(1 - b2^t) / (1 - b1^t).
    std::string one = Const(e, d, 1);
    std::string lr_t = e.Div(e.Mul(Const(e, d, o.learning_rate),
                                   e.Op("Sqrt", {e.Sub(one, e.Op("Pow", {Const(e, d, o.beta2), td}))})),
                             e.Sub(one, e.Op("Pow", {Const(e, d, o.beta1), td})));
    std::string step = e.Div(e.Mul(lr_t, m_new), e.Add(e.Op("Sqrt", {s_new}), Const(e, d, o.epsilon)));
    updates.push_back(e.Op("AssignSub", {v.name, step}, {{"dtype", d}}));
  }
  std::string done = Finish(e, updates);
  TDF_RETURN_IF_ERROR(e.status());
  return done;
}

}  // namespace tdf
