/// \file
/// Graph validation: the checks that make a graph safe to hand to the
/// transformation passes and the executor. Every error names the node and
/// its op ("node 'x' (Add): dtype mismatch: ..."), prefixed by "function 'f': "
/// when the node is in a function body, or names the function for
/// function-level errors.
///
/// Checked, for the main graph and every defined function in the library:
/// \code
///   * structure: known ops, non-empty unique names, well-formed inputs that
///     name existing nodes, data inputs before control inputs, ports within
///     the producer's outputs, arity and attributes (OpSchema::InferTypes);
///   * attributes invalid on their face, whatever the inputs (each op's
///     OpSchema::CheckAttrs): a Reshape target with a negative dim other
///     than one -1, a Transpose perm that is not a permutation, Slice begin
///     and size of different lengths or below 0 and -1, a Cast to or a
///     Variable of an invalid dtype, a Variable shape with a negative dim,
///     a CopyToDevice to a non-CUDA device;
///   * dtypes, inferred in topological order; back edges (out-edges of
///     NextIteration, data out-edges of Call, data in-edges of Return) are
///     checked once every type is known;
///   * cycles: every cycle goes through one of those back edges;
///   * frames (graph/frames.h): no Exit or NextIteration outside a loop, no
///     node with inputs from two different frames, no unreachable node;
///   * calls: Invoke names a defined function with the right number and
///     dtypes of arguments; Call/Return carry a valid call site and, where
///     the library has the function, argument/result indices in range;
///   * function bodies: Arg and Retval indices cover the signature exactly
///     once with matching dtypes; no Variable or Placeholder in a body, no
///     Arg or Retval in the main graph;
///   * variables: Read/Assign/AssignAdd/AssignSub/ScatterAdd act on a variable handle
///     whose dtype (where the Variable is visible in the same body) matches.
///
///   absl::Status s = tdf::Validate(graph);
///   if (!s.ok()) return s;
/// \endcode
#ifndef TDF_VALIDATE_H_
#define TDF_VALIDATE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tdf/graph.h"

namespace tdf {

/// Validates the main graph and every defined function of its library.
absl::Status Validate(const Graph& graph);

/// Validates one function body against its signature; calls in the body are
/// resolved in `library`.
absl::Status ValidateFunction(const FunctionDef& function, const FunctionLibrary& library);

/// The dtypes of the outputs of every node of `nodes` (a main graph, with
/// `function` null, or the body of `function`), indexed like `nodes`, as
/// Validate infers them. Fails where Validate's structure or dtype checks do.
absl::StatusOr<std::vector<std::vector<DType>>> InferOutputTypes(const std::vector<NodeDef>& nodes,
                                                                 const FunctionDef* function,
                                                                 const FunctionLibrary& library);

}  // namespace tdf

#endif  // TDF_VALIDATE_H_
