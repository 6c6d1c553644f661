// File: graph/op_schema_cache.h (internal)
//
// Op schemas by name for one pass over a graph. OpRegistry::Find takes the
// registry's lock, and Debian's Abseil (built without NDEBUG) runs its
// deadlock detection on every absl::Mutex::Lock: looked up per node, the
// lock cost more than the node's other checks in Session::Create. A graph
// has few distinct ops, so each is looked up in the registry once.
#ifndef TDF_GRAPH_OP_SCHEMA_CACHE_H_
#define TDF_GRAPH_OP_SCHEMA_CACHE_H_

#include "absl/strings/string_view.h"
#include "base/hash_tables.h"
#include "tdf/op_registry.h"

namespace tdf {

class OpSchemaCache {
 public:
  // The schema of `op`, or null if unknown. `op` must outlive the cache
  // (it is kept as a view: a NodeDef's op, for a pass over its graph).
  const OpSchema* Find(absl::string_view op) {
    if (op == last_op_ && last_ != nullptr) return last_;
    auto it = schemas_.find(op);
    const OpSchema* schema = nullptr;
    if (it != schemas_.end()) {
      schema = it->second;
    } else {
      schema = OpRegistry::Global()->Find(op);
      if (schema == nullptr) return nullptr;
      schemas_.emplace(op, schema);
    }
    last_op_ = op;
    last_ = schema;
    return schema;
  }

 private:
  base::FlatHashMap<absl::string_view, const OpSchema*> schemas_;
  absl::string_view last_op_;
  const OpSchema* last_ = nullptr;
};

}  // namespace tdf

#endif  // TDF_GRAPH_OP_SCHEMA_CACHE_H_
