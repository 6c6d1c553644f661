#include "runtime/out_of_memory.h"

#include <atomic>
#include <cstddef>

namespace tdf {
namespace runtime {

namespace {

// Enough for any message (one names up to 64 labels of a tag), and above
// malloc's mmap threshold: freed, it goes back to the system, so whichever
// thread's malloc arena makes the message can have it.
constexpr size_t kReserveBytes = size_t{1} << 20;
std::atomic<char*> reserve{nullptr};

}  // namespace

void KeepMemoryReserve() noexcept {
  if (reserve.load(std::memory_order_acquire) != nullptr) return;
  char* block = new (std::nothrow) char[kReserveBytes];  // untouched: address space, not memory
  char* expected = nullptr;
  if (block != nullptr && !reserve.compare_exchange_strong(expected, block, std::memory_order_acq_rel)) delete[] block;
}

void FreeMemoryReserve() noexcept { delete[] reserve.exchange(nullptr, std::memory_order_acq_rel); }

}  // namespace runtime
}  // namespace tdf
