/// \file
/// Every op declares its inputs, outputs, attributes and dtype rule in an
/// OpSchema; validation (tdf/validate.h) and the executor use the registry.
/// Registration is explicit (RegisterBuiltinOps is called the first time the
/// global registry is used), never through static initializers, which a static
/// library link may drop.
///
/// \code
///   tdf::OpRegistry::Global()->Register(
///       tdf::OpSchema("Square").Inputs(1).Outputs(1).SameTypeNumeric()
///           .Doc("x * x, elementwise."));
/// \endcode
#ifndef TDF_OP_REGISTRY_H_
#define TDF_OP_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "tdf/graph.h"

namespace tdf {

/// How the executor treats an op. Everything that is not control flow or a
/// call is a kernel op that keeps its input's tag.
enum class OpKind : uint8_t {
  kKernel,
  kSwitch,
  kMerge,
  kEnter,
  kExit,
  kNextIteration,
  kCall,     ///< a transformed call: t -> t/i
  kReturn,   ///< t/i -> t
  kInvoke,   ///< an untransformed function call f(args...)
  kArg,      ///< function-body placeholder for an argument
  kRetval,   ///< function-body placeholder for a result
  kVariable, ///< a variable handle (state that outlives a run)
  kSend,     ///< sends its input to another rank (tdf/partition.h)
  kRecv,     ///< a token from another rank, under the sender's tag
};

/// What a dtype rule sees.
struct InferenceContext {
  const NodeDef& node;  ///< the node, with its attributes
  /// Dtypes of the data inputs; kInvalid where not known yet (back edges).
  absl::Span<const DType> input_types;
  const FunctionLibrary* library;  ///< may be null
};

/// Returns the output dtypes, or an error naming what is wrong (the caller
/// prefixes the node label).
using TypeInferenceFn = std::function<absl::StatusOr<std::vector<DType>>(const InferenceContext&)>;

/// Checks a node's attributes alone, whatever its inputs: what the op's
/// kernel would refuse for any input (a Reshape target with two -1s).
/// Returns an error naming what is wrong (the caller prefixes the node label).
using AttrCheckFn = std::function<absl::Status(const NodeDef&)>;

/// An attribute an op takes.
struct AttrSpec {
  std::string name;  ///< its key in NodeDef::attr
  std::string type;  ///< as AttrValue::TypeName()
  bool required = true;  ///< validation fails without it
};

/// An op's declaration: arity, attributes, dtype rule; built by chaining.
class OpSchema {
 public:
  /// A kernel op of that name with no inputs, attributes or outputs yet.
  explicit OpSchema(std::string name) : name_(std::move(name)) {}

  /// \name Declaring
  /// Each returns the schema, so that calls chain.
  /// @{

  /// How the executor treats the op (kernel unless control flow or a call).
  OpSchema& Kind(OpKind kind) { kind_ = kind; return *this; }
  OpSchema& Inputs(int n) { min_inputs_ = max_inputs_ = n; return *this; }
  OpSchema& InputsRange(int min, int max) { min_inputs_ = min; max_inputs_ = max; return *this; }  // max -1: unbounded
  OpSchema& Attr(std::string name, std::string type, bool required = true) {
    attrs_.push_back({std::move(name), std::move(type), required});
    return *this;
  }
  OpSchema& Infer(TypeInferenceFn fn) { infer_ = std::move(fn); return *this; }
  /// Runs after the attributes' presence and types are checked.
  OpSchema& CheckAttrs(AttrCheckFn fn) { check_attrs_ = std::move(fn); return *this; }
  OpSchema& Stateful() { stateful_ = true; return *this; }
  OpSchema& Doc(std::string doc) { doc_ = std::move(doc); return *this; }
  /// Common dtype rules.
  OpSchema& SameTypeNumeric();   ///< all inputs share a numeric dtype T; output T
  OpSchema& SameTypeFloat();     ///< ... a floating dtype
  OpSchema& SameTypeAny();       ///< ... any dtype
  OpSchema& Comparison();        ///< inputs share a dtype; output bool
  OpSchema& Logical();           ///< bool inputs; output bool

  /// @}

  /// \name Reading
  /// @{

  /// The op's name.
  const std::string& name() const { return name_; }
  OpKind kind() const { return kind_; }
  int min_inputs() const { return min_inputs_; }
  int max_inputs() const { return max_inputs_; }
  const std::vector<AttrSpec>& attrs() const { return attrs_; }
  bool stateful() const { return stateful_; }
  const std::string& doc() const { return doc_; }
  /// @}
  /// Checks arity and attributes (types, then the op's attribute check),
  /// then applies the dtype rule. Errors carry the node label.
  absl::StatusOr<std::vector<DType>> InferTypes(const InferenceContext& ctx) const;

 private:
  std::string name_;
  OpKind kind_ = OpKind::kKernel;
  int min_inputs_ = 0;
  int max_inputs_ = 0;
  std::vector<AttrSpec> attrs_;
  TypeInferenceFn infer_;
  AttrCheckFn check_attrs_;
  bool stateful_ = false;
  std::string doc_;
};

/// The op schemas by name.
class OpRegistry {
 public:
  /// The process-wide registry, with the built-in ops registered.
  static OpRegistry* Global();

  /// Errors if an op of that name exists. Thread-safe.
  absl::Status Register(OpSchema schema);
  /// nullptr if unknown. Thread-safe; the schema lives as long as the registry.
  const OpSchema* Find(absl::string_view op) const;
  /// The registered ops' names, sorted.
  std::vector<std::string> ListOps() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<OpSchema>, std::less<>> ops_ ABSL_GUARDED_BY(mu_);
};

/// Registers every built-in op (called once by OpRegistry::Global()).
void RegisterBuiltinOps(OpRegistry& registry);
/// Send and Recv, the ends of a cut edge (src/graph/distributed_ops.cc);
/// part of RegisterBuiltinOps.
void RegisterDistributedOps(OpRegistry& registry);

}  // namespace tdf

#endif  // TDF_OP_REGISTRY_H_
