// File: graph/node_index.h (internal)
//
// A node list's names and inputs resolved to indices, once. Validation, frame
// inference and compilation each walk every edge; when each of them hashed
// every input's name again (and copied the names into its own map), creating
// a session for a 10^6-node graph spent seconds in string maps.
#ifndef TDF_GRAPH_NODE_INDEX_H_
#define TDF_GRAPH_NODE_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/hash_tables.h"
#include "tdf/graph.h"

namespace tdf {

struct ResolvedInput {
  int32_t src = 0;  // index of the producing node in the list
  int32_t port = 0;
  bool is_control = false;
};

// "a" / "a:1" / "^a" split without copying the name (InputRef::Parse's
// rules and errors); `node` views into `text`.
struct InputView {
  absl::string_view node;
  int32_t port = 0;
  bool is_control = false;
};
absl::StatusOr<InputView> ParseInputView(absl::string_view text);

class NodeIndex {
 public:
  // Errors name the node: a duplicate name, a malformed input ("a", "a:1",
  // "^a") or an input naming no node of the list. The index refers to the
  // nodes' names: `nodes` must outlive it and keep its elements in place.
  static absl::StatusOr<NodeIndex> Build(const std::vector<NodeDef>& nodes);
  // The index of `nodes` from what their maker already knows (the
  // transformation emits every input with its producer's position): the
  // names by position, unique, and each node's inputs, in order, with
  // `offsets` as inputs() reads them. Equal to Build's on valid input;
  // nothing is checked.
  static NodeIndex FromParts(const std::vector<NodeDef>& nodes, base::FlatHashMap<absl::string_view, int32_t> by_name,
                             std::vector<uint32_t> offsets, std::vector<ResolvedInput> inputs);

  int32_t Find(absl::string_view name) const;  // -1 if no such node
  // Node i's inputs, in NodeDef::input order.
  absl::Span<const ResolvedInput> inputs(size_t i) const {
    return absl::MakeConstSpan(inputs_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }

 private:
  // Lists of up to kLinearMax nodes (most function bodies) are searched by
  // name, without a table: building and probing a hash table cost more
  // than comparing a few names (Session::Create validates every body).
  static constexpr size_t kLinearMax = 16;
  const NodeDef* linear_ = nullptr;  // such a list's first node; null: by_name_
  size_t linear_size_ = 0;
  base::FlatHashMap<absl::string_view, int32_t> by_name_;
  std::vector<uint32_t> offsets_;  // node i's inputs: [offsets_[i], offsets_[i + 1])
  std::vector<ResolvedInput> inputs_;
};

}  // namespace tdf

#endif  // TDF_GRAPH_NODE_INDEX_H_
