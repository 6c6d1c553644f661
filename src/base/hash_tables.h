// Abseil's hash tables and running out of memory (issue #26, item 4).
//
// The Debian Abseil (20220623) does not survive a failed allocation as a
// table grows: raw_hash_set::resize sets the new capacity before it
// allocates, so a table whose growth threw std::bad_alloc is inconsistent,
// and destroying it frees what it never allocated. A table sized in its
// constructor is safe (a constructor that throws destroys nothing) and
// does not grow while it holds no more than it was sized for. So a run
// grows none (its tables are made with BucketsFor, or made at
// Session::Create); Session::Create grows many, and out of memory in one
// of those it may still end the process.
#ifndef TDF_SRC_BASE_HASH_TABLES_H_
#define TDF_SRC_BASE_HASH_TABLES_H_

#include <cstddef>

namespace tdf {
namespace base {

// A bucket count for an Abseil table's constructor that holds `n` entries
// without growing (a table grows past 7/8 of its capacity).
inline size_t BucketsFor(size_t n) { return n + n / 7 + 1; }

}  // namespace base
}  // namespace tdf

#endif  // TDF_SRC_BASE_HASH_TABLES_H_
