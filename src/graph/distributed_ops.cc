// Send and Recv: the two ends of an edge that the partition pass
// (tdf/partition.h) cut between ranks. Registered with the built-in ops.
#include <vector>

#include "absl/strings/str_cat.h"
#include "tdf/op_registry.h"

namespace tdf {
namespace {

// The attributes both ends carry, checked alike.
absl::Status CheckPairAttrs(const NodeDef& node) {
  for (const char* attr : {"key", "send_rank", "recv_rank"}) {
    absl::StatusOr<int64_t> v = node.GetInt(attr);
    if (!v.ok()) return v.status();
    if (*v < 0) return absl::InvalidArgumentError(absl::StrCat("attribute '", attr, "' must be >= 0, is ", *v));
  }
  if (*node.GetInt("send_rank") == *node.GetInt("recv_rank"))
    return absl::InvalidArgumentError(
        absl::StrCat("send_rank and recv_rank are both ", *node.GetInt("send_rank"), ": nothing to send"));
  return absl::OkStatus();
}

// A control pair (`control` true) carries only "go" or dead, no value.
bool IsControl(const NodeDef& node) { return node.GetBoolOr("control", false); }

}  // namespace

void RegisterDistributedOps(OpRegistry& r) {
  (void)r.Register(
      OpSchema("Send").Kind(OpKind::kSend).InputsRange(0, 1).Attr("key", "int").Attr("send_rank", "int")
          .Attr("recv_rank", "int").Attr("T", "type", false).Attr("control", "bool", false)
          .Attr("tensor_name", "string", false).Stateful()
          .Infer([](const InferenceContext& ctx) -> absl::StatusOr<std::vector<DType>> {
            absl::Status s = CheckPairAttrs(ctx.node);
            if (!s.ok()) return s;
            const bool control = IsControl(ctx.node);
            if (control != ctx.input_types.empty())
              return absl::InvalidArgumentError(control ? "a control Send takes no data input (only a control input)"
                                                        : "a data Send takes one data input");
            if (!control) {
              absl::StatusOr<DType> t = ctx.node.GetType("T");
              if (!t.ok()) return t.status();
              if (ctx.input_types[0] != DType::kInvalid && ctx.input_types[0] != *t)
                return absl::InvalidArgumentError(absl::StrCat("input is ", DTypeName(ctx.input_types[0]),
                                                               ", attr T is ", DTypeName(*t)));
            }
            return std::vector<DType>{};
          })
          .Doc("Sends its input (or, with `control`, the firing of its control input) to the Recv with the same "
               "`key` on rank `recv_rank`, under the input's tag: exactly once per tag, live or dead "
               "(docs/distributed.md). `tensor_name` names the producer, for messages."));
  (void)r.Register(
      OpSchema("Recv").Kind(OpKind::kRecv).Inputs(0).Attr("key", "int").Attr("send_rank", "int")
          .Attr("recv_rank", "int").Attr("T", "type", false).Attr("control", "bool", false)
          .Attr("tensor_name", "string", false).Stateful()
          .Infer([](const InferenceContext& ctx) -> absl::StatusOr<std::vector<DType>> {
            absl::Status s = CheckPairAttrs(ctx.node);
            if (!s.ok()) return s;
            if (IsControl(ctx.node)) return std::vector<DType>{};
            absl::StatusOr<DType> t = ctx.node.GetType("T");
            if (!t.ok()) return t.status();
            if (*t == DType::kInvalid) return absl::InvalidArgumentError("attr T must not be invalid");
            return std::vector<DType>{*t};
          })
          .Doc("The token that the Send with the same `key` on rank `send_rank` sent, delivered under the "
               "sender's tag into the frame of that tag on this rank (created on arrival). Fires in the block "
               "that `_function` and `_loop_frames` name (graph/frames.h). A control Recv has no output and "
               "is read as a control input."));
}

}  // namespace tdf
