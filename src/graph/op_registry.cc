#include "tdf/op_registry.h"
#include "base/sync.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tdf {
namespace {

using Types = std::vector<DType>;

absl::Status Err(absl::string_view msg) { return absl::InvalidArgumentError(msg); }

// The one dtype shared by all known inputs (kInvalid if none is known).
absl::StatusOr<DType> CommonType(const InferenceContext& ctx) {
  DType t = DType::kInvalid;
  for (size_t i = 0; i < ctx.input_types.size(); ++i) {
    DType d = ctx.input_types[i];
    if (d == DType::kInvalid) continue;
    if (t == DType::kInvalid) {
      t = d;
    } else if (d != t) {
      return Err(absl::StrCat("dtype mismatch: input 0 is ", DTypeName(t), ", input ", i, " is ", DTypeName(d)));
    }
  }
  return t;
}

// Attr T, checked against the known inputs' common dtype.
absl::StatusOr<DType> TypeFromAttrT(const InferenceContext& ctx, absl::Span<const int> inputs) {
  absl::StatusOr<DType> t = ctx.node.GetType("T");
  if (!t.ok()) return t.status();
  for (int i : inputs) {
    if (i < static_cast<int>(ctx.input_types.size()) && ctx.input_types[i] != DType::kInvalid &&
        ctx.input_types[i] != *t)
      return Err(absl::StrCat("dtype mismatch: input ", i, " is ", DTypeName(ctx.input_types[i]), ", attr T is ",
                              DTypeName(*t)));
  }
  return *t;
}

// TypeFromAttrT over every input, without a list of their indices to
// allocate (every Merge, Call, Enter... of a graph, in each Create).
absl::StatusOr<DType> TypeFromAttrTAllInputs(const InferenceContext& ctx) {
  absl::StatusOr<DType> t = ctx.node.GetType("T");
  if (!t.ok()) return t.status();
  for (size_t i = 0; i < ctx.input_types.size(); ++i) {
    if (ctx.input_types[i] != DType::kInvalid && ctx.input_types[i] != *t)
      return Err(absl::StrCat("dtype mismatch: input ", i, " is ", DTypeName(ctx.input_types[i]), ", attr T is ",
                              DTypeName(*t)));
  }
  return *t;
}

absl::Status RequireInput(const InferenceContext& ctx, int i, DType want, absl::string_view what) {
  if (i < static_cast<int>(ctx.input_types.size()) && ctx.input_types[i] != DType::kInvalid &&
      ctx.input_types[i] != want)
    return Err(absl::StrCat(what, " (input ", i, ") must be ", DTypeName(want), ", got ",
                            DTypeName(ctx.input_types[i])));
  return absl::OkStatus();
}

absl::Status RequireInputClass(const InferenceContext& ctx, int i, bool (*pred)(DType), absl::string_view what) {
  if (i < static_cast<int>(ctx.input_types.size()) && ctx.input_types[i] != DType::kInvalid &&
      !pred(ctx.input_types[i]))
    return Err(absl::StrCat(what, " (input ", i, ") must be ", what, ", got ", DTypeName(ctx.input_types[i])));
  return absl::OkStatus();
}

bool IsIndex(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

TypeInferenceFn Fixed(Types types) {
  return [types](const InferenceContext&) -> absl::StatusOr<Types> { return types; };
}

// Output types = attr T repeated `n` times, inputs all of type T.
TypeInferenceFn AttrT(int n, std::vector<int> typed_inputs = {}, bool all_inputs = true) {
  return [n, typed_inputs, all_inputs](const InferenceContext& ctx) -> absl::StatusOr<Types> {
    absl::StatusOr<DType> t = all_inputs ? TypeFromAttrTAllInputs(ctx) : TypeFromAttrT(ctx, typed_inputs);
    if (!t.ok()) return t.status();
    return Types(n, *t);
  };
}

}  // namespace

OpSchema& OpSchema::SameTypeNumeric() {
  return Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
    absl::StatusOr<DType> t = CommonType(ctx);
    if (!t.ok()) return t.status();
    if (*t == DType::kBool) return Err("expects numeric inputs, got bool");
    return Types{*t};
  });
}

OpSchema& OpSchema::SameTypeFloat() {
  return Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
    absl::StatusOr<DType> t = CommonType(ctx);
    if (!t.ok()) return t.status();
    if (*t != DType::kInvalid && !IsFloating(*t))
      return Err(absl::StrCat("expects float32 or float64 inputs, got ", DTypeName(*t)));
    return Types{*t};
  });
}

OpSchema& OpSchema::SameTypeAny() {
  return Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
    absl::StatusOr<DType> t = CommonType(ctx);
    if (!t.ok()) return t.status();
    return Types{*t};
  });
}

OpSchema& OpSchema::Comparison() {
  return Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
    absl::StatusOr<DType> t = CommonType(ctx);
    if (!t.ok()) return t.status();
    return Types{DType::kBool};
  });
}

OpSchema& OpSchema::Logical() {
  return Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
    for (size_t i = 0; i < ctx.input_types.size(); ++i) {
      absl::Status s = RequireInput(ctx, static_cast<int>(i), DType::kBool, "operand");
      if (!s.ok()) return s;
    }
    return Types{DType::kBool};
  });
}

absl::StatusOr<std::vector<DType>> OpSchema::InferTypes(const InferenceContext& ctx) const {
  const int n = static_cast<int>(ctx.input_types.size());
  if (n < min_inputs_ || (max_inputs_ >= 0 && n > max_inputs_)) {
    std::string want = min_inputs_ == max_inputs_ ? absl::StrCat(min_inputs_)
                       : max_inputs_ < 0         ? absl::StrCat("at least ", min_inputs_)
                                                 : absl::StrCat(min_inputs_, " to ", max_inputs_);
    return NodeError(ctx.node, absl::StatusCode::kInvalidArgument,
                     absl::StrCat("wrong number of data inputs: has ", n, ", op takes ", want));
  }
  for (const AttrSpec& spec : attrs_) {
    const AttrValue* v = ctx.node.FindAttr(spec.name);
    if (v == nullptr) {
      if (spec.required)
        return NodeError(ctx.node, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("missing required attribute '", spec.name, "' (", spec.type, ")"));
      continue;
    }
    if (v->TypeName() != spec.type)
      return NodeError(ctx.node, absl::StatusCode::kInvalidArgument,
                       absl::StrCat("attribute '", spec.name, "' should be ", spec.type, ", is ", v->TypeName()));
  }
  if (check_attrs_) {
    absl::Status s = check_attrs_(ctx.node);
    if (!s.ok()) return WithNodeLabel(ctx.node, s);
  }
  if (!infer_) return Types{};
  absl::StatusOr<Types> types = infer_(ctx);
  if (!types.ok()) return WithNodeLabel(ctx.node, types.status());
  return types;
}

OpRegistry* OpRegistry::Global() {
  static OpRegistry* const registry = [] {
    auto* r = new OpRegistry;
    RegisterBuiltinOps(*r);
    return r;
  }();
  return registry;
}

absl::Status OpRegistry::Register(OpSchema schema) {
  base::MutexLock lock(&mu_);
  std::string name = schema.name();
  if (ops_.count(name) > 0) return absl::AlreadyExistsError(absl::StrCat("op '", name, "' is already registered"));
  ops_.emplace(name, std::make_unique<OpSchema>(std::move(schema)));
  return absl::OkStatus();
}

const OpSchema* OpRegistry::Find(absl::string_view op) const {
  base::MutexLock lock(&mu_);
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::ListOps() const {
  base::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, schema] : ops_) names.push_back(name);
  return names;
}

namespace {

void Add(OpRegistry& r, OpSchema s) { (void)r.Register(std::move(s)); }

// ---- Attribute checks: what the kernels refuse whatever the inputs. The
// attributes' presence and types are already checked. ----

std::string IntList(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

// Reshape: at most one -1, no other negative dim, and the known dims'
// product fits in int64 (ReshapeKernel::Create).
absl::Status CheckReshapeAttrs(const NodeDef& node) {
  const std::vector<int64_t>& dims = *node.FindAttr("shape")->get_if<std::vector<int64_t>>();
  std::vector<int64_t> known;
  int unknown = 0;
  for (int64_t d : dims) {
    if (d == -1 && unknown++ == 0) continue;
    if (d < 0) return Err(absl::StrCat("bad target shape ", IntList(dims), ": dims must be >= 0, with at most one -1"));
    known.push_back(d);
  }
  if (absl::Status s = Shape(absl::MakeConstSpan(known)).Validate(); !s.ok())
    return Err(absl::StrCat("bad target shape ", IntList(dims), ": ", s.message()));
  return absl::OkStatus();
}

// Transpose: perm, when given, is a permutation of 0..n-1 (the input's rank
// must then be n, which only the kernel can check).
absl::Status CheckTransposeAttrs(const NodeDef& node) {
  const AttrValue* a = node.FindAttr("perm");
  if (a == nullptr) return absl::OkStatus();
  const std::vector<int64_t>& perm = *a->get_if<std::vector<int64_t>>();
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p])
      return Err(absl::StrCat("perm ", IntList(perm), " is not a permutation of 0..", perm.size() - 1));
    seen[p] = true;
  }
  return absl::OkStatus();
}

// Slice and SliceGrad: begin and size of one length, begin >= 0, size >= 0
// or -1 (to the end) (kernels::GetSliceAttrs, CheckSlice).
absl::Status CheckSliceAttrs(const NodeDef& node) {
  const std::vector<int64_t>& begin = *node.FindAttr("begin")->get_if<std::vector<int64_t>>();
  const std::vector<int64_t>& size = *node.FindAttr("size")->get_if<std::vector<int64_t>>();
  if (begin.size() != size.size())
    return Err(absl::StrCat("begin ", IntList(begin), " has ", begin.size(), " entries but size ", IntList(size),
                            " has ", size.size()));
  for (size_t d = 0; d < begin.size(); ++d) {
    if (begin[d] < 0) return Err(absl::StrCat("begin ", IntList(begin), ": dim ", d, " is negative"));
    if (size[d] < -1) return Err(absl::StrCat("size ", IntList(size), ": dim ", d, " is below -1"));
  }
  return absl::OkStatus();
}

// Cast: a real destination dtype (CastKernel::Create).
absl::Status CheckCastAttrs(const NodeDef& node) {
  if (*node.FindAttr("DstT")->get_if<DType>() == DType::kInvalid) return Err("DstT must not be invalid");
  return absl::OkStatus();
}

// Variable: a real dtype, and the state the session creates from it: a
// valid initial_value, or zeros of a valid shape.
absl::Status CheckVariableAttrs(const NodeDef& node) {
  if (*node.FindAttr("dtype")->get_if<DType>() == DType::kInvalid) return Err("dtype must not be invalid");
  if (const AttrValue* init = node.FindAttr("initial_value")) {
    if (!init->get_if<Tensor>()->valid()) return Err("initial_value is an invalid tensor");
  } else if (const AttrValue* shape = node.FindAttr("shape")) {
    if (absl::Status s = shape->get_if<Shape>()->Validate(); !s.ok()) return Err(s.message());
  }
  return absl::OkStatus();
}

// CopyToDevice: a CUDA device name (CopyToDeviceKernel::Create).
absl::Status CheckCopyToDeviceAttrs(const NodeDef& node) {
  const std::string& name = *node.FindAttr("device")->get_if<std::string>();
  absl::StatusOr<Device> device = Device::Parse(name);
  if (!device.ok() || device->type != Device::Type::kCuda)
    return Err(absl::StrCat("attr device '", name, "' is not a CUDA device"));
  return absl::OkStatus();
}

void RegisterGraphOps(OpRegistry& r) {
  Add(r, OpSchema("Const").Inputs(0).Attr("value", "tensor").Attr("dtype", "type", false)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               // Read in place: GetTensor copies the tensor (its data, for a
               // large one), for every Const validated and compiled.
               const AttrValue* value = ctx.node.FindAttr("value");
               const Tensor* v = value != nullptr ? value->get_if<Tensor>() : nullptr;
               if (v == nullptr) return ctx.node.GetTensor("value").status();  // its error
               if (!v->valid()) return Err("attribute 'value' is an invalid tensor");
               if (const AttrValue* d = ctx.node.FindAttr("dtype"); d && d->get_if<DType>() &&
                                                                    *d->get_if<DType>() != v->dtype())
                 return Err(absl::StrCat("attr dtype ", DTypeName(*d->get_if<DType>()), " but value is ",
                                         DTypeName(v->dtype())));
               return Types{v->dtype()};
             })
             .Doc("A constant tensor."));
  Add(r, OpSchema("Placeholder").Inputs(0).Attr("dtype", "type").Attr("shape", "shape", false)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> d = ctx.node.GetType("dtype");
               if (!d.ok()) return d.status();
               if (*d == DType::kInvalid) return Err("dtype must not be invalid");
               return Types{*d};
             })
             .Doc("A value fed to Session::Run; an error if missing."));
  Add(r, OpSchema("Identity").Inputs(1).SameTypeAny().Doc("Forwards its input."));
  Add(r, OpSchema("NoOp").Inputs(0).Doc("Does nothing; a target for control edges."));
}

void RegisterControlFlowOps(OpRegistry& r) {
  Add(r, OpSchema("Switch").Kind(OpKind::kSwitch).Inputs(2)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::Status s = RequireInput(ctx, 1, DType::kBool, "predicate");
               if (!s.ok()) return s;
               DType t = ctx.input_types[0];
               if (const AttrValue* a = ctx.node.FindAttr("T"); a && a->get_if<DType>()) {
                 if (t != DType::kInvalid && t != *a->get_if<DType>())
                   return Err(absl::StrCat("dtype mismatch: data is ", DTypeName(t), ", attr T is ",
                                           DTypeName(*a->get_if<DType>())));
                 t = *a->get_if<DType>();
               }
               return Types{t, t};
             })
             .Doc("Outputs (false, true): the data goes to the output the predicate selects; the other is dead."));
  Add(r, OpSchema("Merge").Kind(OpKind::kMerge).InputsRange(1, -1).Attr("T", "type")
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> t = TypeFromAttrTAllInputs(ctx);
               if (!t.ok()) return t.status();
               return Types{*t, DType::kInt32};
             })
             .Doc("Outputs (value, index) of its first live input; dead only when every input is dead."));
  Add(r, OpSchema("Enter").Kind(OpKind::kEnter).Inputs(1).Attr("T", "type").Attr("frame_name", "string")
             .Attr("is_constant", "bool", false).Attr("parallel_iterations", "int", false)
             .Infer(AttrT(1))
             .Doc("t -> t/frame/0: enters the loop frame `frame_name`. A constant Enter's value is visible to every "
                  "iteration."));
  Add(r, OpSchema("Exit").Kind(OpKind::kExit).Inputs(1).Attr("T", "type").Infer(AttrT(1))
             .Doc("t/frame/k -> t: leaves a loop frame."));
  Add(r, OpSchema("NextIteration").Kind(OpKind::kNextIteration).Inputs(1).Attr("T", "type").Infer(AttrT(1))
             .Doc("t/frame/k -> t/frame/k+1."));
  Add(r, OpSchema("LoopCond").Inputs(1).Logical().Doc("Forwards the loop predicate."));
  Add(r, OpSchema("Call").Kind(OpKind::kCall).InputsRange(0, 1).Attr("T", "type").Attr("function", "string")
             .Attr("call_site", "int").Attr("arg_index", "int")
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> t = TypeFromAttrTAllInputs(ctx);
               if (!t.ok()) return t.status();
               return Types{*t};
             })
             .Doc("t -> t/call_site: argument `arg_index` of a new invocation of `function`. Without a data input "
                  "(a function of no arguments) it only creates the invocation."));
  Add(r, OpSchema("Return").Kind(OpKind::kReturn).Inputs(1).Attr("T", "type").Attr("function", "string")
             .Attr("call_site", "int").Attr("result_index", "int").Infer(AttrT(1))
             .Doc("t/call_site -> t: result `result_index` of the invocation created at `call_site`."));
  Add(r, OpSchema("Invoke").Kind(OpKind::kInvoke).InputsRange(0, -1).Attr("function", "string")
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<std::string> fname = ctx.node.GetString("function");
               if (!fname.ok()) return fname.status();
               const FunctionDef* f = ctx.library ? ctx.library->Find(*fname) : nullptr;
               if (f == nullptr) return absl::NotFoundError(absl::StrCat("calls undefined function '", *fname, "'"));
               const auto& sig = f->signature;
               // A split call site (autodiff's paired calls; see
               // staticize_recursion.cc): this Invoke supplies only the
               // arguments `partial_args` and yields only `partial_results`.
               std::vector<int64_t> args, results;
               for (size_t i = 0; i < sig.inputs.size(); ++i) args.push_back(static_cast<int64_t>(i));
               for (size_t i = 0; i < sig.outputs.size(); ++i) results.push_back(static_cast<int64_t>(i));
               if (const AttrValue* a = ctx.node.FindAttr("partial_args"); a && a->get_if<std::vector<int64_t>>())
                 args = *a->get_if<std::vector<int64_t>>();
               if (const AttrValue* a = ctx.node.FindAttr("partial_results");
                   a && a->get_if<std::vector<int64_t>>())
                 results = *a->get_if<std::vector<int64_t>>();
               if (args.size() != ctx.input_types.size())
                 return Err(absl::StrCat("calls '", *fname, "' with ", ctx.input_types.size(),
                                         " arguments; it takes ", args.size()));
               for (size_t k = 0; k < args.size(); ++k) {
                 const int64_t i = args[k];
                 if (i < 0 || i >= static_cast<int64_t>(sig.inputs.size()))
                   return Err(absl::StrCat("partial_args index ", i, " is out of range"));
                 if (ctx.input_types[k] != DType::kInvalid && ctx.input_types[k] != sig.inputs[i].type)
                   return Err(absl::StrCat("argument ", i, " of '", *fname, "' must be ", DTypeName(sig.inputs[i].type),
                                           ", got ", DTypeName(ctx.input_types[k])));
               }
               Types out;
               for (int64_t r : results) {
                 if (r < 0 || r >= static_cast<int64_t>(sig.outputs.size()))
                   return Err(absl::StrCat("partial_results index ", r, " is out of range"));
                 out.push_back(sig.outputs[r].type);
               }
               return out;
             })
             .Doc("Calls `function` with its inputs; outputs its results. Transformed away by "
                  "StaticizeRecursion; executed by instantiation in dynamic mode."));
  Add(r, OpSchema("Arg").Kind(OpKind::kArg).Inputs(0).Attr("T", "type").Attr("index", "int").Infer(AttrT(1))
             .Doc("Argument `index` of the enclosing function."));
  Add(r, OpSchema("Retval").Kind(OpKind::kRetval).Inputs(1).Attr("T", "type").Attr("index", "int").Infer(
             [](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> t = TypeFromAttrTAllInputs(ctx);
               if (!t.ok()) return t.status();
               return Types{};
             })
             .Doc("Result `index` of the enclosing function."));
}

void RegisterStateOps(OpRegistry& r) {
  Add(r, OpSchema("Variable").Kind(OpKind::kVariable).Inputs(0).Attr("dtype", "type").Attr("shape", "shape", false)
             .Attr("initial_value", "tensor", false).CheckAttrs(CheckVariableAttrs).Stateful()
             .Infer(Fixed({DType::kInt64}))
             .Doc("A handle to state that outlives a run (seeds/001 Var). Initialized from `initial_value`, or "
                  "zeros of `shape`, at session creation."));
  auto var_rule = [](bool has_value) {
    return [has_value](const InferenceContext& ctx) -> absl::StatusOr<Types> {
      absl::Status s = RequireInput(ctx, 0, DType::kInt64, "variable handle");
      if (!s.ok()) return s;
      absl::StatusOr<DType> t = ctx.node.GetType("dtype");
      if (!t.ok()) return t.status();
      if (has_value && ctx.input_types.size() > 1 && ctx.input_types[1] != DType::kInvalid &&
          ctx.input_types[1] != *t)
        return Err(absl::StrCat("value is ", DTypeName(ctx.input_types[1]), ", variable is ", DTypeName(*t)));
      return Types{*t};
    };
  };
  Add(r, OpSchema("Read").Inputs(1).Attr("dtype", "type").Stateful().Infer(var_rule(false))
             .Doc("The variable's current value."));
  Add(r, OpSchema("Assign").Inputs(2).Attr("dtype", "type").Stateful().Infer(var_rule(true))
             .Doc("Atomically sets the variable; outputs the new value."));
  Add(r, OpSchema("AssignAdd").Inputs(2).Attr("dtype", "type").Stateful().Infer(var_rule(true))
             .Doc("Atomically adds to the variable (read-modify-write); outputs the new value."));
  Add(r, OpSchema("AssignSub").Inputs(2).Attr("dtype", "type").Stateful().Infer(var_rule(true))
             .Doc("Atomically subtracts from the variable; outputs the new value."));
  Add(r, OpSchema("ScatterAdd").Inputs(3).Attr("dtype", "type").Stateful()
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::Status s = RequireInput(ctx, 0, DType::kInt64, "variable handle");
               if (!s.ok()) return s;
               s = RequireInputClass(ctx, 1, IsIndex, "indices");
               if (!s.ok()) return s;
               absl::StatusOr<DType> t = ctx.node.GetType("dtype");
               if (!t.ok()) return t.status();
               if (ctx.input_types.size() > 2 && ctx.input_types[2] != DType::kInvalid && ctx.input_types[2] != *t)
                 return Err(absl::StrCat("updates are ", DTypeName(ctx.input_types[2]), ", variable is ",
                                         DTypeName(*t)));
               return Types{*t};
             })
             .Doc("(handle, indices, updates): atomically adds updates[j] to row indices[j] of the variable "
                  "(axis 0; repeats accumulate) — a Gather gradient's sparse update; outputs the new value."));
}

void RegisterMathOps(OpRegistry& r) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Maximum", "Minimum", "Pow"})
    Add(r, OpSchema(op).Inputs(2).SameTypeNumeric().Doc("Elementwise with broadcasting."));
  Add(r, OpSchema("AddN").InputsRange(1, -1).SameTypeNumeric().Doc("Sum of its inputs (same shape)."));
  for (const char* op : {"Neg", "Abs", "Square", "Sign"})
    Add(r, OpSchema(op).Inputs(1).SameTypeNumeric().Doc("Elementwise."));
  for (const char* op : {"Exp", "Log", "Tanh", "Sigmoid", "Relu", "Sqrt", "Rsqrt", "Reciprocal"})
    Add(r, OpSchema(op).Inputs(1).SameTypeFloat().Doc("Elementwise."));
  for (const char* op : {"TanhGrad", "SigmoidGrad", "ReluGrad"})
    Add(r, OpSchema(op).Inputs(2).SameTypeFloat().Doc("Gradient helper: (y or x, dy) -> dx."));
  for (const char* op : {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"})
    Add(r, OpSchema(op).Inputs(2).Comparison().Doc("Elementwise comparison with broadcasting."));
  Add(r, OpSchema("LogicalAnd").Inputs(2).Logical().Doc("Elementwise."));
  Add(r, OpSchema("LogicalOr").Inputs(2).Logical().Doc("Elementwise."));
  Add(r, OpSchema("LogicalNot").Inputs(1).Logical().Doc("Elementwise."));
  Add(r, OpSchema("Cast").Inputs(1).Attr("DstT", "type").CheckAttrs(CheckCastAttrs)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> t = ctx.node.GetType("DstT");
               if (!t.ok()) return t.status();
               return Types{*t};
             })
             .Doc("Converts to DstT."));
  Add(r, OpSchema("Select").Inputs(3)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::Status s = RequireInput(ctx, 0, DType::kBool, "condition");
               if (!s.ok()) return s;
               DType a = ctx.input_types[1], b = ctx.input_types[2];
               if (a != DType::kInvalid && b != DType::kInvalid && a != b)
                 return Err(absl::StrCat("dtype mismatch: ", DTypeName(a), " vs ", DTypeName(b)));
               return Types{a != DType::kInvalid ? a : b};
             })
             .Doc("Elementwise cond ? x : y with broadcasting."));
}

void RegisterTensorOps(OpRegistry& r) {
  Add(r, OpSchema("MatMul").Inputs(2).Attr("transpose_a", "bool", false).Attr("transpose_b", "bool", false)
             .SameTypeFloat().Doc("Matrix product of rank-2 tensors."));
  Add(r, OpSchema("MatMulAdd").InputsRange(2, -1).Attr("transpose_a", "bool", false)
             .Attr("transpose_b", "bool", false).SameTypeFloat()
             .Doc("(a, b, addends...): MatMul(a, b) plus the addends (each of the product's shape) in one pass; "
                  "autodiff fuses a gradient's sum of a MatMul and other terms into it."));
  // A weight's gradient as outer-product rows (autodiff of recursive functions; kernels in matmul.cc).
  Add(r, OpSchema("OuterRowsConcat").InputsRange(1, -1).SameTypeFloat()
             .Doc("(w [K, N], rows...) -> [m, K + N]: the rows [x_i | g_i] of every input, standing for the sum "
                  "of x_i^T g_i (compacted to min(K, N) rows when longer); with no rows, the empty sum."));
  Add(r, OpSchema("OuterRowsSum").Inputs(2).SameTypeFloat()
             .Doc("(rows [m, K + N], w [K, N]) -> [K, N]: the sum of x_i^T g_i over the rows [x_i | g_i]."));
  // A table's gradient as indexed rows (autodiff of recursive functions; kernels in indexed_rows.cc).
  Add(r, OpSchema("IndexedRows").Inputs(3)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::Status s = RequireInputClass(ctx, 1, IsIndex, "indices");
               if (!s.ok()) return s;
               DType p = ctx.input_types[0], d = ctx.input_types[2];
               if (p != DType::kInvalid && d != DType::kInvalid && p != d)
                 return Err(absl::StrCat("dtype mismatch: the table is ", DTypeName(p), ", dy is ", DTypeName(d)));
               if ((p != DType::kInvalid && !IsFloating(p)) || (d != DType::kInvalid && !IsFloating(d)))
                 return Err("expects a float table and dy");
               return Types{p != DType::kInvalid ? p : d};
             })
             .Doc("(P [R, ...], indices, dy) -> [count, 1 + D]: the gradient dy of Gather(P, indices) (axis 0) as "
                  "rows [index | dy row], the index held bit for bit in the first element."));
  Add(r, OpSchema("IndexedRowsConcat").InputsRange(1, -1).SameTypeFloat()
             .Doc("(P, rows...) -> [m, 1 + D]: the indexed rows of every input, standing for their scatter-add "
                  "into zeros of P's shape (compacted to one row per distinct index when more than P's rows); "
                  "with no rows, the empty sum."));
  Add(r, OpSchema("IndexedRowsSum").Inputs(2).SameTypeFloat()
             .Doc("(rows, P) -> zeros of P's shape with every row added at its index."));
  Add(r, OpSchema("IndexedRowsSplit").Inputs(2)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> t = CommonType(ctx);
               if (!t.ok()) return t.status();
               if (*t != DType::kInvalid && !IsFloating(*t)) return Err("expects float inputs");
               return Types{DType::kInt64, *t};
             })
             .Doc("(rows, P) -> (indices int64 [m], values [m, P's row shape]): indexed rows taken apart, for a "
                  "sparse update of the variable P (ScatterAdd)."));
  for (const char* op : {"Sum", "Mean", "Max"})
    Add(r, OpSchema(op).Inputs(1).Attr("axes", "list(int)", false).Attr("keep_dims", "bool", false)
               .SameTypeNumeric().Doc("Reduces over `axes` (all axes when absent)."));
  Add(r, OpSchema("Reshape").Inputs(1).Attr("shape", "list(int)").CheckAttrs(CheckReshapeAttrs).SameTypeAny()
             .Doc("Same elements, new shape; one dim may be -1."));
  Add(r, OpSchema("Transpose").Inputs(1).Attr("perm", "list(int)", false).CheckAttrs(CheckTransposeAttrs)
             .SameTypeAny()
             .Doc("Permutes the dims (reverses them when perm is absent)."));
  Add(r, OpSchema("Concat").InputsRange(1, -1).Attr("axis", "int").SameTypeAny()
             .Doc("Joins its inputs along `axis`."));
  Add(r, OpSchema("Slice").Inputs(1).Attr("begin", "list(int)").Attr("size", "list(int)")
             .CheckAttrs(CheckSliceAttrs).SameTypeAny()
             .Doc("x[begin : begin+size] per dim; size -1 means to the end."));
  Add(r, OpSchema("Gather").Inputs(2).Attr("axis", "int", false)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::Status s = RequireInputClass(ctx, 1, IsIndex, "indices");
               if (!s.ok()) return s;
               return Types{ctx.input_types[0]};
             })
             .Doc("Rows of params (along `axis`) picked by integer indices."));
  // Gradient helpers of the three ops above (src/autodiff/gradients.cc).
  Add(r, OpSchema("GatherGrad").Inputs(3).Attr("axis", "int", false)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::Status s = RequireInputClass(ctx, 1, IsIndex, "indices");
               if (!s.ok()) return s;
               DType p = ctx.input_types[0], d = ctx.input_types[2];
               if (p != DType::kInvalid && d != DType::kInvalid && p != d)
                 return Err(absl::StrCat("dtype mismatch: params is ", DTypeName(p), ", dy is ", DTypeName(d)));
               if (p == DType::kBool || d == DType::kBool) return Err("expects numeric params and dy, got bool");
               return Types{p != DType::kInvalid ? p : d};
             })
             .Doc("(params, indices, dy) -> zeros of params' shape with each slice of dy added at its index along "
                  "`axis` (repeated indices accumulate): the gradient of Gather w.r.t. params."));
  Add(r, OpSchema("SliceGrad").Inputs(2).Attr("begin", "list(int)").Attr("size", "list(int)")
             .CheckAttrs(CheckSliceAttrs).SameTypeNumeric()
             .Doc("(x, dy) -> zeros of x's shape with dy written at `begin`: the gradient of Slice (same attrs) "
                  "w.r.t. x."));
  Add(r, OpSchema("ConcatGrad").InputsRange(2, -1).Attr("axis", "int")
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> t = CommonType(ctx);
               if (!t.ok()) return t.status();
               return Types(ctx.input_types.size() - 1, *t);
             })
             .Doc("(dy, x_0, ..., x_{n-1}) -> n outputs, output k the part of dy that Concat(x_0, ..., x_{n-1}) "
                  "along `axis` took from x_k: the gradient of Concat."));
  Add(r, OpSchema("Softmax").Inputs(1).SameTypeFloat().Doc("Softmax over the last axis."));
  Add(r, OpSchema("SoftmaxCrossEntropy").Inputs(2)
             .Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               absl::StatusOr<DType> t = CommonType(ctx);
               if (!t.ok()) return t.status();
               if (*t != DType::kInvalid && !IsFloating(*t)) return Err("expects float inputs");
               return Types{*t, *t};
             })
             .Doc("(logits, labels) -> (loss per row, d loss / d logits); softmax over the last axis."));
  Add(r, OpSchema("ZerosLike").Inputs(1).SameTypeAny().Doc("Zeros of the input's shape and dtype."));
  Add(r, OpSchema("OnesLike").Inputs(1).SameTypeAny().Doc("Ones of the input's shape and dtype."));
  Add(r, OpSchema("BroadcastTo").Inputs(2).Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               return Types{ctx.input_types[0]};
             })
             .Doc("Broadcasts input 0 to the shape of input 1."));
  Add(r, OpSchema("SumToShapeOf").Inputs(2).Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               return Types{ctx.input_types[0]};
             })
             .Doc("Sums input 0 over the broadcast dims so it has the shape of input 1 (gradient of broadcasting)."));
  Add(r, OpSchema("ReshapeLike").Inputs(2).Infer([](const InferenceContext& ctx) -> absl::StatusOr<Types> {
               return Types{ctx.input_types[0]};
             })
             .Doc("Reshapes input 0 to the shape of input 1."));
  // Inserted by the placement pass (tdf/placement.h); host-side kernels in
  // src/cuda/copy_kernels.cc.
  Add(r, OpSchema("CopyToDevice").Inputs(1).Attr("device", "string").CheckAttrs(CheckCopyToDeviceAttrs)
             .SameTypeAny()
             .Doc("Copies a host value to the CUDA device `device` (\"cuda:0\"), asynchronously on its stream; a "
                  "value already there is forwarded."));
  Add(r, OpSchema("CopyToHost").Inputs(1).SameTypeAny()
             .Doc("Copies a device value to the host and waits for it; a host value is forwarded."));
}

}  // namespace

void RegisterBuiltinOps(OpRegistry& registry) {
  RegisterGraphOps(registry);
  RegisterControlFlowOps(registry);
  RegisterStateOps(registry);
  RegisterMathOps(registry);
  RegisterTensorOps(registry);
  RegisterDistributedOps(registry);
}

}  // namespace tdf
