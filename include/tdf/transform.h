/// \file
/// Graph passes. The central one, StaticizeRecursion, is the Yaghi
/// transformation (design.md §2): it turns a main graph plus a function
/// library whose bodies may call any function, themselves included, into ONE
/// static graph with no Invoke nodes and an empty library, in which every
/// reachable function body appears exactly once however deep the recursion.
///
/// \code
///   absl::StatusOr<tdf::Graph> g = tdf::StaticizeRecursion(tdf::reference::Fib());
/// \endcode
///
/// A tiny pass framework in the MLIR spirit runs passes in order and can
/// verify the graph after each one:
///
/// \code
///   tdf::PassManager pm;
///   pm.AddPass(tdf::CreatePruneUnreachableFunctionsPass());
///   pm.AddPass(tdf::CreateStaticizeRecursionPass());
///   pm.SetVerifier([](const tdf::Graph& g) { return tdf::Validate(g); });
///   absl::Status s = pm.Run(graph);
/// \endcode
///
/// The shape StaticizeRecursion produces (the executor relies on it):
/// \code
///   * Each reachable function f's body is copied once; its nodes are renamed
///     "f/<node>" and Enter frame names become "f/<frame>". Main-graph nodes
///     keep their names.
///   * Call sites of f are numbered 0..k-1: the main graph's Invoke nodes in
///     node order, then the bodies of reachable functions in alphabetical
///     order, body nodes in order. Recursive sites count too.
///   * An Invoke S of f with x arguments and y results becomes x Call nodes
///     "S/call_<j>" (attrs T, function, call_site, arg_index; input: argument
///     j, then S's control inputs) — or, for x == 0, one "S/call" with
///     arg_index -1 and T bool — and y Return nodes "S/return_<r>" (attrs T,
///     function, call_site, result_index; data input: f's result Identity, then
///     a control input from every Call of S). Consumers of "S:r" read
///     "S/return_<r>"; a control input "^S" becomes "^S/return_<r>" for all r.
///     Functions without results are not supported (Unimplemented).
///   * Arg j of f becomes a Merge "f/<arg>" fed by "S/call_<j>" of every site,
///     in site order; Retval r becomes an Identity "f/<retval>".
///   * Body nodes left with no inputs at all get the string attr
///     `_function` = "f": the executor fires them when an invocation of f
///     starts.
/// \endcode
#ifndef TDF_TRANSFORM_H_
#define TDF_TRANSFORM_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tdf/graph.h"

namespace tdf {

/// The attribute that marks a sourceless node of a function body with the
/// name of its function.
inline constexpr absl::string_view kFunctionAttr = "_function";

/// The Yaghi transformation; see the file comment. Errors name the offending
/// node ("node 'x' (Invoke): calls undefined function 'f'").
absl::StatusOr<Graph> StaticizeRecursion(const Graph& graph);

/// Drops the library functions that no Invoke of the main graph reaches,
/// directly or through other bodies.
absl::Status PruneUnreachableFunctions(Graph& graph);

/// A transformation of a Graph in place.
class GraphPass {
 public:
  virtual ~GraphPass() = default;
  /// A short stable name ("staticize-recursion"), used in error messages.
  virtual absl::string_view name() const = 0;
  /// Transforms `graph` in place; an error leaves it unchanged.
  virtual absl::Status Run(Graph& graph) = 0;
};

/// StaticizeRecursion as a pass.
std::unique_ptr<GraphPass> CreateStaticizeRecursionPass();
/// PruneUnreachableFunctions as a pass.
std::unique_ptr<GraphPass> CreatePruneUnreachableFunctionsPass();

/// Runs passes in the order they were added. With a verifier, the graph is
/// verified after every pass, so a broken pass is named by the error instead
/// of surfacing later in the executor.
class PassManager {
 public:
  /// Checks a graph after each pass (tdf::Validate, typically).
  using Verifier = std::function<absl::Status(const Graph&)>;

  /// Appends a pass.
  void AddPass(std::unique_ptr<GraphPass> pass);
  /// Verifies the graph after every pass.
  void SetVerifier(Verifier verifier) { verifier_ = std::move(verifier); }
  /// Stops at the first failing pass or verification; the error says which
  /// pass ("pass 'staticize-recursion': ..."). The built-in passes leave the
  /// graph unchanged when they fail, so after an error `graph` holds the
  /// result of the passes before the failing one.
  absl::Status Run(Graph& graph) const;
  /// How many passes were added.
  size_t size() const { return passes_.size(); }

 private:
  std::vector<std::unique_ptr<GraphPass>> passes_;
  Verifier verifier_;
};

}  // namespace tdf

#endif  // TDF_TRANSFORM_H_
