// File: src/runtime/batching/batching_rules.h
// Batching one op across tags (design.md §9, issue #30): which ops may fire
// once for the ready instances of one node under many tags, and how their
// inputs are stacked and their outputs split.
//
// A rule per op says, per input, whether it is
//   per-instance  stacked: the instances' tensors (of one shape, which the
//                 executor's bucket key makes sure of) are laid one after the
//                 other, either along a new leading axis ([n, shape...],
//                 Stacking::kNewAxis) or as rows ([n * d0, rest...],
//                 Stacking::kRows);
//   shared        the identical tensor in every instance (a weight; the bucket
//                 key holds its identity), passed to the kernel once;
//   either        shared when every instance of the batch holds the identical
//                 tensor (a bias captured by every invocation), else stacked.
// Outputs are split along axis 0 into n equal parts: kNewAxis drops the
// axis (piece k is out[k]), kRows keeps it (piece k is rows [k*m, (k+1)*m)).
//
// Per op (the TreeRNN's forward and backward ops, bench/treernn.cc):
//   op                                  stacking   inputs                          batches when
//   unary elementwise (Tanh, Sigmoid,   new axis   x per-instance                  always
//     Relu, Exp, Log, Neg, Abs, Square,
//     Sign, Sqrt, Rsqrt, Reciprocal)
//   binary elementwise (Add, Sub, Mul,  new axis   each either                     stacked operands have the
//     Div, Maximum, Minimum, Pow,                                                  per-instance result's rank,
//     TanhGrad, SigmoidGrad, ReluGrad),                                            shared ones at most that
//     AddN
//   MatMul, MatMulAdd                   rows       a per-instance, b shared,       not transpose_a; a rank 2
//                                                  addends per-instance
//   Gather (axis 0)                     new axis   params shared, indices          always
//                                                  per-instance
//   Concat, ConcatGrad                  rows       all per-instance                axis is not 0
//   Slice, SliceGrad                    rows       all per-instance                begin[0] = 0, size[0] = -1
//   Sum, Mean, Max                      rows       x per-instance                  axes given, none is 0
//   Softmax, SoftmaxCrossEntropy        new axis   all per-instance                rank >= 1
//   IndexedRows                         rows       P shared, indices (rank 1) and  indices of rank 1
//                                                  dy per-instance
// Ops without a rule never batch: among the TreeRNN's, OuterRowsConcat and
// IndexedRowsConcat (their output's row count depends on the data: they
// compact), OuterRowsSum, IndexedRowsSum and SumToShapeOf (they reduce
// over rows), Reshape (a view already), and everything with state or
// control flow.
//
// Splitting copies nothing: instance k's part of an output is a view of its
// rows (Buffer::View). Stacking copies the instances' inputs into one buffer
// unless they are consecutive rows of one buffer already (the parts of an
// earlier batched output, in order: the executor orders a bucket's
// instances by where their input lies), which the kernel then takes as is.
//
// Thread safety: rules are immutable; RunBatched may run concurrently.
#ifndef TDF_SRC_RUNTIME_BATCHING_BATCHING_RULES_H_
#define TDF_SRC_RUNTIME_BATCHING_BATCHING_RULES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "tdf/graph.h"
#include "tdf/kernel.h"
#include "tdf/tensor.h"

namespace tdf {
namespace runtime {
namespace batching {

enum class Stacking : uint8_t {
  kNewAxis,  // [n, shape...]; outputs split dropping axis 0
  kRows,     // [n * d0, rest...]; outputs split keeping it
};

enum class InputRole : uint8_t { kPerInstance, kShared, kEither };

struct BatchRule {
  Stacking stacking = Stacking::kNewAxis;
  // Roles of inputs 0, 1, ...; inputs past the list take `rest`.
  std::vector<InputRole> roles;
  InputRole rest = InputRole::kPerInstance;
  // kRows ops whose attribute names an axis that must not be axis 0 (after
  // adding the rank to a negative one): Concat's axis, a reduction's axes.
  std::vector<int64_t> axes_not_zero;
  // Rank per-instance inputs need at least (and exactly, for MatMul's a).
  int min_rank = 0;
  int exact_rank_first = -1;  // input 0's rank must be this (-1: any)
  // The elementwise family: operand ranks are checked when the batch is planned.
  bool elementwise = false;

  InputRole role(int input) const {
    return input < static_cast<int>(roles.size()) ? roles[input] : rest;
  }
};

// The rule of `node`'s op with its attributes, or nullopt: it never batches.
std::optional<BatchRule> RuleFor(const NodeDef& node);

// Whether one instance with these inputs may join a batch of `rule` (ranks
// and axes). The executor asks once per bucket: its key fixes every shape.
bool Accepts(const BatchRule& rule, absl::Span<const Tensor* const> inputs);

// One batched firing: `n` instances, instance k's inputs at
// inputs[k * num_inputs .. (k + 1) * num_inputs).
struct BatchInputs {
  int n = 0;
  int num_inputs = 0;
  absl::Span<const Tensor* const> inputs;
};

// Runs `kernel` once over the stacked inputs and writes instance k's output
// j to outputs[k * num_outputs + j]. `ctx_setup` (may be empty) prepares the
// kernel context (site, session state). FAILED_PRECONDITION: this batch
// cannot run as one (ranks or output shapes do not allow it; fire the
// instances one by one); other errors are the kernel's.
// Instance k's outputs are views of rows of the kernel's output (Buffer::
// View), and a stacked input whose parts are consecutive rows of one buffer
// in instance order is that buffer, not a copy; `inputs_without_copy` (may
// be null) counts those.
absl::Status RunBatched(const BatchRule& rule, OpKernel& kernel, const BatchInputs& batch, int num_outputs,
                        const std::function<void(KernelContext&)>& ctx_setup, std::vector<Tensor>* outputs,
                        int64_t* inputs_without_copy = nullptr);

}  // namespace batching
}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_BATCHING_BATCHING_RULES_H_
