// RegisterFunctionOp (tdf/function_op.h): one call registers an op's
// schema, its CPU kernel around the application's callable, and its
// gradient (a second function op plus an entry in autodiff's registry).
#include "tdf/function_op.h"

#include <exception>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "autodiff/emitter.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"
#include "tdf/status.h"

namespace tdf {
namespace {

std::string ShapeList(absl::Span<const Shape> shapes) {
  std::string s;
  for (const Shape& shape : shapes) absl::StrAppend(&s, s.empty() ? "" : ", ", shape.DebugString());
  return s;
}

// Runs the callable on one firing's inputs and checks what it returns
// against the signature and the shape rule.
class FunctionOpKernel final : public OpKernel {
 public:
  explicit FunctionOpKernel(std::shared_ptr<const FunctionOp> op) : op_(std::move(op)) {}

  absl::Status Compute(KernelContext& ctx) override {
    const FunctionOp& op = *op_;
    std::vector<Tensor> inputs;
    inputs.reserve(ctx.num_inputs());
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != op.inputs[i])
        return absl::InvalidArgumentError(absl::StrCat("input ", i, " is ", DTypeName(t.dtype()), ", op '", op.name,
                                                       "' takes ", DTypeName(op.inputs[i])));
      if (!t.device().is_cpu())
        return absl::InvalidArgumentError(
            absl::StrCat("input ", i, " is on ", t.device().ToString(), "; function ops run on the CPU"));
      inputs.push_back(t);
    }
    std::vector<Shape> want_shapes;
    if (op.shape) {
      std::vector<Shape> in_shapes;
      for (const Tensor& t : inputs) in_shapes.push_back(t.shape());
      absl::StatusOr<std::vector<Shape>> shapes = op.shape(in_shapes);
      if (!shapes.ok())
        return absl::Status(shapes.status().code(), absl::StrCat("shape rule of op '", op.name, "' rejects inputs [",
                                                                 ShapeList(in_shapes), "]: ", shapes.status().message()));
      if (shapes->size() != op.outputs.size())
        return absl::InvalidArgumentError(absl::StrCat("shape rule of op '", op.name, "' gave ", shapes->size(),
                                                       " shapes for ", op.outputs.size(), " outputs"));
      want_shapes = *std::move(shapes);
    }
    absl::StatusOr<std::vector<Tensor>> outputs;
    try {
      outputs = op.compute(inputs);
    } catch (const std::bad_alloc&) {
      throw;  // the executor fails the run as out of memory
    } catch (const std::exception& e) {
      return absl::UnknownError(absl::StrCat("the function of op '", op.name, "' threw: ", e.what()));
    } catch (...) {
      return absl::UnknownError(absl::StrCat("the function of op '", op.name, "' threw a non-standard exception"));
    }
    if (!outputs.ok()) return outputs.status();
    if (outputs->size() != op.outputs.size())
      return absl::InternalError(absl::StrCat("the function of op '", op.name, "' returned ", outputs->size(),
                                              " tensors; its signature has ", op.outputs.size(), " outputs"));
    for (size_t j = 0; j < outputs->size(); ++j) {
      const Tensor& t = (*outputs)[j];
      if (t.dtype() != op.outputs[j])
        return absl::InternalError(absl::StrCat("the function of op '", op.name, "' returned ",
                                                DTypeName(t.dtype()), " for output ", j, ", declared ",
                                                DTypeName(op.outputs[j])));
      if (!t.device().is_cpu())
        return absl::InternalError(absl::StrCat("the function of op '", op.name, "' returned output ", j, " on ",
                                                t.device().ToString()));
      if (!want_shapes.empty() && t.shape() != want_shapes[j])
        return absl::InternalError(absl::StrCat("the function of op '", op.name, "' returned output ", j,
                                                " of shape ", t.shape().DebugString(), "; its shape rule says ",
                                                want_shapes[j].DebugString()));
    }
    for (size_t j = 0; j < outputs->size(); ++j) ctx.set_output(static_cast<int>(j), std::move((*outputs)[j]));
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<const FunctionOp> op_;
};

// The schema's dtype rule: the declared input dtypes, checked where known.
TypeInferenceFn FixedSignature(std::vector<DType> inputs, std::vector<DType> outputs) {
  return [inputs, outputs](const InferenceContext& ctx) -> absl::StatusOr<std::vector<DType>> {
    for (size_t i = 0; i < ctx.input_types.size(); ++i) {
      if (ctx.input_types[i] != DType::kInvalid && ctx.input_types[i] != inputs[i])
        return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be ", DTypeName(inputs[i]), ", got ",
                                                       DTypeName(ctx.input_types[i])));
    }
    return outputs;
  };
}

absl::Status CheckDefinition(const FunctionOp& op) {
  if (op.name.empty()) return absl::InvalidArgumentError("a function op needs a name");
  if (!op.compute) return absl::InvalidArgumentError(absl::StrCat("function op '", op.name, "' has no function"));
  for (const std::vector<DType>* list : {&op.inputs, &op.outputs})
    for (DType d : *list)
      if (DTypeSize(d) == 0)
        return absl::InvalidArgumentError(absl::StrCat("function op '", op.name, "' declares an invalid dtype"));
  return absl::OkStatus();
}

// Schema and kernel; the gradient is the caller's business.
absl::Status RegisterOpAndKernel(const FunctionOp& def) {
  auto op = std::make_shared<const FunctionOp>(def);
  OpSchema schema(def.name);
  schema.Inputs(static_cast<int>(def.inputs.size())).Infer(FixedSignature(def.inputs, def.outputs));
  if (def.stateful) schema.Stateful();
  schema.Doc(def.doc.empty() ? "A function op (tdf/function_op.h)." : def.doc);
  TDF_RETURN_IF_ERROR(OpRegistry::Global()->Register(std::move(schema)));
  KernelRegistry::Global()->Register(def.name, Device::Type::kCpu,
                                     [op](const NodeDef&) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
                                       return std::unique_ptr<OpKernel>(std::make_unique<FunctionOpKernel>(op));
                                     });
  return absl::OkStatus();
}

// For autodiff: dx = <name>Grad(x..., dy...), with zeros for an output no
// gradient reaches; none for integer and bool inputs.
autodiff::GradFn GradientOf(const FunctionOp& op, std::string grad_op) {
  const size_t num_inputs = op.inputs.size(), num_outputs = op.outputs.size();
  std::vector<DType> input_types = op.inputs;
  const bool elementwise = op.elementwise;
  return [=](autodiff::Emitter& e, const autodiff::GradArgs& a) -> std::vector<std::string> {
    std::vector<std::string> dx(num_inputs);
    bool any_dy = false;
    for (const std::string& dy : a.dy) any_dy |= !dy.empty();
    if (!any_dy) return dx;
    std::vector<std::string> args = a.x;
    for (size_t p = 0; p < num_outputs; ++p) args.push_back(a.dy[p].empty() ? e.Zeros(a.y[p]) : a.dy[p]);
    const std::string node = e.Op(grad_op, args);
    if (node.empty()) return dx;
    for (size_t k = 0; k < num_inputs; ++k) {
      if (!IsFloating(input_types[k])) continue;
      const std::string g = autodiff::Key(node, static_cast<int>(k));
      dx[k] = elementwise ? e.SumTo(g, a.x[k]) : g;  // a broadcast scalar's gradient is a sum
    }
    return dx;
  };
}

}  // namespace

namespace function_op_internal {

absl::StatusOr<Shape> ElementwiseShape(absl::Span<const Tensor> inputs) {
  int first = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_scalar()) continue;
    if (first < 0) {
      first = static_cast<int>(i);
    } else if (inputs[i].shape() != inputs[first].shape()) {
      return absl::InvalidArgumentError(absl::StrCat("elementwise inputs of different shapes: input ", first, " is ",
                                                     inputs[first].shape().DebugString(), ", input ", i, " is ",
                                                     inputs[i].shape().DebugString()));
    }
  }
  return first < 0 ? Shape() : inputs[first].shape();
}

}  // namespace function_op_internal

absl::Status RegisterFunctionOp(FunctionOp op) {
  TDF_RETURN_IF_ERROR(CheckDefinition(op));
  OpRegistry* ops = OpRegistry::Global();
  const std::string grad_name = absl::StrCat(op.name, "Grad");
  // Both names are checked before either is taken, so a refused
  // registration leaves no half-registered op behind.
  std::vector<std::string> names = {op.name};
  if (op.gradient) names.push_back(grad_name);
  for (const std::string& name : names) {
    if (ops->Find(name) != nullptr || KernelRegistry::Global()->Has(name, Device::Type::kCpu))
      return absl::AlreadyExistsError(absl::StrCat("op '", name, "' is already registered"));
  }
  if (op.gradient) {
    std::vector<DType> grad_inputs = op.inputs;
    grad_inputs.insert(grad_inputs.end(), op.outputs.begin(), op.outputs.end());
    FunctionOp grad(grad_name, std::move(grad_inputs), op.inputs, op.gradient);
    grad.elementwise = op.elementwise;
    if (!op.elementwise) {
      // The gradient callable may rely on what the forward one could: its
      // x inputs pass the forward's shape rule, and each dy has the shape of
      // that output. Each dx has its input's shape.
      const size_t n = op.inputs.size();
      grad.shape = [n, forward = op.shape](absl::Span<const Shape> shapes) -> absl::StatusOr<std::vector<Shape>> {
        std::vector<Shape> xs(shapes.begin(), shapes.begin() + n);
        if (forward) {
          TDF_ASSIGN_OR_RETURN(std::vector<Shape> ys, forward(xs));
          for (size_t j = 0; j < ys.size() && n + j < shapes.size(); ++j)
            if (shapes[n + j] != ys[j])
              return absl::InvalidArgumentError(absl::StrCat("the gradient of output ", j, " has shape ",
                                                             shapes[n + j].DebugString(), "; the output has ",
                                                             ys[j].DebugString()));
        }
        return xs;
      };
    }
    grad.doc = absl::StrCat("The gradient of ", op.name, ": its inputs, then one dy per output; one dx per input.");
    TDF_RETURN_IF_ERROR(RegisterOpAndKernel(grad));
  }
  TDF_RETURN_IF_ERROR(RegisterOpAndKernel(op));
  if (op.gradient) TDF_RETURN_IF_ERROR(autodiff::RegisterGradient(op.name, GradientOf(op, grad_name)));
  return absl::OkStatus();
}

}  // namespace tdf
