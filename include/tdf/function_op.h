// File: tdf/function_op.h
/// \file
/// \brief Custom ops in one call: a C++ callable becomes an op with its
/// schema, its CPU kernel and, optionally, its gradient.
///
/// For code coming from Taskflow or oneTBB, where a task is a lambda: the
/// lambda becomes an op that GraphBuilder::Op adds to graphs, that
/// validation checks (arity and dtypes, at build time) and that a Session
/// runs like any built-in op, in function bodies, branches and loops alike.
///
/// The scalar form deduces the signature from the callable. Its parameters
/// and result are bool, int32_t, int64_t, float or double; the op applies it
/// elementwise (inputs of one shape, or scalars beside them):
///
/// \code
///   absl::Status s = tdf::RegisterFunctionOp("FusedMulAdd",
///       [](double x, double y) { return x * y + 1; },
///       // optional gradient: the inputs, then dz; one dx per input
///       [](double x, double y, double dz) { return std::make_tuple(dz * y, dz * x); });
///   tdf::Output z = b.Op("FusedMulAdd", {x, y});
/// \endcode
///
/// The general form takes whole tensors, the signature's dtypes and an
/// optional shape rule (tdf::FunctionOp).
///
/// What these ops are: CPU kernels (graphs placed on a GPU keep them on the
/// host). The callable may run on several workers at once and must be safe
/// for that; it should be pure unless the op is registered `stateful`.
/// Errors end in a Status: a name already registered is ALREADY_EXISTS; a
/// node with the wrong number of inputs or a wrong dtype fails when it is
/// built or validated, naming the node and its op; a callable that throws
/// (anything but std::bad_alloc, which fails the run as out of memory) or
/// returns tensors its signature or shape rule does not allow fails the run
/// with the node, op and tag.
#ifndef TDF_FUNCTION_OP_H_
#define TDF_FUNCTION_OP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tdf/tensor.h"

namespace tdf {

/// \addtogroup custom_ops Custom ops
/// Ops defined by the application: schemas (tdf/op_registry.h), kernels
/// (tdf/kernel.h), and the one-call form of both (tdf/function_op.h).
/// @{

/// Computes an op's outputs from its inputs (CPU tensors).
using TensorFunction = std::function<absl::StatusOr<std::vector<Tensor>>(absl::Span<const Tensor> inputs)>;
/// An op's shape rule: its outputs' shapes from its inputs' shapes; an error
/// names what is wrong with the inputs.
using ShapeFunction = std::function<absl::StatusOr<std::vector<Shape>>(absl::Span<const Shape> input_shapes)>;

/// An op defined by a C++ callable over tensors: what RegisterFunctionOp
/// registers.
struct FunctionOp {
  /// An op `name` taking `inputs` and giving `outputs` (their dtypes),
  /// computed by `compute`; the optional fields below stay unset.
  FunctionOp(std::string name, std::vector<DType> inputs, std::vector<DType> outputs, TensorFunction compute)
      : name(std::move(name)), inputs(std::move(inputs)), outputs(std::move(outputs)), compute(std::move(compute)) {}

  std::string name;             ///< the op's name in NodeDef::op
  std::vector<DType> inputs;    ///< one dtype per data input
  std::vector<DType> outputs;   ///< one dtype per output
  TensorFunction compute;       ///< called once per live firing
  /// Optional. Checked on every firing: inputs it rejects fail the run
  /// before `compute` is called, and outputs of other shapes after.
  ShapeFunction shape;
  /// Optional: the op's gradient for tdf::AddGradients. Called with the
  /// inputs followed by one upstream gradient per output (zeros where none
  /// flows), it returns one gradient per input, of that input's dtype and
  /// shape (integer and bool inputs get none: return any tensor of their
  /// dtype). Registered as a second op, "<name>Grad", which any graph may
  /// use: it calls `gradient` only on inputs that pass `shape` and on
  /// upstream gradients of the outputs' shapes.
  TensorFunction gradient;
  /// Set by the scalar form: scalar inputs broadcast against the others,
  /// and their gradients are summed back to a scalar.
  bool elementwise = false;
  /// Never folded, pruned or moved: for callables with side effects.
  bool stateful = false;
  std::string doc;  ///< shown by tools that list ops
};

/// Registers `op` (its schema, its CPU kernel and, when it has a gradient,
/// the gradient's op and its entry in the gradient registry) in the
/// process-wide registries. ALREADY_EXISTS when the name (or "<name>Grad"
/// for an op with a gradient) is taken; INVALID_ARGUMENT for an empty name,
/// an invalid dtype or a missing `compute`. Thread-safe.
absl::Status RegisterFunctionOp(FunctionOp op);

/// \cond INTERNAL
namespace function_op_internal {

template <typename T>
inline constexpr bool kSupported = std::is_same_v<T, bool> || std::is_same_v<T, int32_t> ||
                                   std::is_same_v<T, int64_t> || std::is_same_v<T, float> ||
                                   std::is_same_v<T, double>;

// The parameter and result types of a callable with one call signature (a
// non-generic lambda, a functor, a function pointer).
template <typename F>
struct Signature : Signature<decltype(&F::operator())> {};
template <typename R, typename... A>
struct Signature<R (*)(A...)> {
  using Result = R;
  using Args = std::tuple<std::decay_t<A>...>;
};
template <typename R, typename... A>
struct Signature<R(A...)> : Signature<R (*)(A...)> {};
template <typename C, typename R, typename... A>
struct Signature<R (C::*)(A...) const> : Signature<R (*)(A...)> {};
template <typename C, typename R, typename... A>
struct Signature<R (C::*)(A...)> : Signature<R (*)(A...)> {};

// The shape every non-scalar input shares (a scalar when all are scalars);
// an error naming the two inputs that differ.
absl::StatusOr<Shape> ElementwiseShape(absl::Span<const Tensor> inputs);

template <typename Tuple>
struct AllSupported;
template <typename... A>
struct AllSupported<std::tuple<A...>> : std::bool_constant<(kSupported<A> && ...)> {};

template <typename T>
const T& Element(const T* data, bool scalar, int64_t k) {
  return data[scalar ? 0 : k];
}

// Applies `fn` (parameters Args..., result tuple-like or one value) to every
// element; result j goes to output j, converted to Outs[j].
template <typename Outs, typename... Args, typename F, size_t... I, size_t... J>
absl::StatusOr<std::vector<Tensor>> Elementwise(const F& fn, absl::Span<const Tensor> in,
                                                std::index_sequence<I...>, std::index_sequence<J...>) {
  absl::StatusOr<Shape> shape = ElementwiseShape(in);
  if (!shape.ok()) return shape.status();
  std::vector<Tensor> out;
  out.reserve(sizeof...(J));
  for (DType dtype : {DTypeOf<std::tuple_element_t<J, Outs>>::value...}) {
    absl::StatusOr<Tensor> t = Tensor::Empty(dtype, *shape);
    if (!t.ok()) return t.status();
    out.push_back(*std::move(t));
  }
  const std::tuple<const Args*...> data{in[I].template data<Args>()...};
  const bool scalar[sizeof...(I) + 1] = {in[I].is_scalar()..., false};
  std::tuple<std::tuple_element_t<J, Outs>*...> dst{out[J].template mutable_data<std::tuple_element_t<J, Outs>>()...};
  const int64_t n = shape->num_elements();
  for (int64_t k = 0; k < n; ++k) {
    auto r = fn(Element(std::get<I>(data), scalar[I], k)...);
    if constexpr (sizeof...(J) == 1 && !std::is_class_v<decltype(r)>) {
      std::get<0>(dst)[k] = static_cast<std::tuple_element_t<0, Outs>>(r);
    } else {
      ((std::get<J>(dst)[k] = static_cast<std::tuple_element_t<J, Outs>>(std::get<J>(r))), ...);
    }
  }
  (void)scalar;
  return out;
}

template <typename Outs, typename... Args, typename F>
TensorFunction MakeElementwise(F fn, std::tuple<Args...>*) {
  return [fn = std::move(fn)](absl::Span<const Tensor> in) {
    return Elementwise<Outs, Args...>(fn, in, std::index_sequence_for<Args...>(),
                                      std::make_index_sequence<std::tuple_size_v<Outs>>());
  };
}

template <typename... Args>
std::vector<DType> DTypes(std::tuple<Args...>*) {
  return {DTypeOf<Args>::value...};
}

template <typename F>
FunctionOp ScalarOp(std::string name, F fn) {
  using Sig = Signature<std::decay_t<F>>;
  using R = std::decay_t<typename Sig::Result>;
  using Args = typename Sig::Args;
  static_assert(kSupported<R>, "the callable must return bool, int32_t, int64_t, float or double");
  static_assert(AllSupported<Args>::value,
                "the callable's parameters must be bool, int32_t, int64_t, float or double");
  FunctionOp op(std::move(name), DTypes(static_cast<Args*>(nullptr)), {DTypeOf<R>::value},
                MakeElementwise<std::tuple<R>>(std::move(fn), static_cast<Args*>(nullptr)));
  op.elementwise = true;
  return op;
}

template <typename G, typename... Args, typename R>
TensorFunction ScalarGradient(G gradient, std::tuple<Args...>*, R*) {
  static_assert(std::is_invocable_v<const G&, Args..., R>,
                "the gradient takes the op's parameters followed by the upstream gradient dz");
  using D = std::decay_t<std::invoke_result_t<const G&, Args..., R>>;
  if constexpr (sizeof...(Args) == 1 && !std::is_class_v<D>) {
    static_assert(std::is_arithmetic_v<D>, "the gradient of a one-input op returns one number");
  } else {
    static_assert(std::tuple_size_v<D> == sizeof...(Args),
                  "the gradient returns one value per input (a std::tuple or std::array)");
  }
  return MakeElementwise<std::tuple<Args...>>(std::move(gradient), static_cast<std::tuple<Args..., R>*>(nullptr));
}

}  // namespace function_op_internal
/// \endcond

/// Registers `fn`, a callable of bool/int32_t/int64_t/float/double
/// parameters returning one of those types, as the elementwise op `name`:
/// its input and output dtypes are the callable's types.
template <typename F>
absl::Status RegisterFunctionOp(std::string name, F fn) {
  return RegisterFunctionOp(function_op_internal::ScalarOp(std::move(name), std::move(fn)));
}

/// The same with a gradient: `gradient(x..., dz)` returns dx for a
/// one-input op, else a std::tuple (or std::array) of one dx per input.
template <typename F, typename G>
absl::Status RegisterFunctionOp(std::string name, F fn, G gradient) {
  using Sig = function_op_internal::Signature<std::decay_t<F>>;
  FunctionOp op = function_op_internal::ScalarOp(std::move(name), std::move(fn));
  op.gradient = function_op_internal::ScalarGradient(
      std::move(gradient), static_cast<typename Sig::Args*>(nullptr),
      static_cast<std::decay_t<typename Sig::Result>*>(nullptr));
  return RegisterFunctionOp(std::move(op));
}

/// @}

}  // namespace tdf

#endif  // TDF_FUNCTION_OP_H_
