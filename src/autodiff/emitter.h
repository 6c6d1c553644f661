// Internal to src/autodiff: appends nodes to a graph scope (the main graph or
// a function body) with unique names and inferred dtypes, and the gradient
// registry's types.
#ifndef TDF_AUTODIFF_EMITTER_H_
#define TDF_AUTODIFF_EMITTER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "tdf/graph.h"

namespace tdf {
namespace autodiff {

// "node" for port 0, "node:port" otherwise: the canonical name of an output.
std::string Key(const std::string& node, int port);

class Emitter {
 public:
  Emitter(std::vector<NodeDef>* nodes, const FunctionLibrary* library, std::string prefix)
      : nodes_(nodes), library_(library), prefix_(std::move(prefix)) {}

  // Indexes the scope's names and infers every output's dtype.
  void Init();
  // Adds a node and returns its output 0 (Outputs() for the others). The
  // first error sticks in status(); later calls return "".
  std::string Op(const std::string& op, const std::vector<std::string>& inputs, AttrMap attrs = {},
                 const std::vector<std::string>& control = {});
  DType TypeOf(const std::string& output) const;
  int NumOutputs(const std::string& node) const;
  const absl::Status& status() const { return status_; }
  void Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  std::string UniqueName(const std::string& base);
  // Whether a node of the scope has this name.
  bool Taken(const std::string& name) const { return names_.contains(name); }
  // Records a node changed or added by the caller directly.
  void Reinfer(const NodeDef& node);

  // Convenience builders.
  std::string Add(const std::string& a, const std::string& b) { return Op("Add", {a, b}); }
  std::string Sub(const std::string& a, const std::string& b) { return Op("Sub", {a, b}); }
  std::string Mul(const std::string& a, const std::string& b) { return Op("Mul", {a, b}); }
  std::string Div(const std::string& a, const std::string& b) { return Op("Div", {a, b}); }
  std::string Neg(const std::string& a) { return Op("Neg", {a}); }
  std::string SumTo(const std::string& g, const std::string& like) { return Op("SumToShapeOf", {g, like}); }
  std::string Zeros(const std::string& like) { return Op("ZerosLike", {like}); }
  std::string Ones(const std::string& like) { return Op("OnesLike", {like}); }
  std::string Sum(const std::vector<std::string>& terms);  // AddN, or the single term

 private:
  std::vector<DType> InputTypes(const NodeDef& node) const;
  std::vector<NodeDef>* nodes_;
  const FunctionLibrary* library_;
  std::string prefix_;
  absl::flat_hash_set<std::string> names_;
  absl::flat_hash_map<std::string, std::vector<DType>> types_;
  int counter_ = 0;
  absl::Status status_;
};

// What an op's gradient function sees: the forward node, its data inputs and
// outputs (as output names, with dtypes) and the upstream gradient of each
// output ("" where none flows).
struct GradArgs {
  const NodeDef* node = nullptr;
  std::vector<std::string> x;
  std::vector<DType> x_types;
  std::vector<std::string> y;
  std::vector<std::string> dy;
};

// Returns one gradient per data input ("" for none: integer/bool inputs,
// predicates, indices).
using GradFn = std::function<std::vector<std::string>(Emitter& e, const GradArgs& a)>;

// nullptr when the op has no registered gradient. The built-in gradients,
// then those added by RegisterGradient.
const GradFn* FindGradient(const std::string& op);
// Adds the gradient of an op defined by the application (tdf/function_op.h).
// ALREADY_EXISTS when `op` has one. Thread-safe; `fn` lives as long as the
// process.
absl::Status RegisterGradient(const std::string& op, GradFn fn);
std::vector<std::string> GradientOps();

}  // namespace autodiff
}  // namespace tdf

#endif  // TDF_AUTODIFF_EMITTER_H_
