#include "graph/node_index.h"

#include <string.h>

#include "absl/strings/numbers.h"
#include "base/hash_tables.h"
#include "absl/strings/str_cat.h"

namespace tdf {

absl::StatusOr<InputView> ParseInputView(absl::string_view text) {
  InputView ref;
  absl::string_view s = text;
  if (!s.empty() && s[0] == '^') {
    ref.is_control = true;
    s.remove_prefix(1);
  }
  if (!ref.is_control) {
    // The last ':' by memrchr, not absl::string_view::rfind (out of line,
    // a byte at a time; every input is parsed several times per
    // Session::Create); a port of plain digits is read here, anything else
    // as SimpleAtoi reads it.
    const void* last = s.empty() ? nullptr : memrchr(s.data(), ':', s.size());
    if (last != nullptr) {
      const size_t colon = static_cast<const char*>(last) - s.data() + 1;  // one past the ':'
      const absl::string_view digits = s.substr(colon);
      int port = 0;
      // Nine digits always fit an int; longer ports go to SimpleAtoi, which
      // checks the range (accumulating them here overflowed: UBSan).
      bool plain = !digits.empty() && digits.size() <= 9;
      for (size_t i = 0; plain && i < digits.size(); ++i) {
        const char c = digits[i];
        if (c < '0' || c > '9') {
          plain = false;
        } else {
          port = port * 10 + (c - '0');
        }
      }
      if (!plain && (!absl::SimpleAtoi(digits, &port) || port < 0))
        return absl::InvalidArgumentError(absl::StrCat("malformed input '", text, "': bad port"));
      ref.port = port;
      s = s.substr(0, colon - 1);
    }
  }
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat("malformed input '", text, "': empty node name"));
  ref.node = s;
  return ref;
}

namespace {

// Equal names, the last characters compared before memcmp: a body's names
// often share their length and differ at the end ("cond/Switch_14",
// "cond/Switch_15"), and the linear lists compare each with many others.
inline bool SameName(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && (a.empty() || (a.back() == b.back() && memcmp(a.data(), b.data(), a.size()) == 0));
}

}  // namespace

absl::StatusOr<NodeIndex> NodeIndex::Build(const std::vector<NodeDef>& nodes) {
  NodeIndex index;
  size_t total_inputs = 0;
  if (!nodes.empty() && nodes.size() <= kLinearMax) {
    index.linear_ = nodes.data();
    index.linear_size_ = nodes.size();
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (size_t j = 0; j < i; ++j)
        if (SameName(nodes[j].name, nodes[i].name))
          return NodeError(nodes[i], absl::StatusCode::kInvalidArgument, "duplicate node name");
      total_inputs += nodes[i].input.size();
    }
  } else {
    // Sized in its constructor, not grown: the largest table of a big
    // graph's Session::Create, and safe so out of memory (base/hash_tables.h).
    index.by_name_ = decltype(index.by_name_)(base::BucketsFor(nodes.size()));
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!index.by_name_.emplace(nodes[i].name, static_cast<int32_t>(i)).second)
        return NodeError(nodes[i], absl::StatusCode::kInvalidArgument, "duplicate node name");
      total_inputs += nodes[i].input.size();
    }
  }
  index.offsets_.reserve(nodes.size() + 1);
  index.inputs_.reserve(total_inputs);
  index.offsets_.push_back(0);
  for (const NodeDef& node : nodes) {
    for (const std::string& text : node.input) {
      absl::StatusOr<InputView> ref = ParseInputView(text);
      if (!ref.ok()) return NodeError(node, absl::StatusCode::kInvalidArgument, ref.status().message());
      const int32_t src = index.Find(ref->node);
      if (src < 0)
        return NodeError(node, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("input '", text, "' names an unknown node"));
      index.inputs_.push_back({src, ref->port, ref->is_control});
    }
    index.offsets_.push_back(static_cast<uint32_t>(index.inputs_.size()));
  }
  return index;
}

NodeIndex NodeIndex::FromParts(const std::vector<NodeDef>& nodes,
                               base::FlatHashMap<absl::string_view, int32_t> by_name, std::vector<uint32_t> offsets,
                               std::vector<ResolvedInput> inputs) {
  NodeIndex index;
  if (!nodes.empty() && nodes.size() <= kLinearMax) {
    index.linear_ = nodes.data();
    index.linear_size_ = nodes.size();
  } else {
    index.by_name_ = std::move(by_name);
  }
  index.offsets_ = std::move(offsets);
  index.inputs_ = std::move(inputs);
  return index;
}

int32_t NodeIndex::Find(absl::string_view name) const {
  if (linear_ != nullptr) {
    for (size_t i = 0; i < linear_size_; ++i)
      if (SameName(linear_[i].name, name)) return static_cast<int32_t>(i);
    return -1;
  }
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

}  // namespace tdf
