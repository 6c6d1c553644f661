/// \file
/// A C++ builder for tdf graphs. Cond and While lower to Switch/Merge and
/// Enter/Merge/Switch/NextIteration/Exit exactly as TensorFlow's v1 control
/// flow does: values captured from outside a branch are switched on its
/// predicate, values captured from outside a loop enter it as loop invariants
/// (constant Enter), and nodes without inputs inside a branch or loop body are
/// triggered by the branch's or iteration's pivot. Call() emits an Invoke node
/// that StaticizeRecursion (tdf/transform.h) turns into Call/Return pairs.
///
/// \code
///   tdf::GraphBuilder b;
///   b.DefineFunction({"fib", {{"n", tdf::DType::kInt64}}, {{"r", tdf::DType::kInt64}}},
///       [](tdf::GraphBuilder& f, const std::vector<tdf::Output>& a) -> std::vector<tdf::Output> {
///         tdf::Output n = a[0];
///         return {f.Cond(n <= 1, [&] { return f.ConstLike(n, 1); },
///                        [&] { return f.Call("fib", {n - 1})[0] + f.Call("fib", {n - 2})[0]; })};
///       });
///   tdf::Output n = b.Placeholder("n", tdf::DType::kInt64);
///   b.Identity(b.Call("fib", {n})[0], "result");
/// \endcode
///
/// (The operators, at the end of this file, add the same nodes as the named
/// calls: n <= 1 is f.LessEqual(n, f.Const<int64_t>(1)).)
/// \code
///   absl::StatusOr<tdf::Graph> graph = b.Build();
/// \endcode
///
/// Errors (wrong dtypes, unknown functions, invalid Outputs, ...) are
/// recorded: the first one is returned by status() and Build(), and later
/// calls become no-ops that return invalid Outputs. A call that returns a
/// vector returns as many as it would have without the error (Call: one per
/// result of the function, or one when the function is unknown; Cond: one per
/// branch result; While: one per loop variable; Outputs: one per output of
/// the op that failed), so `b.Call("fbi", {n})[0]` is an invalid Output, not
/// a read past the end.
#ifndef TDF_BUILDER_H_
#define TDF_BUILDER_H_

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tdf/graph.h"

namespace tdf {

class GraphBuilder;

/// One output of a node being built. Invalid when default-constructed or
/// returned by a failed builder call; such an Output keeps its builder and a
/// negative `node` by which the builder remembers how many outputs the failed
/// node would have had (for GraphBuilder::Outputs).
struct Output {
  GraphBuilder* builder = nullptr;  ///< the builder that made it; null when default-constructed
  int node = -1;  ///< the node's index in its builder; negative for a failed call's
  int port = 0;   ///< which output of the node
  /// Whether this names a node that was built.
  bool valid() const { return builder != nullptr && node >= 0; }
  /// The name by which Session::Run feeds, fetches and targets this output
  /// ("node" or "node:port"; "<invalid>" for an invalid Output), so that an
  /// Output can be given to Run directly: session->Run({{n, value}}, {result}).
  /// Reads the builder: only while the builder lives.
  operator std::string() const;  // NOLINT(google-explicit-constructor): Run takes names
};

/// Options of GraphBuilder::While.
struct WhileOptions {
  int parallel_iterations = 10;  ///< iterations in flight at once, at most
  std::string name;  ///< frame name; generated when empty
};

/// Writes a tdf::Graph: each call adds a node (in the current function
/// body, Cond branch or loop body) and returns its Output; errors are
/// recorded, not thrown (see the file's description).
class GraphBuilder {
 public:
  /// \name Callbacks
  /// The functions that build a branch, a loop's condition and body, and a
  /// function's body.
  /// @{
  /// Builds a Cond branch; returns its results.
  using BranchFn = std::function<std::vector<Output>()>;
  /// A While loop's condition on the loop variables.
  using LoopCondFn = std::function<Output(const std::vector<Output>&)>;
  /// A While loop's body: the next values of the loop variables.
  using LoopBodyFn = std::function<std::vector<Output>(const std::vector<Output>&)>;
  /// A function's body, built with the builder it is given, from its arguments.
  using FunctionBodyFn = std::function<std::vector<Output>(GraphBuilder&, const std::vector<Output>&)>;
  /// @}

  /// Builds a main graph with its own function library.
  GraphBuilder();
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  /// \name Generic
  /// Any registered op, a node's outputs, control edges and devices.
  /// @{
  /// Adds a node. Returns output 0. An empty `name` gets a generated one
  /// ("<op>_<k>", prefixed with the enclosing cond branch's or loop's name)
  /// that no node has. A non-empty `name` is used exactly as given, also
  /// inside a cond branch or loop body; if a node already has it, this returns
  /// an invalid Output and records ALREADY_EXISTS ("duplicate node name
  /// '<name>'") as the builder's error (status(); the first error sticks), so
  /// Build() fails: an explicit name is never silently changed.
  Output Op(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs = {},
            const std::string& name = "");
  /// All outputs of a node (as many as its dtype rule yields). For an
  /// invalid `node`, as many invalid Outputs as the failed call's node would
  /// have had when this builder can tell (a failed Op("Switch", ...) gives
  /// two), else one; using any of them in a builder call records an error.
  std::vector<Output> Outputs(Output node) const;
  /// Adds a control edge src -> dst (both must be in compatible contexts).
  /// An invalid dst or src is an error.
  void AddControlInput(Output dst, Output src);
  /// Sets the device of the node ("cpu", "cuda:0"). An invalid node is an
  /// error.
  void SetDevice(Output node, const std::string& device);

  /// @}

  /// \name Sources and state
  /// Placeholders (fed by Session::Run), constants, and variables with their reads and updates.
  /// @{
  Output Placeholder(const std::string& name, DType dtype);
  Output Const(const Tensor& value, const std::string& name = "");
  template <typename T>
  Output Const(T value, const std::string& name = "") {
    return Const(Tensor::Scalar<T>(value), name);
  }
  /// A scalar constant of `like`'s dtype: ConstLike(n, 1) is an int64 1 next
  /// to an int64 n and a float 1 next to a float. What the dtype cannot hold
  /// exactly (1.5 or 2^40 for an int32, an integer for a bool) is an error;
  /// so is an invalid `like`. The operators below use it for their literals.
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Output ConstLike(Output like, T value) {
    if constexpr (std::is_same_v<T, bool>) {
      return ConstLikeBool(like, value);
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      return ConstLikeUnsigned(like, static_cast<uint64_t>(value));
    } else if constexpr (std::is_integral_v<T>) {
      return ConstLikeInteger(like, static_cast<int64_t>(value));
    } else {
      return ConstLikeFloating(like, static_cast<double>(value));
    }
  }
  Output Variable(const std::string& name, const Tensor& initial_value);
  Output Read(Output variable);
  Output Assign(Output variable, Output value);
  Output AssignAdd(Output variable, Output delta);

  /// @}

  /// \name Elementwise and tensor ops
  /// Each adds the op of its name (TensorFlow's semantics; binary ops broadcast as NumPy does).
  /// @{
  Output Identity(Output x, const std::string& name = "");
  Output Add(Output a, Output b) { return Op("Add", {a, b}); }
  Output Sub(Output a, Output b) { return Op("Sub", {a, b}); }
  Output Mul(Output a, Output b) { return Op("Mul", {a, b}); }
  Output Div(Output a, Output b) { return Op("Div", {a, b}); }
  Output Mod(Output a, Output b) { return Op("Mod", {a, b}); }
  Output Maximum(Output a, Output b) { return Op("Maximum", {a, b}); }
  Output Minimum(Output a, Output b) { return Op("Minimum", {a, b}); }
  Output Pow(Output a, Output b) { return Op("Pow", {a, b}); }
  Output Neg(Output x) { return Op("Neg", {x}); }
  Output Abs(Output x) { return Op("Abs", {x}); }
  Output Square(Output x) { return Op("Square", {x}); }
  Output Sign(Output x) { return Op("Sign", {x}); }
  Output Sqrt(Output x) { return Op("Sqrt", {x}); }
  Output Rsqrt(Output x) { return Op("Rsqrt", {x}); }
  Output Reciprocal(Output x) { return Op("Reciprocal", {x}); }
  Output Less(Output a, Output b) { return Op("Less", {a, b}); }
  Output LessEqual(Output a, Output b) { return Op("LessEqual", {a, b}); }
  Output Greater(Output a, Output b) { return Op("Greater", {a, b}); }
  Output GreaterEqual(Output a, Output b) { return Op("GreaterEqual", {a, b}); }
  Output Equal(Output a, Output b) { return Op("Equal", {a, b}); }
  Output NotEqual(Output a, Output b) { return Op("NotEqual", {a, b}); }
  Output LogicalAnd(Output a, Output b) { return Op("LogicalAnd", {a, b}); }
  Output LogicalOr(Output a, Output b) { return Op("LogicalOr", {a, b}); }
  Output LogicalNot(Output x) { return Op("LogicalNot", {x}); }
  Output Cast(Output x, DType to) { return Op("Cast", {x}, {{"DstT", to}}); }
  /// cond ? a : b elementwise (cond bool, broadcasting as the binary ops do).
  Output Select(Output cond, Output a, Output b) { return Op("Select", {cond, a, b}); }
  Output AddN(const std::vector<Output>& xs) { return Op("AddN", xs); }
  Output ZerosLike(Output x) { return Op("ZerosLike", {x}); }
  Output OnesLike(Output x) { return Op("OnesLike", {x}); }
  Output MatMul(Output a, Output b, bool transpose_a = false, bool transpose_b = false) {
    return Op("MatMul", {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
  }
  Output Tanh(Output x) { return Op("Tanh", {x}); }
  Output Sigmoid(Output x) { return Op("Sigmoid", {x}); }
  Output Relu(Output x) { return Op("Relu", {x}); }
  Output Exp(Output x) { return Op("Exp", {x}); }
  Output Log(Output x) { return Op("Log", {x}); }
  Output Sum(Output x, std::vector<int64_t> axes = {}, bool keep_dims = false);
  Output Mean(Output x, std::vector<int64_t> axes = {}, bool keep_dims = false);
  Output Max(Output x, std::vector<int64_t> axes = {}, bool keep_dims = false);
  Output Reshape(Output x, std::vector<int64_t> shape) { return Op("Reshape", {x}, {{"shape", std::move(shape)}}); }
  Output Concat(const std::vector<Output>& xs, int64_t axis) { return Op("Concat", xs, {{"axis", axis}}); }
  /// x[begin : begin + size] per dimension; a size of -1 runs to the end.
  Output Slice(Output x, std::vector<int64_t> begin, std::vector<int64_t> size) {
    return Op("Slice", {x}, {{"begin", std::move(begin)}, {"size", std::move(size)}});
  }
  /// Dimensions reversed when `perm` is empty.
  Output Transpose(Output x, std::vector<int64_t> perm = {}) {
    if (perm.empty()) return Op("Transpose", {x});
    return Op("Transpose", {x}, {{"perm", std::move(perm)}});
  }
  Output Gather(Output params, Output indices, int64_t axis = 0) {
    return Op("Gather", {params, indices}, {{"axis", axis}});
  }
  Output Softmax(Output x) { return Op("Softmax", {x}); }
  /// Softmax over the last axis of `logits` against `labels`: returns (loss
  /// per row, d loss / d logits).
  std::vector<Output> SoftmaxCrossEntropy(Output logits, Output labels) {
    return Outputs(Op("SoftmaxCrossEntropy", {logits, labels}));
  }

  /// @}

  /// \name Control flow
  /// TensorFlow's v1 Cond and While, lowered to Switch/Merge and frames.
  /// @{
  /// pred ? then_fn() : else_fn(). Both branches return the same number of
  /// outputs with matching dtypes. After an error the branch functions still
  /// run (every builder call in them is then a no-op), to learn how many
  /// invalid Outputs to return.
  std::vector<Output> Cond(Output pred, const BranchFn& then_fn, const BranchFn& else_fn);
  /// The same for branches of one result each: pred ? then_fn() : else_fn().
  Output Cond(Output pred, const std::function<Output()>& then_fn, const std::function<Output()>& else_fn);
  /// while (cond(vars)) vars = body(vars); returns the final vars.
  std::vector<Output> While(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                            const std::vector<Output>& loop_vars, const WhileOptions& options = {});

  /// @}

  /// \name Functions
  /// Declaring and defining library functions (recursion allowed), and calling them.
  /// @{
  /// Declares a function without its body, so that functions defined later
  /// (or this one's own body) may call it: mutual recursion.
  absl::Status Declare(const FunctionSignature& signature);
  /// Declares the function (so its body may call itself), then builds its body
  /// with a child builder that shares this builder's library.
  absl::Status DefineFunction(const FunctionSignature& signature, const FunctionBodyFn& body);
  /// Emits an Invoke node; returns one Output per result of `function`.
  std::vector<Output> Call(const std::string& function, const std::vector<Output>& args);

  /// @}

  /// \name Results
  /// The dtypes and names of what was built, the first error, and the graph.
  /// @{
  /// The dtype of `o`; kInvalid for an invalid Output.
  DType dtype(Output o) const;
  /// "node" or "node:port", for Session::Run fetches; "<invalid>" for an
  /// invalid Output.
  std::string Name(Output o) const;
  /// The first error recorded (OK when none).
  const absl::Status& status() const { return status_; }
  /// The built graph (main graph + library). Fails with the first error.
  absl::StatusOr<Graph> Build() const;
  /// The function library, shared with the builders of function bodies.
  FunctionLibrary& library() { return *library_; }
  /// @}

  struct Context;  // a cond branch or a loop body (internal)

 private:
  GraphBuilder(FunctionLibrary* library, bool is_function);
  struct NodeInfo;
  void Fail(absl::Status s);
  /// `o` names a node of this builder (HasOutput: and one of its outputs).
  bool HasNode(Output o) const;
  bool HasOutput(Output o) const;
  /// The error recorded for an Output that is not one of this builder's
  /// (nothing when an earlier error explains it).
  void FailInvalid(absl::string_view what, Output o);
  /// An invalid Output standing for a failed node with `num_outputs` outputs
  /// (port `port`), and all of such a node's outputs.
  Output FailedOutput(int num_outputs, int port = 0);
  std::vector<Output> FailedOutputs(int num_outputs);
  /// How many outputs `def` with `num_inputs` data inputs would have, by its
  /// op's dtype rule with the input dtypes unknown; 1 when the rule cannot
  /// tell.
  int GuessOutputCount(const NodeDef& def, size_t num_inputs) const;
  std::vector<Output> CondOrError(Output pred, const BranchFn& then_fn, const BranchFn& else_fn,
                                  std::vector<Output> results[2], bool ran[2]);
  std::vector<Output> WhileOrError(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                                   const std::vector<Output>& loop_vars, const WhileOptions& options);
  std::string UniqueName(const std::string& base);
  Output ConstLikeBool(Output like, bool value);
  Output ConstLikeInteger(Output like, int64_t value);
  Output ConstLikeUnsigned(Output like, uint64_t value);
  Output ConstLikeFloating(Output like, double value);
  /// Makes `o` usable in the current context: inserts Switch (cond branch) or
  /// constant Enter (loop body) nodes for every context boundary crossed.
  Output Capture(Output o);
  Output AddNode(NodeDef def, int context, std::vector<DType> output_types);
  void UntriggerBranchConstants(size_t first, const int branch_ctx[2], const std::vector<Output> results[2]);

  FunctionLibrary owned_library_;
  FunctionLibrary* library_;  ///< owned_library_ or a parent builder's
  bool is_function_;
  std::vector<NodeInfo> nodes_;
  absl::flat_hash_map<std::string, int> node_by_name_;  ///< names are unique
  std::vector<std::unique_ptr<Context>> contexts_;  ///< index 0: the top level
  int current_context_ = 0;
  absl::Status status_;
  int name_counter_ = 0;
  /// Per failed node (Output::node == -2 - k): how many outputs it would
  /// have had.
  std::vector<int> failed_output_counts_;
};

/// \name Operators: graphs that read like the math
/// Each adds the node its named builder call would (a + b is
/// a.builder->Add(a, b)) in the builder's current context, so they work in
/// function bodies, Cond branches and loop bodies alike. A C++ number beside
/// an Output becomes a constant of that Output's dtype (ConstLike): with an
/// int64 n, n - 1 is Sub(n, int64 1). Errors are recorded like any builder
/// error; an Output without a builder (default-constructed) gives an invalid
/// Output. && and || build LogicalAnd/LogicalOr: both sides always exist as
/// nodes (no short circuit while building; at run time both are computed).
/// == and != are not overloaded (Output is a handle: comparing handles and
/// comparing values would read alike); use Equal and NotEqual.
/// @{

/// a + b, a.builder->Add(a, b); the operators below likewise add their
/// named builder call's node.
Output operator+(Output a, Output b);
Output operator-(Output a, Output b);
Output operator*(Output a, Output b);
Output operator/(Output a, Output b);
Output operator%(Output a, Output b);
Output operator-(Output x);
Output operator<(Output a, Output b);
Output operator<=(Output a, Output b);
Output operator>(Output a, Output b);
Output operator>=(Output a, Output b);
Output operator&&(Output a, Output b);
Output operator||(Output a, Output b);
Output operator!(Output x);
Output Equal(Output a, Output b);
Output NotEqual(Output a, Output b);

namespace builder_internal {
template <typename T>
using IfNumber = std::enable_if_t<std::is_arithmetic_v<T>, int>;
/// A literal beside `like`: a constant of its dtype, in its builder.
template <typename T>
Output Literal(Output like, T value) {
  return like.builder == nullptr ? Output{} : like.builder->ConstLike(like, value);
}
}  // namespace builder_internal

#define TDF_BUILDER_LITERAL_OPERATOR(OP)                                                             \
  template <typename T, builder_internal::IfNumber<T> = 0>                                          \
  Output operator OP(Output a, T b) {                                                                \
    return a OP builder_internal::Literal(a, b);                                                     \
  }                                                                                                  \
  template <typename T, builder_internal::IfNumber<T> = 0>                                          \
  Output operator OP(T a, Output b) {                                                                \
    return builder_internal::Literal(b, a) OP b;                                                     \
  }
TDF_BUILDER_LITERAL_OPERATOR(+)
TDF_BUILDER_LITERAL_OPERATOR(-)
TDF_BUILDER_LITERAL_OPERATOR(*)
TDF_BUILDER_LITERAL_OPERATOR(/)
TDF_BUILDER_LITERAL_OPERATOR(%)
TDF_BUILDER_LITERAL_OPERATOR(<)
TDF_BUILDER_LITERAL_OPERATOR(<=)
TDF_BUILDER_LITERAL_OPERATOR(>)
TDF_BUILDER_LITERAL_OPERATOR(>=)
TDF_BUILDER_LITERAL_OPERATOR(&&)
TDF_BUILDER_LITERAL_OPERATOR(||)
#undef TDF_BUILDER_LITERAL_OPERATOR

template <typename T, builder_internal::IfNumber<T> = 0>
Output Equal(Output a, T b) {
  return Equal(a, builder_internal::Literal(a, b));
}
template <typename T, builder_internal::IfNumber<T> = 0>
Output NotEqual(Output a, T b) {
  return NotEqual(a, builder_internal::Literal(a, b));
}

/// @}

}  // namespace tdf

#endif  // TDF_BUILDER_H_
