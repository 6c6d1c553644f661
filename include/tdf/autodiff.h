/// \file
/// Reverse-mode automatic differentiation of tdf graphs, through Cond
/// (Switch/Merge) and through functions, recursive and mutually recursive ones
/// included (design.md §5; seeds/003 §4).
///
/// AddGradients works on a built Graph (main graph + function library), so it
/// composes with anything that produces one — GraphBuilder, the protobuf
/// loaders, a pass. It appends the backward nodes to the main graph and
/// returns the names of the gradient outputs, ready to fetch:
///
/// \code
///   tdf::GraphBuilder b;
///   ... b.DefineFunction({"exp", {{"x", kFloat64}, {"n", kInt64}}, {{"y", kFloat64}}}, ...);
///   tdf::Output x = b.Placeholder("x", tdf::DType::kFloat64);
///   tdf::Output n = b.Placeholder("n", tdf::DType::kInt64);
///   b.Identity(b.Call("exp", {x, n})[0], "y");
///   tdf::Graph g = *b.Build();
///   std::vector<std::string> dx = *tdf::AddGradients(g, {"y"}, {"x"});
///   auto session = *tdf::Session::Create(g);
///   auto out = *session->Run({{"x", ...}, {"n", ...}}, {"y", dx[0]});
/// \endcode
///
/// Functions: for every function f on the gradient path, AddGradients adds
/// f's extended function "<f>_ext"(x..., dy...) -> (y..., dx...) to the
/// library (dy per floating result, dx per floating argument). Its body is f's
/// body plus its backward path; where f called g, f_ext calls g_ext. Each call
/// of a differentiated function becomes ONE call site of g_ext split in two
/// Invoke parts sharing a `site_group`: the forward part supplies x and yields
/// y, the backward part supplies dy and yields dx. StaticizeRecursion gives
/// both parts the same label, so an invocation's forward values wait in its
/// frame for that invocation's backward ops: nothing is recomputed, no stacks.
/// Split sites need ExecutionMode::kStatic (the dynamic baseline's Invoke
/// instantiates whole calls): in ExecutionMode::kDynamic, Session::Create
/// rejects a graph with them (UNIMPLEMENTED, naming the Invoke).
///
/// While loops on the gradient path become tail-recursive functions first,
/// \code
///   while (c(v)) v = b(v)   =>   L(v, inv) = c(v) ? L(b(v), inv) : v,
/// \endcode
/// so their gradients come from the same fused machinery: the body's gradient
/// runs once per iteration in reverse, each iteration's forward values wait in
/// its invocation's frame (memory: iterations x frame, nothing recomputed),
/// and loop invariants' gradients are summed over the iterations. The lowered
/// loop no longer honours parallel_iterations (an invocation starts as soon as
/// its arguments arrive). Loops off the gradient path stay loops.
///
/// A weight W that f only multiplies by (the right operand of a plain MatMul
/// x W, passed on unchanged to the same argument of f's recursive calls: the
/// shared matrix of a recursive network) gets its gradient sum_i x_i^T dy_i
/// as outer-product rows: f_ext returns the rows [x_i | dy_i] of its whole
/// subtree of invocations ([m, K + N], op OuterRowsConcat, compacted to
/// min(K, N) rows when longer), and the outermost caller forms the dense
/// [K, N] once (OuterRowsSum, one GEMM). A call then adds a few rows to its
/// caller's instead of summing dense [K, N] matrices per invocation. Likewise
/// a table P that f only reads by Gather(P, idx) along axis 0 (and passes on
/// unchanged): its gradient travels as indexed rows [idx | dy row]
/// (IndexedRows, IndexedRowsConcat: one row per distinct index once longer
/// than P), scattered once by the outermost caller (IndexedRowsSum) or, for
/// a variable, straight into its gathered rows by AddSgdStep.
///
/// Integer and bool values get no gradient. Neither do the inputs of ops whose
/// derivative is zero wherever it exists: Sign (piecewise constant),
/// ZerosLike and OnesLike (they read only the shape), and comparisons (bool
/// results); so a program may start a loop accumulator at ZerosLike(x). An x
/// reached only through them gets zeros.
#ifndef TDF_AUTODIFF_H_
#define TDF_AUTODIFF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tdf/graph.h"

namespace tdf {

/// Adds to `graph` the gradients of sum_i <grad_ys[i], ys[i]> with respect to
/// each of `xs`, and returns one output name per x ("node" or "node:port").
/// ys and xs name main-graph outputs ("node" or "node:port"): typically xs
/// are Placeholders or Variable Reads. grad_ys, when given, names one upstream
/// gradient per y; otherwise each y is seeded with ones. An x that no y
/// depends on gets zeros. Fails (graph unchanged in meaning but possibly with
/// extra nodes) on an op without a gradient, naming the node; INVALID_ARGUMENT
/// on a port past a node's outputs.
absl::StatusOr<std::vector<std::string>> AddGradients(Graph& graph, const std::vector<std::string>& ys,
                                                      const std::vector<std::string>& xs,
                                                      const std::vector<std::string>& grad_ys = {});

/// The ops AddGradients can differentiate (sorted).
std::vector<std::string> DifferentiableOps();

// ---- training ----

/// One optimizer step as graph ops built from AssignAdd/Assign (each atomic).
/// `variables` name Variable nodes of the main graph, `gradients` one gradient
/// output per variable (e.g. from AddGradients of the loss w.r.t. Reads of the
/// variables). Returns the name of a NoOp that depends on every update: a run
/// takes the step when it names the NoOp as a target, and a run that only
/// fetches (the loss, a gradient) evaluates without stepping (Session::Run
/// fires only what its fetches and targets need).
///
///   SGD:  v -= lr * g
/// A gradient that is a Gather's (AddGradients gives a GatherGrad node, axis
/// 0, for a variable read only through one Gather, e.g. an embedding table)
/// and that no node reads is applied sparsely: a ScatterAdd of -lr * dy into
/// the gathered rows, O(rows gathered) instead of O(rows of v); the dense
/// GatherGrad node is removed from the graph (it can no longer be fetched).
/// So is a table's gradient from a recursive function that Gathers from it
/// (an IndexedRowsSum of the rows of every invocation's reads).
absl::StatusOr<std::string> AddSgdStep(Graph& graph, const std::vector<std::string>& variables,
                                       const std::vector<std::string>& gradients, double learning_rate);

/// Adam's settings (Kingma & Ba's defaults).
struct AdamOptions {
  double learning_rate = 1e-3;  ///< lr
  double beta1 = 0.9;           ///< decay of the first moment m
  double beta2 = 0.999;         ///< decay of the second moment v
  double epsilon = 1e-8;        ///< added to sqrt(v)
};
/// \code
///   Adam (Kingma & Ba): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; t += 1;
///   var -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps).
/// \endcode
/// Adds, as Variable nodes of the main graph (zero-initialized, found by
/// Session::ReadVariable / AssignVariable under these names, e.g. to
/// checkpoint them), the slots "<var>/adam_m" and "<var>/adam_v" of each
/// variable (its shape and dtype) and one step counter "adam_t/<first var>"
/// (a scalar of the first variable's dtype) per call. Each call adds its own
/// counter and slots: when any of these names is already taken (a second
/// AddAdamStep on the same variable), all of this call's get the suffix
/// "_1" ("w/adam_m_1", "w/adam_v_1", "adam_t/w_1"), else "_2", and so on: the
/// smallest that frees them all. A variable listed twice is an error.
absl::StatusOr<std::string> AddAdamStep(Graph& graph, const std::vector<std::string>& variables,
                                        const std::vector<std::string>& gradients, const AdamOptions& options);

}  // namespace tdf

#endif  // TDF_AUTODIFF_H_
