// TensorFlow ops -> tdf ops (importer.h ConvertNode): renamed ops, inputs
// that tdf takes as attributes (axes, shapes, permutations), and the few
// TensorFlow ops that are a small composition of tdf's.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/tf_import/importer.h"
#include "tdf/op_registry.h"
#include "tdf/serialize.h"
#include "tdf/status.h"

namespace tdf {
namespace tf_import {
namespace {

using Mapper = std::function<absl::Status(const TfNode&, BodyContext&)>;

// A tdf node for `tf`: its control inputs follow the data inputs.
NodeDef Make(const TfNode& tf, std::string name, std::string op, std::vector<std::string> data) {
  NodeDef n;
  n.name = std::move(name);
  n.op = std::move(op);
  n.input = std::move(data);
  n.input.insert(n.input.end(), tf.control.begin(), tf.control.end());
  n.device = tf.device;
  return n;
}

// Copies TensorFlow attribute `name` (if present) into `out`, converted.
absl::Status CopyAttr(const TfNode& tf, const std::string& name, NodeDef& out) {
  const tfpb::AttrValue* a = tf.FindAttr(name);
  if (a == nullptr) return absl::OkStatus();
  switch (a->value_case()) {
    case tfpb::AttrValue::kType: {
      TDF_ASSIGN_OR_RETURN(DType t, ConvertDType(a->type(), tf, absl::StrCat("attr ", name)));
      out.attr[name] = t;
      return absl::OkStatus();
    }
    case tfpb::AttrValue::kS: out.attr[name] = a->s(); return absl::OkStatus();
    case tfpb::AttrValue::kI: out.attr[name] = static_cast<int64_t>(a->i()); return absl::OkStatus();
    case tfpb::AttrValue::kB: out.attr[name] = a->b(); return absl::OkStatus();
    case tfpb::AttrValue::kF: out.attr[name] = static_cast<double>(a->f()); return absl::OkStatus();
    default: return tf.Invalid(absl::StrCat("attribute '", name, "' has an unexpected kind"));
  }
}

// Same inputs, op renamed, the listed attributes copied.
Mapper Rename(std::string tdf_op, std::vector<std::string> attrs = {}) {
  return [tdf_op, attrs](const TfNode& tf, BodyContext& ctx) -> absl::Status {
    NodeDef n = Make(tf, tf.name(), tdf_op, tf.data);
    for (const std::string& a : attrs) TDF_RETURN_IF_ERROR(CopyAttr(tf, a, n));
    ctx.out->push_back(std::move(n));
    return absl::OkStatus();
  };
}

absl::Status NeedInputs(const TfNode& tf, size_t n) {
  if (tf.data.size() == n) return absl::OkStatus();
  return tf.Invalid(absl::StrCat("has ", tf.data.size(), " data inputs; TensorFlow's ", tf.op(), " takes ", n));
}

// Input `i` of `tf` as a constant integer vector (a scalar gives one
// value): what tdf takes as an attribute.
absl::StatusOr<std::vector<int64_t>> ConstInts(const TfNode& tf, const BodyContext& ctx, size_t i,
                                               absl::string_view what) {
  TDF_ASSIGN_OR_RETURN(std::optional<Tensor> t, ctx.ConstantValue(tf.data[i]));
  if (!t.has_value())
    return tf.Unsupported(absl::StrCat("input ", i, " (", what, ", from '", tf.data[i],
                                       "') is not a constant; tdf takes ", what,
                                       " as an attribute, known when the graph is imported"));
  if (t->shape().rank() > 1)
    return tf.Invalid(absl::StrCat("input ", i, " (", what, ") has rank ", t->shape().rank(), "; want a vector"));
  std::vector<int64_t> v;
  const int64_t n = t->num_elements();
  if (t->dtype() == DType::kInt32) {
    for (int64_t k = 0; k < n; ++k) v.push_back(t->data<int32_t>()[k]);
  } else if (t->dtype() == DType::kInt64) {
    for (int64_t k = 0; k < n; ++k) v.push_back(t->data<int64_t>()[k]);
  } else {
    return tf.Invalid(absl::StrCat("input ", i, " (", what, ") is ", DTypeName(t->dtype()), "; want int32 or int64"));
  }
  return v;
}

// A constant of `shape` (zeros of `dtype`) placed in the frame of data
// input `anchor` by a control edge from that input's node: a Const has no
// inputs, and a source node fires in the main graph only. The anchor is a
// constant-folded input, so its node has a single output.
absl::Status EmitShapeCarrier(const TfNode& tf, BodyContext& ctx, const std::string& name, DType dtype,
                              const std::vector<int64_t>& dims, const std::string& anchor) {
  Shape shape;
  for (int64_t d : dims) {
    if (d < 0) return tf.Invalid(absl::StrCat("shape [", absl::StrJoin(dims, ","), "] has a negative dimension"));
    shape.AddDim(d);
  }
  // A few bytes of input must not allocate gigabytes (tdf/serialize.h).
  if (!shape.Validate().ok() || shape.num_elements() > kMaxSplatElements)
    return tf.Unsupported(absl::StrCat("shape [", absl::StrJoin(dims, ","), "] has more than ", kMaxSplatElements,
                                       " elements; tdf's BroadcastTo takes its shape from a tensor of that shape, "
                                       "which the importer does not allocate above that size"));
  absl::StatusOr<Tensor> zeros = Tensor::Zeros(dtype, shape);
  if (!zeros.ok()) return tf.Invalid(absl::StrCat("shape [", absl::StrJoin(dims, ","), "]: ", zeros.status().message()));
  TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(anchor));
  NodeDef c = Make(tf, name, "Const", {});
  c.input.insert(c.input.begin(), absl::StrCat("^", ref.node));
  c.attr["value"] = *std::move(zeros);
  c.attr["dtype"] = dtype;
  ctx.out->push_back(std::move(c));
  return absl::OkStatus();
}

absl::Status Reduction(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
  TDF_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ConstInts(tf, ctx, 1, "reduction_indices"));
  NodeDef n = Make(tf, tf.name(), tf.op(), {tf.data[0]});
  n.attr["axes"] = std::move(axes);
  n.attr["keep_dims"] = BoolAttr(tf, "keep_dims").value_or(false);
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

// Op(x, <constant input>) -> Op(x) with the input as attribute `attr`.
Mapper IntsInputAsAttr(std::string tdf_op, size_t input, std::string what, std::string attr) {
  return [=](const TfNode& tf, BodyContext& ctx) -> absl::Status {
    TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
    TDF_ASSIGN_OR_RETURN(std::vector<int64_t> v, ConstInts(tf, ctx, input, what));
    NodeDef n = Make(tf, tf.name(), tdf_op, {tf.data[1 - input]});
    n.attr[attr] = std::move(v);
    ctx.out->push_back(std::move(n));
    return absl::OkStatus();
  };
}

absl::StatusOr<int64_t> ConstScalarInt(const TfNode& tf, const BodyContext& ctx, size_t i, absl::string_view what) {
  TDF_ASSIGN_OR_RETURN(std::vector<int64_t> v, ConstInts(tf, ctx, i, what));
  if (v.size() != 1) return tf.Invalid(absl::StrCat("input ", i, " (", what, ") must hold one value"));
  return v[0];
}

// ConcatV2(values..., axis) and Concat(concat_dim, values...).
Mapper ConcatMapper(bool axis_last) {
  return [axis_last](const TfNode& tf, BodyContext& ctx) -> absl::Status {
    if (tf.data.size() < 2) return tf.Invalid("needs at least one value and the axis");
    const size_t axis_input = axis_last ? tf.data.size() - 1 : 0;
    TDF_ASSIGN_OR_RETURN(int64_t axis, ConstScalarInt(tf, ctx, axis_input, "axis"));
    std::vector<std::string> values(tf.data.begin() + (axis_last ? 0 : 1), tf.data.end() - (axis_last ? 1 : 0));
    NodeDef n = Make(tf, tf.name(), "Concat", std::move(values));
    n.attr["axis"] = axis;
    ctx.out->push_back(std::move(n));
    return absl::OkStatus();
  };
}

absl::Status SliceMapper(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 3));
  TDF_ASSIGN_OR_RETURN(std::vector<int64_t> begin, ConstInts(tf, ctx, 1, "begin"));
  TDF_ASSIGN_OR_RETURN(std::vector<int64_t> size, ConstInts(tf, ctx, 2, "size"));
  NodeDef n = Make(tf, tf.name(), "Slice", {tf.data[0]});
  n.attr["begin"] = std::move(begin);
  n.attr["size"] = std::move(size);
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

// GatherV2(params, indices, axis) and Gather(params, indices).
absl::Status GatherMapper(const TfNode& tf, BodyContext& ctx) {
  int64_t axis = 0;
  if (tf.op() == "GatherV2") {
    TDF_RETURN_IF_ERROR(NeedInputs(tf, 3));
    TDF_ASSIGN_OR_RETURN(axis, ConstScalarInt(tf, ctx, 2, "axis"));
    if (IntAttr(tf, "batch_dims").value_or(0) != 0) return tf.Unsupported("batch_dims other than 0");
  } else {
    TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
  }
  NodeDef n = Make(tf, tf.name(), "Gather", {tf.data[0], tf.data[1]});
  n.attr["axis"] = axis;
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

// Fill(dims, value) and BroadcastTo(input, shape): tdf's BroadcastTo takes
// the target shape from a tensor of that shape.
Mapper BroadcastMapper(size_t value_input, size_t shape_input) {
  return [=](const TfNode& tf, BodyContext& ctx) -> absl::Status {
    TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
    TDF_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ConstInts(tf, ctx, shape_input, "shape"));
    TDF_ASSIGN_OR_RETURN(DType dtype, TypeAttr(tf, "T"));
    const std::string carrier = absl::StrCat(tf.name(), "/tdf_shape");
    TDF_RETURN_IF_ERROR(EmitShapeCarrier(tf, ctx, carrier, dtype, dims, tf.data[shape_input]));
    ctx.out->push_back(Make(tf, tf.name(), "BroadcastTo", {tf.data[value_input], carrier}));
    return absl::OkStatus();
  };
}

// Integer FloorMod(a, b) = Mod(Mod(a, b) + b, b): tdf's Mod truncates, as C
// does; adding b moves a remainder of the wrong sign to b's side.
absl::Status EmitFloorMod(const TfNode& tf, BodyContext& ctx, const std::string& name) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
  TDF_ASSIGN_OR_RETURN(DType t, TypeAttr(tf, "T"));
  if (t != DType::kInt32 && t != DType::kInt64)
    return tf.Unsupported(absl::StrCat("for ", DTypeName(t), " (tdf has no Floor; integers only)"));
  const std::string& a = tf.data[0];
  const std::string& b = tf.data[1];
  ctx.out->push_back(Make(tf, absl::StrCat(name, "/tdf_trunc_mod"), "Mod", {a, b}));
  ctx.out->push_back(Make(tf, absl::StrCat(name, "/tdf_shift"), "Add", {absl::StrCat(name, "/tdf_trunc_mod"), b}));
  ctx.out->push_back(Make(tf, name, "Mod", {absl::StrCat(name, "/tdf_shift"), b}));
  return absl::OkStatus();
}

absl::Status FloorModMapper(const TfNode& tf, BodyContext& ctx) { return EmitFloorMod(tf, ctx, tf.name()); }

// Integer FloorDiv(a, b) = (a - FloorMod(a, b)) / b: the numerator is a
// multiple of b, so the truncating division is exact.
absl::Status FloorDivMapper(const TfNode& tf, BodyContext& ctx) {
  const std::string mod = absl::StrCat(tf.name(), "/tdf_floor_mod");
  TDF_RETURN_IF_ERROR(EmitFloorMod(tf, ctx, mod));
  const std::string num = absl::StrCat(tf.name(), "/tdf_multiple");
  ctx.out->push_back(Make(tf, num, "Sub", {tf.data[0], mod}));
  ctx.out->push_back(Make(tf, tf.name(), "Div", {num, tf.data[1]}));
  return absl::OkStatus();
}

absl::Status SquaredDifferenceMapper(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
  const std::string diff = absl::StrCat(tf.name(), "/tdf_difference");
  ctx.out->push_back(Make(tf, diff, "Sub", tf.data));
  ctx.out->push_back(Make(tf, tf.name(), "Square", {diff}));
  return absl::OkStatus();
}

absl::Status BiasAddMapper(const TfNode& tf, BodyContext& ctx) {
  const std::string format = StringAttr(tf, "data_format").value_or("NHWC");
  if (format != "NHWC") return tf.Unsupported(absl::StrCat("data_format ", format, " (tdf adds the bias on the last axis: NHWC)"));
  return Rename("Add")(tf, ctx);
}

// TensorFlow 1's Select(cond, x, y) with a vector cond and a matrix (or
// higher) x picks whole rows; tdf's Select broadcasts, which would line the
// vector up with the last axis. Where the ranks are known at import, the
// vector becomes [n, 1, ..., 1] first; where it cannot be told whether
// this is the row form, the import is refused.
absl::Status SelectV1Mapper(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 3));
  std::optional<std::vector<int64_t>> cond = ctx.StaticShape(tf.data[0]);
  std::optional<std::vector<int64_t>> x = ctx.StaticShape(tf.data[1]);
  if (!x.has_value()) x = ctx.StaticShape(tf.data[2]);
  if (cond.has_value() && x.has_value() && cond->size() == 1 && x->size() > 1) {
    std::vector<int64_t> rows(x->size(), 1);
    rows[0] = -1;
    const std::string reshaped = absl::StrCat(tf.name(), "/tdf_rows");
    NodeDef r = Make(tf, reshaped, "Reshape", {tf.data[0]});
    r.attr["shape"] = std::move(rows);
    ctx.out->push_back(std::move(r));
    ctx.out->push_back(Make(tf, tf.name(), "Select", {reshaped, tf.data[1], tf.data[2]}));
    return absl::OkStatus();
  }
  const bool not_row_form = (cond.has_value() && cond->size() != 1) || (x.has_value() && x->size() <= 1);
  if (!not_row_form)
    return tf.Unsupported(absl::StrCat("the ranks of its condition and values are not known at import, and "
                                       "TensorFlow 1's Select picks rows where the condition is a vector and the "
                                       "values are not; tdf's Select broadcasts (SelectV2)"));
  return Rename("Select")(tf, ctx);
}

// TensorFlow's ReluGrad(gradients, features); tdf's ReluGrad(x, dy).
absl::Status ReluGradMapper(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
  ctx.out->push_back(Make(tf, tf.name(), "ReluGrad", {tf.data[1], tf.data[0]}));
  return absl::OkStatus();
}

absl::Status ConstMapper(const TfNode& tf, BodyContext& ctx) {
  const tfpb::AttrValue* v = tf.FindAttr("value");
  if (v == nullptr || v->value_case() != tfpb::AttrValue::kTensor)
    return tf.Invalid("Const without a tensor attribute 'value'");
  TDF_ASSIGN_OR_RETURN(Tensor t, ConvertTensor(v->tensor(), tf, "attr value"));
  NodeDef n = Make(tf, tf.name(), "Const", {});
  n.attr["dtype"] = t.dtype();
  n.attr["value"] = std::move(t);
  TDF_RETURN_IF_ERROR(CopyAttr(tf, "dtype", n));  // a mismatch is Validate's error
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

absl::Status PlaceholderMapper(const TfNode& tf, BodyContext& ctx) {
  NodeDef n = Make(tf, tf.name(), "Placeholder", tf.data);
  TDF_RETURN_IF_ERROR(CopyAttr(tf, "dtype", n));
  if (const tfpb::AttrValue* s = tf.FindAttr("shape"); s != nullptr && s->value_case() == tfpb::AttrValue::kShape) {
    TDF_ASSIGN_OR_RETURN(std::optional<Shape> shape, ConvertShape(s->shape(), tf, "attr shape"));
    if (shape.has_value()) n.attr["shape"] = *std::move(shape);
  }
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

absl::Status InvokeMapper(const TfNode& tf, BodyContext& ctx, const std::string& function) {
  NodeDef n = Make(tf, tf.name(), "Invoke", tf.data);
  n.attr["function"] = function;
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

// PartitionedCall / StatefulPartitionedCall: attr f names the function.
absl::Status PartitionedCallMapper(const TfNode& tf, BodyContext& ctx) {
  const tfpb::AttrValue* f = tf.FindAttr("f");
  if (f == nullptr || f->value_case() != tfpb::AttrValue::kFunc) return tf.Invalid("missing function attribute 'f'");
  if (ctx.functions->count(f->func().name()) == 0)
    return tf.Invalid(absl::StrCat("calls '", f->func().name(), "', which the library does not define"));
  return InvokeMapper(tf, ctx, f->func().name());
}

// ExpandDims(x, axis) and Squeeze(x): a Reshape to the shape the input's
// static shape gives (importer.h ExpandedOrSqueezed).
absl::Status ReshapeByStaticShape(const TfNode& tf, BodyContext& ctx) {
  if (tf.data.empty()) return tf.Invalid("has no data input");
  TDF_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ExpandedOrSqueezed(tf));
  NodeDef n = Make(tf, tf.name(), "Reshape", {tf.data[0]});
  n.attr["shape"] = std::move(dims);
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

// Shape, Size, Rank, Pack, StridedSlice: computed at import when their
// inputs are known (static_values.cc), as a Const that fires with its first
// input (through an Identity, which carries that input's frame and
// deadness even from a Switch output).
absl::Status FoldedConstant(const TfNode& tf, BodyContext& ctx) {
  if (tf.data.empty()) return tf.Invalid("has no data input");
  TDF_ASSIGN_OR_RETURN(std::optional<Tensor> value, ctx.ConstantValue(tf.name()));
  if (!value.has_value())
    return tf.Unsupported(absl::StrCat("tdf has no ", tf.op(), " op, and its value is not known at import (",
                                       tf.op() == "StridedSlice" || tf.op() == "Pack"
                                           ? "it is folded only over constant vectors and scalars"
                                           : "its input's static shape is not fully known",
                                       ")"));
  const std::string anchor = absl::StrCat(tf.name(), "/tdf_anchor");
  ctx.out->push_back(Make(tf, anchor, "Identity", {tf.data[0]}));
  NodeDef c = Make(tf, tf.name(), "Const", {});
  c.input.insert(c.input.begin(), absl::StrCat("^", anchor));
  c.attr["dtype"] = value->dtype();
  c.attr["value"] = *std::move(value);
  ctx.out->push_back(std::move(c));
  return absl::OkStatus();
}

// VariableV2(shape, dtype) -> Variable, and the Read its other consumers
// use (import.cc ReadVariablesThroughReads). The initial value is taken
// from the initializer TensorFlow names "<variable>/Assign" when it assigns
// a constant, so the variable is initialized when the session is created,
// as after running TensorFlow's init op.
absl::Status VariableMapper(const TfNode& tf, BodyContext& ctx) {
  NodeDef v = Make(tf, tf.name(), "Variable", {});
  TDF_ASSIGN_OR_RETURN(DType dtype, TypeAttr(tf, "dtype"));
  v.attr["dtype"] = dtype;
  if (const tfpb::AttrValue* s = tf.FindAttr("shape"); s != nullptr && s->value_case() == tfpb::AttrValue::kShape) {
    TDF_ASSIGN_OR_RETURN(std::optional<Shape> shape, ConvertShape(s->shape(), tf, "attr shape"));
    if (shape.has_value()) v.attr["shape"] = *std::move(shape);
  }
  if (auto init = ctx.by_name.find(absl::StrCat(tf.name(), "/Assign"));
      init != ctx.by_name.end() && init->second->op() == "Assign" && init->second->data.size() == 2 &&
      init->second->data[0] == tf.name()) {
    TDF_ASSIGN_OR_RETURN(std::optional<Tensor> value, ctx.ConstantValue(init->second->data[1]));
    if (value.has_value()) v.attr["initial_value"] = *std::move(value);
  }
  ctx.out->push_back(std::move(v));
  NodeDef read = Make(tf, VariableReadName(tf.name()), "Read", {tf.name()});
  read.attr["dtype"] = dtype;
  ctx.out->push_back(std::move(read));
  return absl::OkStatus();
}

// Assign(ref, value), AssignAdd, AssignSub: tdf's ops of the same name on
// the variable's handle.
absl::Status AssignMapper(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 2));
  TDF_ASSIGN_OR_RETURN(DType t, TypeAttr(tf, "T"));
  NodeDef n = Make(tf, tf.name(), tf.op(), tf.data);
  n.attr["dtype"] = t;
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

// ApplyGradientDescent(var, alpha, delta): var -= alpha * delta.
absl::Status ApplyGradientDescentMapper(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(NeedInputs(tf, 3));
  TDF_ASSIGN_OR_RETURN(DType t, TypeAttr(tf, "T"));
  const std::string step = absl::StrCat(tf.name(), "/tdf_step");
  ctx.out->push_back(Make(tf, step, "Mul", {tf.data[1], tf.data[2]}));
  NodeDef n = Make(tf, tf.name(), "AssignSub", {tf.data[0], step});
  n.attr["dtype"] = t;
  ctx.out->push_back(std::move(n));
  return absl::OkStatus();
}

const absl::flat_hash_map<std::string, Mapper>& Mappers() {
  static const auto* const mappers = [] {
    auto* m = new absl::flat_hash_map<std::string, Mapper>;
    // Same name, same inputs, no attributes tdf needs.
    for (const char* op : {"Add", "Sub", "Mul", "Maximum", "Minimum", "Pow", "Neg", "Abs", "Square", "Sign", "Exp",
                           "Log", "Tanh", "Sigmoid", "Relu", "Sqrt", "Rsqrt", "Reciprocal", "TanhGrad",
                           "SigmoidGrad", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
                           "LogicalAnd", "LogicalOr", "LogicalNot", "AddN", "Identity", "NoOp", "ZerosLike",
                           "OnesLike", "Softmax", "LoopCond"})
      (*m)[op] = Rename(op);
    // TensorFlow's other names for tdf's ops.
    (*m)["AddV2"] = Rename("Add");
    (*m)["RealDiv"] = Rename("Div");
    (*m)["Div"] = Rename("Div");          // integers: truncating, as tdf's
    (*m)["TruncateDiv"] = Rename("Div");
    (*m)["Mod"] = Rename("Mod");          // truncating, as C's fmod and %
    (*m)["TruncateMod"] = Rename("Mod");
    (*m)["Inv"] = Rename("Reciprocal");
    (*m)["SelectV2"] = Rename("Select");
    (*m)["Select"] = SelectV1Mapper;
    (*m)["StopGradient"] = Rename("Identity");
    (*m)["Snapshot"] = Rename("Identity");
    (*m)["PreventGradient"] = Rename("Identity");
    (*m)["SoftmaxCrossEntropyWithLogits"] = Rename("SoftmaxCrossEntropy");
    (*m)["MatMul"] = Rename("MatMul", {"transpose_a", "transpose_b"});
    (*m)["Cast"] = Rename("Cast", {"DstT"});
    // Control flow (tf.while_loop and tf.cond in v1 form).
    (*m)["Switch"] = Rename("Switch", {"T"});
    (*m)["Merge"] = Rename("Merge", {"T"});
    (*m)["Enter"] = Rename("Enter", {"T", "frame_name", "is_constant", "parallel_iterations"});
    (*m)["Exit"] = Rename("Exit", {"T"});
    (*m)["NextIteration"] = Rename("NextIteration", {"T"});
    (*m)["Const"] = ConstMapper;
    (*m)["Placeholder"] = PlaceholderMapper;
    // Inputs that tdf takes as attributes.
    for (const char* op : {"Sum", "Mean", "Max"}) (*m)[op] = Reduction;
    (*m)["Reshape"] = IntsInputAsAttr("Reshape", 1, "shape", "shape");
    (*m)["Transpose"] = IntsInputAsAttr("Transpose", 1, "perm", "perm");
    (*m)["ConcatV2"] = ConcatMapper(/*axis_last=*/true);
    (*m)["Concat"] = ConcatMapper(/*axis_last=*/false);
    (*m)["Slice"] = SliceMapper;
    (*m)["GatherV2"] = GatherMapper;
    (*m)["Gather"] = GatherMapper;
    (*m)["Fill"] = BroadcastMapper(/*value_input=*/1, /*shape_input=*/0);
    (*m)["BroadcastTo"] = BroadcastMapper(/*value_input=*/0, /*shape_input=*/1);
    (*m)["ExpandDims"] = ReshapeByStaticShape;
    (*m)["Squeeze"] = ReshapeByStaticShape;
    for (const char* op : {"Shape", "Size", "Rank", "Pack", "StridedSlice"}) (*m)[op] = FoldedConstant;
    // TensorFlow 1 variables.
    (*m)["VariableV2"] = VariableMapper;
    (*m)["Variable"] = VariableMapper;
    for (const char* op : {"Assign", "AssignAdd", "AssignSub"}) (*m)[op] = AssignMapper;
    (*m)["ApplyGradientDescent"] = ApplyGradientDescentMapper;
    // Small compositions.
    (*m)["FloorMod"] = FloorModMapper;
    (*m)["FloorDiv"] = FloorDivMapper;
    (*m)["SquaredDifference"] = SquaredDifferenceMapper;
    (*m)["BiasAdd"] = BiasAddMapper;
    (*m)["ReluGrad"] = ReluGradMapper;
    (*m)["PartitionedCall"] = PartitionedCallMapper;
    (*m)["StatefulPartitionedCall"] = PartitionedCallMapper;
    return m;
  }();
  return *mappers;
}

// Every dtype in a node's attributes must be one tdf has: checked for all
// of them, so a DT_STRING anywhere is refused by the node's name.
absl::Status CheckDTypes(const TfNode& tf) {
  for (const auto& [key, value] : tf.def->attr()) {
    if (tf.FindAttr(key) == nullptr) continue;  // "_"-prefixed: ignored
    const std::string what = absl::StrCat("attr ", key);
    if (value.value_case() == tfpb::AttrValue::kType) {
      TDF_RETURN_IF_ERROR(ConvertDType(value.type(), tf, what).status());
    } else if (value.value_case() == tfpb::AttrValue::kTensor) {
      TDF_RETURN_IF_ERROR(ConvertDType(value.tensor().dtype(), tf, absl::StrCat(what, " dtype")).status());
    } else if (value.value_case() == tfpb::AttrValue::kList) {
      for (int t : value.list().type()) TDF_RETURN_IF_ERROR(ConvertDType(t, tf, what).status());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ConvertNode(const TfNode& tf, BodyContext& ctx) {
  TDF_RETURN_IF_ERROR(CheckDTypes(tf));
  if (ctx.functions->count(tf.op()) > 0) return InvokeMapper(tf, ctx, tf.op());
  auto it = Mappers().find(tf.op());
  if (it == Mappers().end()) {
    return tf.Unsupported(absl::StrCat(
        "TensorFlow op '", tf.op(), "' has no tdf counterpart",
        OpRegistry::Global()->Find(tf.op()) != nullptr ? " in TensorFlow's form" : "",
        " (docs/tensorflow_import.md lists the ops the importer maps)"));
  }
  return it->second(tf, ctx);
}

absl::StatusOr<int> OutputPort(const tfpb::NodeDef& producer, absl::string_view arg, int index,
                               const std::map<std::string, const tfpb::FunctionDef*>& functions) {
  struct Outputs {
    const char* op;
    std::vector<const char*> names;
  };
  static const auto* const multi = new std::vector<Outputs>{
      {"Switch", {"output_false", "output_true"}},
      {"Merge", {"output", "value_index"}},
      {"SoftmaxCrossEntropyWithLogits", {"loss", "backprop"}},
  };
  std::vector<std::string> names;
  for (const Outputs& o : *multi) {
    if (producer.op() == o.op) names.assign(o.names.begin(), o.names.end());
  }
  if (auto f = functions.find(producer.op()); f != functions.end()) {
    for (const auto& a : f->second->signature().output_arg()) names.push_back(a.name());
  }
  if (names.empty()) return index;  // one output arg (possibly a list): the index is the port
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == arg) {
      if (index != 0) break;  // every arg of these ops is one tensor
      return static_cast<int>(i);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("no output '", arg, ":", index, "' on node '", producer.name(),
                                                 "' (", producer.op(), ")"));
}

bool IsVariableOp(const std::string& op) { return op == "VariableV2" || op == "Variable"; }

bool UpdatesVariable(const std::string& op) {
  return op == "Assign" || op == "AssignAdd" || op == "AssignSub" || op == "ApplyGradientDescent";
}

std::string VariableReadName(const std::string& variable) { return absl::StrCat(variable, "/tdf_read"); }

bool IsTensorFlowOnlyForm(const tfpb::NodeDef& node) {
  auto it = Mappers().find(node.op());
  if (it == Mappers().end()) return false;
  if (OpRegistry::Global()->Find(node.op()) == nullptr) return true;  // AddV2, ConcatV2, RealDiv, ...
  // tdf's name, TensorFlow's inputs: the axes, shape, perm or begin and
  // size as inputs.
  int data = 0;
  for (const std::string& in : node.input()) data += !in.empty() && in[0] != '^';
  for (const char* op : {"Sum", "Mean", "Max", "Reshape", "Transpose"}) {
    if (node.op() == op) return data == 2;
  }
  return node.op() == "Slice" && data == 3;
}

}  // namespace tf_import
}  // namespace tdf
