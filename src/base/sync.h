#ifndef TDF_SRC_BASE_SYNC_H_
#define TDF_SRC_BASE_SYNC_H_

// ThreadSanitizer only sees synchronization in code it instrumented. The
// Debian builds of Abseil and oneTBB are not instrumented, so under TSan an
// absl::Mutex or a oneTBB task hand-off orders nothing and every access
// behind one reads as a race. These annotations tell TSan the ordering those
// libraries really provide; outside TSan builds they compile to nothing.

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#if defined(__SANITIZE_THREAD__)
#define TDF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TDF_TSAN 1
#endif
#endif

#ifdef TDF_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define TDF_TSAN_ACQUIRE(addr) __tsan_acquire(const_cast<void*>(static_cast<const volatile void*>(addr)))
#define TDF_TSAN_RELEASE(addr) __tsan_release(const_cast<void*>(static_cast<const volatile void*>(addr)))
#else
#define TDF_TSAN_ACQUIRE(addr) ((void)0)
#define TDF_TSAN_RELEASE(addr) ((void)0)
#endif

namespace tdf {
namespace base {

// absl::MutexLock, plus the happens-before edges TSan cannot see inside an
// uninstrumented absl::Mutex.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
    TDF_TSAN_ACQUIRE(mu_);
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    TDF_TSAN_RELEASE(mu_);
    mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

}  // namespace base
}  // namespace tdf

#endif  // TDF_SRC_BASE_SYNC_H_
