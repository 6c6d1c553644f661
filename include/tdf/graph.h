/// \file
/// The graph IR, modelled on TensorFlow's GraphDef/NodeDef/FunctionDefLibrary
/// so that its protobuf form (graph.proto) feels familiar:
///
/// \code
///   * a NodeDef has a name, an op, inputs written "node", "node:port" or
///     "^node" (a control input; control inputs come after data inputs),
///     attributes and a device;
///   * a Graph is the main graph's nodes plus a FunctionLibrary;
///   * a FunctionDef is a signature plus a body whose "Arg" nodes (attr
///     `index`) stand for the arguments and whose "Retval" nodes (attr
///     `index`) take the results. A function may be declared (signature only)
///     before it is defined, which recursive definitions need.
/// \endcode
///
/// Most users build graphs with tdf::GraphBuilder (tdf/builder.h) rather than
/// by hand.
#ifndef TDF_GRAPH_H_
#define TDF_GRAPH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tdf/tensor.h"

namespace tdf {

/// An attribute value: one of int, float, bool, string, dtype, shape, tensor,
/// or a list of ints, floats, strings or dtypes.
class AttrValue {
 public:
  /// What an attribute holds (monostate: nothing yet).
  using Value = std::variant<std::monostate, int64_t, double, bool, std::string, DType, Shape, Tensor,
                             std::vector<int64_t>, std::vector<double>, std::vector<std::string>,
                             std::vector<DType>>;
  AttrValue() = default;
  /// \name From each kind of value
  /// Implicit, so that attrs read {{"axis", 1}, {"T", DType::kFloat32}}.
  /// @{

  /// An int attribute.
  AttrValue(int64_t v) : value_(v) {}                     // NOLINT: implicit by design
  AttrValue(int v) : value_(static_cast<int64_t>(v)) {}   // NOLINT
  AttrValue(double v) : value_(v) {}                      // NOLINT
  AttrValue(bool v) : value_(v) {}                        // NOLINT
  AttrValue(std::string v) : value_(std::move(v)) {}      // NOLINT
  AttrValue(const char* v) : value_(std::string(v)) {}    // NOLINT
  AttrValue(DType v) : value_(v) {}                       // NOLINT
  AttrValue(Shape v) : value_(std::move(v)) {}            // NOLINT
  AttrValue(Tensor v) : value_(std::move(v)) {}           // NOLINT
  AttrValue(std::vector<int64_t> v) : value_(std::move(v)) {}      // NOLINT
  AttrValue(std::vector<double> v) : value_(std::move(v)) {}       // NOLINT
  AttrValue(std::vector<std::string> v) : value_(std::move(v)) {}  // NOLINT
  AttrValue(std::vector<DType> v) : value_(std::move(v)) {}        // NOLINT
  /// @}

  /// The value.
  const Value& value() const { return value_; }
  /// Whether it holds a T.
  template <typename T>
  bool holds() const { return std::holds_alternative<T>(value_); }
  /// The T it holds, or null.
  template <typename T>
  const T* get_if() const { return std::get_if<T>(&value_); }
  /// "int", "float", "bool", "string", "type", "shape", "tensor",
  /// "list(int)", "list(float)", "list(string)", "list(type)", "none".
  absl::string_view TypeName() const;
  /// For messages: 3, 1.5, true, "s", float32, [2,3], ...
  std::string DebugString() const;
  /// Equal field by field.
  friend bool operator==(const AttrValue& a, const AttrValue& b);

 private:
  Value value_;
};

/// A node's attributes by name. Transparent (std::less<>): a lookup by
/// string_view or literal builds no std::string (compiling a graph looks
/// attributes up several times per node).
using AttrMap = std::map<std::string, AttrValue, std::less<>>;

/// A parsed input string.
struct InputRef {
  std::string node;          ///< the producing node
  int port = 0;              ///< which of its outputs
  bool is_control = false;   ///< a control input ("^node")
  /// "a" / "a:1" / "^a". Errors name the offending string.
  static absl::StatusOr<InputRef> Parse(absl::string_view text);
  /// Back to the string form.
  std::string ToString() const;
};

/// A node: TensorFlow's NodeDef.
struct NodeDef {
  std::string name;  ///< unique in its graph or function body
  std::string op;    ///< a registered op (tdf/op_registry.h)
  std::vector<std::string> input;  ///< data inputs first, then "^ctrl"
  AttrMap attr;  ///< attributes by name
  std::string device;  ///< "", "cpu", "cuda:0"

  /// \name Attributes
  /// Typed attribute lookups; errors name the node, its op and the attribute.
  /// @{

  /// The int attribute `attr_name`.
  absl::StatusOr<int64_t> GetInt(absl::string_view attr_name) const;
  absl::StatusOr<double> GetFloat(absl::string_view attr_name) const;
  absl::StatusOr<bool> GetBool(absl::string_view attr_name) const;
  absl::StatusOr<std::string> GetString(absl::string_view attr_name) const;
  absl::StatusOr<DType> GetType(absl::string_view attr_name) const;
  absl::StatusOr<Tensor> GetTensor(absl::string_view attr_name) const;
  absl::StatusOr<std::vector<int64_t>> GetIntList(absl::string_view attr_name) const;
  absl::StatusOr<std::vector<DType>> GetTypeList(absl::string_view attr_name) const;
  int64_t GetIntOr(absl::string_view attr_name, int64_t fallback) const;
  bool GetBoolOr(absl::string_view attr_name, bool fallback) const;
  const AttrValue* FindAttr(absl::string_view attr_name) const;
  /// @}

  int num_data_inputs() const;  ///< inputs before the first "^"
  /// Equal field by field.
  friend bool operator==(const NodeDef& a, const NodeDef& b);
};

/// A function argument or result.
struct ArgDef {
  std::string name;              ///< its name in the signature
  DType type = DType::kInvalid;  ///< its dtype
  /// Equal field by field.
  friend bool operator==(const ArgDef& a, const ArgDef& b) { return a.name == b.name && a.type == b.type; }
};

/// A function's name, arguments and results.
struct FunctionSignature {
  std::string name;             ///< unique in the library
  std::vector<ArgDef> inputs;   ///< the arguments
  std::vector<ArgDef> outputs;  ///< the results
  /// Equal field by field.
  friend bool operator==(const FunctionSignature& a, const FunctionSignature& b) {
    return a.name == b.name && a.inputs == b.inputs && a.outputs == b.outputs;
  }
};

/// A library function: its signature and, once defined, its body.
struct FunctionDef {
  FunctionSignature signature;  ///< name, arguments, results
  bool defined = false;        ///< false: declared only
  std::vector<NodeDef> node;   ///< the body, with Arg and Retval nodes
  /// Equal field by field.
  friend bool operator==(const FunctionDef& a, const FunctionDef& b) {
    return a.signature == b.signature && a.defined == b.defined && a.node == b.node;
  }
};

/// The functions of a graph, by name.
class FunctionLibrary {
 public:
  /// Declares a function (idempotent for an identical signature).
  absl::Status Declare(const FunctionSignature& signature);
  /// Gives a declared (or new) function its body.
  absl::Status Define(const FunctionSignature& signature, std::vector<NodeDef> body);
  /// Adds or replaces a function whole (used by loaders and passes).
  void Put(FunctionDef function);
  /// The function `name`, or null.
  const FunctionDef* Find(absl::string_view name) const;
  /// The function `name`, or null, to change in place.
  FunctionDef* FindMutable(absl::string_view name);
  /// All of them, by name.
  const std::map<std::string, FunctionDef, std::less<>>& functions() const { return functions_; }
  /// Whether there are none.
  bool empty() const { return functions_.empty(); }
  /// Equal field by field.
  friend bool operator==(const FunctionLibrary& a, const FunctionLibrary& b) {
    return a.functions_ == b.functions_;
  }

 private:
  /// Ordered: deterministic output; transparent: found by string_view.
  std::map<std::string, FunctionDef, std::less<>> functions_;
};

/// A program: the main graph's nodes and the function library.
struct Graph {
  std::vector<NodeDef> node;  ///< the main graph
  FunctionLibrary library;    ///< the functions it calls

  const NodeDef* FindNode(absl::string_view name) const;  ///< linear scan
  /// Equal field by field.
  friend bool operator==(const Graph& a, const Graph& b) { return a.node == b.node && a.library == b.library; }
};

/// "node 'name' (Op): message" — the prefix every node error carries.
absl::Status NodeError(const NodeDef& node, absl::StatusCode code, absl::string_view message);
std::string NodeLabel(const NodeDef& node);  ///< "node 'name' (Op)"
/// `s` with that prefix, unless its message already starts with exactly
/// this node's "node 'name' (Op): " (an error made by NodeError). Only the
/// exact prefix counts: the name appearing elsewhere in the message (node
/// 'r' and "Reshape: bad target shape") does not label it.
absl::Status WithNodeLabel(const NodeDef& node, const absl::Status& s);

}  // namespace tdf

#endif  // TDF_GRAPH_H_
