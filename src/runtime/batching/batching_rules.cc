// Batching rules per op and the batched firing (batching_rules.h).
#include "runtime/batching/batching_rules.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tdf/status.h"

namespace tdf {
namespace runtime {
namespace batching {
namespace {

const absl::flat_hash_set<std::string>& UnaryOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "Tanh", "Sigmoid", "Relu", "Exp", "Log", "Neg", "Abs", "Square", "Sign", "Sqrt", "Rsqrt", "Reciprocal"};
  return *ops;
}

const absl::flat_hash_set<std::string>& BinaryOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "TanhGrad", "SigmoidGrad", "ReluGrad", "AddN"};
  return *ops;
}

int64_t NormalizedAxis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

// The parts of input `input` as one tensor without a copy, when they are
// consecutive pieces of one buffer in instance order: the split outputs of
// an earlier batched firing (a chain Concat -> MatMul -> Add -> Tanh), whose
// bucket ordered its instances by where their inputs lie (FireBatched).
// Else an invalid tensor. `keep` holds a second reference to a tensor over
// part of a buffer: a tensor referenced once may be overwritten in place by
// its kernel, and these bytes are the instances' own inputs.
Tensor StackWithoutCopy(const BatchInputs& b, int input, const Shape& shape, std::vector<Tensor>* keep) {
  const Tensor& first = *b.inputs[input];
  const Buffer* view = first.buffer();
  if (view == nullptr || view->parent() == nullptr || !view->device().is_cpu()) return Tensor();
  Buffer* parent = view->parent();
  const size_t bytes = first.bytes();
  const char* base = static_cast<const char*>(first.raw_data());
  for (int k = 1; k < b.n; ++k) {
    const Tensor& part = *b.inputs[k * b.num_inputs + input];
    if (part.buffer() == nullptr || part.buffer()->parent() != parent || part.raw_data() != base + k * bytes)
      return Tensor();
  }
  const size_t offset = static_cast<size_t>(base - static_cast<const char*>(parent->data()));
  const size_t total = bytes * static_cast<size_t>(b.n);
  // The whole parent: the parts' views hold it too, so it is never
  // referenced once here.
  if (offset == 0 && total == parent->bytes()) return Tensor::FromBuffer(first.dtype(), shape, parent);
  Buffer* range = Buffer::View(parent, offset, total);
  Tensor t = Tensor::FromBuffer(first.dtype(), shape, range);
  range->Unref();
  keep->push_back(t);
  return t;
}

// A tensor of `n` parts laid end to end: [n, shape...] or [n * d0, rest...].
absl::StatusOr<Tensor> Stack(const BatchInputs& b, int input, Stacking stacking, std::vector<Tensor>* keep,
                             bool* copied) {
  const Tensor& first = *b.inputs[input];
  Shape shape;
  if (stacking == Stacking::kNewAxis) {
    shape.AddDim(b.n);
    for (int64_t d : first.shape().dims()) shape.AddDim(d);
  } else {
    shape = first.shape();
    shape.set_dim(0, first.shape().dim(0) * b.n);
  }
  Tensor shared = StackWithoutCopy(b, input, shape, keep);
  *copied = !shared.valid();
  if (shared.valid()) return shared;
  TDF_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(first.dtype(), shape));
  const size_t bytes = first.bytes();
  if (bytes == 0) return out;
  char* dst = static_cast<char*>(out.raw_mutable_data());
  for (int k = 0; k < b.n; ++k) {
    const Tensor& part = *b.inputs[k * b.num_inputs + input];
    std::memcpy(dst + k * bytes, part.raw_data(), bytes);
  }
  return out;
}

// Whether every instance holds the same tensor as input `input`: the same
// buffer (and shape, which the bucket key already makes equal), or the same
// inline scalar.
bool Identical(const BatchInputs& b, int input) {
  const Tensor& first = *b.inputs[input];
  for (int k = 1; k < b.n; ++k) {
    const Tensor& t = *b.inputs[k * b.num_inputs + input];
    if (first.is_inline_scalar() != t.is_inline_scalar() || first.dtype() != t.dtype()) return false;
    if (first.is_inline_scalar()) {
      if (std::memcmp(first.raw_data(), t.raw_data(), DTypeSize(first.dtype())) != 0) return false;
    } else if (first.buffer() != t.buffer()) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<BatchRule> RuleFor(const NodeDef& node) {
  BatchRule r;
  const std::string& op = node.op;
  if (UnaryOps().contains(op)) {
    r.elementwise = true;
    return r;
  }
  if (BinaryOps().contains(op)) {
    r.elementwise = true;
    r.rest = InputRole::kEither;
    return r;
  }
  if (op == "MatMul" || op == "MatMulAdd") {
    if (node.GetBoolOr("transpose_a", false)) return std::nullopt;
    r.stacking = Stacking::kRows;
    r.roles = {InputRole::kPerInstance, InputRole::kShared};
    r.exact_rank_first = 2;
    r.min_rank = 1;
    return r;
  }
  if (op == "Gather") {
    if (node.GetIntOr("axis", 0) != 0) return std::nullopt;
    r.roles = {InputRole::kShared, InputRole::kPerInstance};
    return r;
  }
  if (op == "Concat" || op == "ConcatGrad") {
    absl::StatusOr<int64_t> axis = node.GetInt("axis");
    if (!axis.ok() || *axis == 0) return std::nullopt;  // negative axes: Accepts, which knows the rank
    r.stacking = Stacking::kRows;
    r.axes_not_zero = {*axis};
    r.min_rank = 1;
    return r;
  }
  if (op == "Slice" || op == "SliceGrad") {
    absl::StatusOr<std::vector<int64_t>> begin = node.GetIntList("begin");
    absl::StatusOr<std::vector<int64_t>> size = node.GetIntList("size");
    if (!begin.ok() || !size.ok() || begin->empty() || size->empty() || (*begin)[0] != 0 || (*size)[0] != -1)
      return std::nullopt;
    r.stacking = Stacking::kRows;
    r.min_rank = 1;
    return r;
  }
  if (op == "Sum" || op == "Mean" || op == "Max") {
    if (node.FindAttr("axes") == nullptr) return std::nullopt;  // all axes: axis 0 too
    absl::StatusOr<std::vector<int64_t>> axes = node.GetIntList("axes");
    if (!axes.ok() || axes->empty()) return std::nullopt;
    r.stacking = Stacking::kRows;
    r.axes_not_zero = *axes;
    r.min_rank = 1;
    return r;
  }
  if (op == "Softmax" || op == "SoftmaxCrossEntropy") {
    r.min_rank = 1;
    return r;
  }
  if (op == "IndexedRows") {
    r.stacking = Stacking::kRows;
    r.roles = {InputRole::kShared, InputRole::kPerInstance, InputRole::kPerInstance};
    r.min_rank = 1;
    return r;
  }
  return std::nullopt;
}

bool Accepts(const BatchRule& rule, absl::Span<const Tensor* const> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    if (!t.valid() || !t.device().is_cpu()) return false;
    if (rule.role(static_cast<int>(i)) == InputRole::kShared) continue;
    if (t.rank() < rule.min_rank) return false;
    if (i == 0 && rule.exact_rank_first >= 0 && t.rank() != rule.exact_rank_first) return false;
    for (int64_t axis : rule.axes_not_zero) {
      const int64_t a = NormalizedAxis(axis, t.rank());
      if (a <= 0 || a >= t.rank()) return false;
    }
  }
  return true;
}

absl::Status RunBatched(const BatchRule& rule, OpKernel& kernel, const BatchInputs& b, int num_outputs,
                        const std::function<void(KernelContext&)>& ctx_setup, std::vector<Tensor>* outputs,
                        int64_t* inputs_without_copy) {
  // Which inputs go to the kernel once, and the ranks stacking needs.
  std::vector<uint8_t> shared(b.num_inputs, 0);
  int result_rank = 0;
  for (int i = 0; i < b.num_inputs; ++i) {
    const InputRole role = rule.role(i);
    shared[i] = role == InputRole::kShared || (role == InputRole::kEither && Identical(b, i));
    result_rank = std::max(result_rank, b.inputs[i]->rank());
  }
  // Every operand the same in every instance (x + x of one captured x):
  // stack the first, or the output would have no axis to split.
  if (std::find(shared.begin(), shared.end(), 0) == shared.end()) {
    if (b.num_inputs == 0 || rule.role(0) == InputRole::kShared)
      return absl::FailedPreconditionError("no per-instance input");
    shared[0] = 0;
  }
  if (rule.elementwise) {
    // Broadcasting aligns trailing dims: a stacked operand of a lower rank
    // than the result would meet the new axis with one of its own.
    for (int i = 0; i < b.num_inputs; ++i) {
      if (!shared[i] && b.inputs[i]->rank() != result_rank)
        return absl::FailedPreconditionError("operands of different ranks");
    }
  }
  std::vector<Tensor> stacked(b.num_inputs);
  std::vector<Tensor> keep;
  std::vector<const Tensor*> in(b.num_inputs);
  for (int i = 0; i < b.num_inputs; ++i) {
    if (shared[i]) {
      in[i] = b.inputs[i];
      continue;
    }
    bool copied = true;
    TDF_ASSIGN_OR_RETURN(stacked[i], Stack(b, i, rule.stacking, &keep, &copied));
    if (!copied && inputs_without_copy != nullptr) ++*inputs_without_copy;
    in[i] = &stacked[i];
  }
  std::vector<Tensor> out(std::max(num_outputs, 1));
  KernelContext ctx(in.data(), b.num_inputs, out.data(), num_outputs, Device::Cpu());
  if (ctx_setup) ctx_setup(ctx);
  TDF_RETURN_IF_ERROR(kernel.Compute(ctx));
  // Split every output first: a shape that does not split leaves `outputs`
  // untouched, and the instances fire alone.
  for (int j = 0; j < num_outputs; ++j) {
    const Tensor& o = out[j];
    if (!o.valid() || !o.device().is_cpu() || o.rank() < 1)
      return absl::FailedPreconditionError("an output without a leading axis");
    const int64_t d0 = o.shape().dim(0);
    if (rule.stacking == Stacking::kNewAxis ? d0 != b.n : d0 % b.n != 0)
      return absl::FailedPreconditionError(absl::StrCat("output ", j, " of shape ", o.shape().DebugString(),
                                                        " does not split in ", b.n));
  }
  outputs->resize(static_cast<size_t>(b.n) * num_outputs);
  for (int j = 0; j < num_outputs; ++j) {
    const Tensor& o = out[j];
    Shape piece;
    if (rule.stacking == Stacking::kNewAxis) {
      for (int d = 1; d < o.rank(); ++d) piece.AddDim(o.shape().dim(d));
    } else {
      piece = o.shape();
      piece.set_dim(0, o.shape().dim(0) / b.n);
    }
    // Instance k's part is a view of rows of the output, not a copy: the
    // next batched firing of these instances takes the output back whole
    // (StackWithoutCopy).
    const size_t bytes = o.bytes() / b.n;
    Buffer* whole = o.buffer();
    for (int k = 0; k < b.n; ++k) {
      if (piece.is_scalar()) {  // CPU scalars live inline in their tensor
        TDF_ASSIGN_OR_RETURN(Tensor part, Tensor::Empty(o.dtype(), piece));
        std::memcpy(part.raw_mutable_data(), static_cast<const char*>(o.raw_data()) + k * bytes, bytes);
        (*outputs)[static_cast<size_t>(k) * num_outputs + j] = std::move(part);
        continue;
      }
      Buffer* view = Buffer::View(whole, k * bytes, bytes);
      Tensor part = Tensor::FromBuffer(o.dtype(), piece, view);
      view->Unref();
      (*outputs)[static_cast<size_t>(k) * num_outputs + j] = std::move(part);
    }
  }
  return absl::OkStatus();
}

}  // namespace batching
}  // namespace runtime
}  // namespace tdf
