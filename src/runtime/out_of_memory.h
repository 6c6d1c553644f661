// Allocation failure as a status (issue #26, item 4): no input may end the
// process. The executor, Session::Create and Session::Run catch
// std::bad_alloc and report RESOURCE_EXHAUSTED, naming what ran out where
// they know it (a node, its op and its tag). Abseil's hash tables need care
// of their own: base/hash_tables.h.
#ifndef TDF_SRC_RUNTIME_OUT_OF_MEMORY_H_
#define TDF_SRC_RUNTIME_OUT_OF_MEMORY_H_

#include <new>
#include <string>

#include "absl/status/status.h"

namespace tdf {
namespace runtime {

// A block of memory set aside while there is some, freed when an
// allocation fails, so that the message saying what ran out can be made:
// when a run runs out, its frames still hold all there was until the run
// has stopped (a dynamic-mode recursion under an address-space limit lost
// every message without it). Keeping it again after it was freed may fail
// (then the next failure's message may be lost). Thread-safe.
void KeepMemoryReserve() noexcept;
void FreeMemoryReserve() noexcept;

// A status of `code` with the message `make_message()` returns. Making the
// message allocates, so when memory is short it may fail too: then the
// status has the code and no message (which needs no allocation).
template <typename MakeMessage>
absl::Status ErrorWithMessage(absl::StatusCode code, MakeMessage make_message) noexcept {
  try {
    return absl::Status(code, make_message());
  } catch (const std::bad_alloc&) {
    return absl::Status(code, "");
  }
}

// RESOURCE_EXHAUSTED with the message `make_message()` returns, made with
// the reserve's memory.
template <typename MakeMessage>
absl::Status OutOfMemoryError(MakeMessage make_message) noexcept {
  FreeMemoryReserve();
  return ErrorWithMessage(absl::StatusCode::kResourceExhausted, make_message);
}

}  // namespace runtime
}  // namespace tdf

#endif  // TDF_SRC_RUNTIME_OUT_OF_MEMORY_H_
