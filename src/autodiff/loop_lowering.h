// Internal to src/autodiff: While loops on a gradient path become calls of
// tail-recursive functions, so that their gradients come from the fused
// function machinery (design.md §5) instead of a second mechanism.
//
//   while (c(v, inv)) v = b(v, inv)      becomes      v' = L(v, inv), where
//   L(v, inv) = c(v, inv) ? L(b(v, inv), inv) : v
//
// L_ext then runs the body's gradient once per iteration in reverse order of
// the forward iterations (the recursion unwinds backwards); each iteration's
// forward values wait in that invocation's frame for its backward ops, so
// nothing is recomputed and memory grows with iterations x frame size. The
// gradients of loop variables flow as the dy/dx of the recursive call and the
// gradients of loop invariants (is_constant Enters, arguments of every
// invocation) are summed over iterations by the recursion itself.
#ifndef TDF_AUTODIFF_LOOP_LOWERING_H_
#define TDF_AUTODIFF_LOOP_LOWERING_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tdf/graph.h"

namespace tdf {
namespace autodiff {

// Rewrites every outermost While loop of the scope `nodes` (the main graph,
// or a function body when `function_body`) that contains one of the nodes
// named in `wanted`. Each becomes an Invoke of a new recursive function
// added to `library`; the loop's Exit nodes keep their names (as Identity
// nodes reading the call's results), so consumers and fetches are unchanged.
// Loops nested inside a lowered loop move into its function's body, where
// differentiating that function lowers them in turn.
//
// Expects loops of GraphBuilder::While's shape (Enter -> Merge <- NextIteration,
// Switch on a LoopCond, Exit on the Switch's false output); anything else is
// kUnimplemented, naming the node.
absl::Status LowerLoopsToRecursion(std::vector<NodeDef>& nodes, FunctionLibrary& library, bool function_body,
                                   const std::set<std::string>& wanted);

}  // namespace autodiff
}  // namespace tdf

#endif  // TDF_AUTODIFF_LOOP_LOWERING_H_
