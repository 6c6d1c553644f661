#include "tdf/tensor.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "base/device_memory.h"
#include "oneapi/tbb/scalable_allocator.h"

namespace tdf {

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    default: return "invalid";
  }
}

absl::StatusOr<DType> DTypeFromName(absl::string_view name) {
  for (DType d : {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64}) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    default: return 0;
  }
}

bool IsFloating(DType d) { return d == DType::kFloat32 || d == DType::kFloat64; }
bool IsInteger(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

absl::Status Shape::Validate() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in shape ", DebugString()));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return absl::InvalidArgumentError(absl::StrCat("shape ", DebugString(), " has too many elements"));
    n *= d;
  }
  return absl::OkStatus();
}

std::string Shape::DebugString() const { return absl::StrCat("[", absl::StrJoin(dims_, ","), "]"); }

std::string Device::ToString() const {
  return type == Type::kCpu ? std::string("cpu") : absl::StrCat("cuda:", index);
}

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TDF_SCALABLE_ALLOC 0  // let the sanitizers see every allocation and free
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TDF_SCALABLE_ALLOC 0
#endif
#endif
#ifndef TDF_SCALABLE_ALLOC
#define TDF_SCALABLE_ALLOC 1
#endif

// CPU buffers, and the small objects every heap tensor has (its Rep and
// Buffer), come from oneTBB's scalable allocator: kernel outputs such as a
// weight gradient (180 KB per TreeRNN node) are allocated and freed once per
// firing, often on different workers. glibc served those from its slow paths
// (consolidation, heap trims and the page faults after them) and handed
// blocks freed by another thread back only through its arena locks;
// tbbmalloc keeps per-thread bins, returns cross-thread frees to their
// owner, and caches large blocks. (TreeRNN training, batch 1, 2 workers:
// +20% over a hand-written per-thread cache in front of glibc.)
void* AllocateAligned(size_t bytes) {
#if TDF_SCALABLE_ALLOC
  return scalable_aligned_malloc(bytes, 64);
#else
  return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
#endif
}

void CpuFree(void* data, size_t, Device) {
#if TDF_SCALABLE_ALLOC
  scalable_aligned_free(data);
#else
  std::free(data);
#endif
}

void* AllocateObject(size_t bytes) {
#if TDF_SCALABLE_ALLOC
  void* p = scalable_malloc(bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
#else
  return ::operator new(bytes);
#endif
}

void FreeObject(void* p) {
#if TDF_SCALABLE_ALLOC
  scalable_free(p);
#else
  ::operator delete(p);
#endif
}

}  // namespace

void* Buffer::operator new(size_t bytes) { return AllocateObject(bytes); }
void Buffer::operator delete(void* p) { FreeObject(p); }
void* Tensor::Rep::operator new(size_t bytes) { return AllocateObject(bytes); }
void Tensor::Rep::operator delete(void* p) { FreeObject(p); }

// Small CPU tensors (a TreeRNN node's [1, 150] states, [4] index rows,
// [1, 5] logits: thousands per run) take their Buffer and data in one block
// from the allocator, not two; past this size the header is noise.
constexpr size_t kBlockHeader = 64;  // keeps the data 64-byte aligned
constexpr size_t kMaxInBlockBytes = 4096;
static_assert(sizeof(Buffer) <= kBlockHeader, "Buffer must fit its block's header");

Buffer* Buffer::Allocate(size_t bytes, Device device) {
  if (device.is_cpu() && bytes <= kMaxInBlockBytes) {
    void* block = AllocateAligned(kBlockHeader + (bytes == 0 ? 64 : bytes));
    if (block == nullptr) return nullptr;
    Buffer* b = ::new (block) Buffer(static_cast<char*>(block) + kBlockHeader, bytes, device, nullptr);
    b->in_block_ = 1;
    return b;
  }
  if (device.is_cpu()) {
    void* p = AllocateAligned(bytes == 0 ? 64 : bytes);
    if (p == nullptr) return nullptr;
    try {
      return new Buffer(p, bytes, device, &CpuFree);
    } catch (const std::bad_alloc&) {  // the data block got the last memory: not leaked
      CpuFree(p, bytes, device);
      return nullptr;
    }
  }
  return device_memory::Allocate(bytes, device);
}

Buffer* Buffer::Wrap(void* data, size_t bytes, Device device, Deleter deleter) {
  return new Buffer(data, bytes, device, deleter);
}

Buffer* Buffer::View(Buffer* parent, size_t offset, size_t bytes) {
  if (parent->parent_ != nullptr) {
    offset += static_cast<size_t>(static_cast<char*>(parent->data_) - static_cast<char*>(parent->parent_->data_));
    parent = parent->parent_;
  }
  Buffer* view = new Buffer(static_cast<char*>(parent->data_) + offset, bytes, parent->device_, nullptr);
  parent->Ref();
  view->parent_ = parent;
  return view;
}

void Buffer::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (in_block_ != 0) {  // no deleter, no parent: the block holds the buffer
      void* block = in_block_ == 2 ? static_cast<void*>(reinterpret_cast<char*>(this) - kBlockHeader) : this;
      this->~Buffer();
      CpuFree(block, 0, Device::Cpu());
      return;
    }
    if (deleter_ != nullptr) deleter_(data_, bytes_, device_);
    if (parent_ != nullptr) parent_->Unref();
    delete this;
  }
}

const Shape& Tensor::ScalarShape() {
  static const Shape* const kScalar = new Shape();
  return *kScalar;
}

void Tensor::ReleaseRep() {
  Rep* rep = u_.rep;
  heap_ = 0;
  if (rep->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Buffer* buffer = rep->buffer;
    if (rep->in_block) {
      rep->~Rep();  // its memory goes with the buffer's block
    } else {
      delete rep;
    }
    buffer->Unref();
  }
}

// [Rep | Buffer | data], each part 64-byte aligned. The Rep holds a reference
// to the Buffer until it dies, so the block, freed by the Buffer's last Unref,
// outlives it; a Buffer shared further (a reshape, a view) keeps the block.
Tensor::Rep* Tensor::MakeInBlock(const Shape& shape, size_t bytes) {
  static_assert(sizeof(Rep) <= kBlockHeader, "Rep must fit its block's header");
  char* block = static_cast<char*>(AllocateAligned(2 * kBlockHeader + (bytes == 0 ? 64 : bytes)));
  if (block == nullptr) return nullptr;
  Buffer* buffer = ::new (block + kBlockHeader) Buffer(block + 2 * kBlockHeader, bytes, Device::Cpu(), nullptr);
  buffer->in_block_ = 2;
  Rep* rep = ::new (block) Rep;
  rep->in_block = true;
  rep->buffer = buffer;
  try {
    rep->shape = shape;  // a long shape allocates
  } catch (const std::bad_alloc&) {
    rep->~Rep();
    buffer->Unref();
    throw;
  }
  rep->num_elements = shape.num_elements();
  return rep;
}

Tensor Tensor::MakeHeap(DType dtype, const Shape& shape, Buffer* buffer) {
  Tensor t;
  t.dtype_ = dtype;
  Rep* rep = nullptr;
  // Out of memory for the header (or a long shape), the buffer is not leaked.
  try {
    rep = new Rep;
    rep->shape = shape;
  } catch (const std::bad_alloc&) {
    delete rep;
    buffer->Unref();
    throw;
  }
  t.heap_ = 1;
  rep->num_elements = shape.num_elements();
  rep->buffer = buffer;
  t.u_.rep = rep;
  return t;
}

Tensor Tensor::FromBuffer(DType dtype, const Shape& shape, Buffer* buffer) {
  buffer->Ref();
  return MakeHeap(dtype, shape, buffer);
}

absl::StatusOr<Tensor> Tensor::Empty(DType dtype, const Shape& shape, Device device) {
  if (dtype == DType::kInvalid) return absl::InvalidArgumentError("cannot create a tensor of dtype invalid");
  absl::Status s = shape.Validate();
  if (!s.ok()) return s;
  if (shape.is_scalar() && device.is_cpu()) {
    Tensor t;
    t.dtype_ = dtype;
    return t;
  }
  // Validate() bounds the element count by int64, not the byte count: an
  // int64 [2^61] would wrap to 0 bytes and be handed out as 2^61 elements.
  const uint64_t elements = static_cast<uint64_t>(shape.num_elements());
  if (elements > std::numeric_limits<size_t>::max() / DTypeSize(dtype))
    return absl::ResourceExhaustedError(absl::StrCat("a ", DTypeName(dtype), " tensor of shape ", shape.DebugString(),
                                                     " needs more than 2^64 bytes"));
  size_t bytes = static_cast<size_t>(elements) * DTypeSize(dtype);
  if (device.is_cpu() && bytes <= kMaxInBlockBytes) {
    Rep* rep = MakeInBlock(shape, bytes);
    if (rep == nullptr)
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes on ", device.ToString()));
    Tensor t;
    t.dtype_ = dtype;
    t.heap_ = 1;
    t.u_.rep = rep;
    return t;
  }
  Buffer* buffer = Buffer::Allocate(bytes, device);
  if (buffer == nullptr)
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes on ", device.ToString()));
  return MakeHeap(dtype, shape, buffer);
}

absl::StatusOr<Tensor> Tensor::Zeros(DType dtype, const Shape& shape, Device device) {
  absl::StatusOr<Tensor> t = Empty(dtype, shape, device);
  if (!t.ok()) return t;
  if (device.is_cpu()) {
    std::memset(t->raw_mutable_data(), 0, t->bytes() == 0 ? 0 : t->bytes());
  } else {
    absl::Status s = device_memory::Memset(t->raw_mutable_data(), 0, t->bytes(), device);
    if (!s.ok()) return s;
  }
  return t;
}

template <typename T>
absl::StatusOr<Tensor> Tensor::FromVector(const std::vector<T>& values, const Shape& shape) {
  absl::Status s = shape.Validate();
  if (!s.ok()) return s;
  if (shape.num_elements() != static_cast<int64_t>(values.size()))
    return absl::InvalidArgumentError(absl::StrCat("FromVector: ", values.size(),
                                                   " values do not fill shape ", shape.DebugString()));
  absl::StatusOr<Tensor> t = Empty(DTypeOf<T>::value, shape);
  if (!t.ok()) return t;
  T* out = t->template mutable_data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

template absl::StatusOr<Tensor> Tensor::FromVector<bool>(const std::vector<bool>&, const Shape&);
template absl::StatusOr<Tensor> Tensor::FromVector<int32_t>(const std::vector<int32_t>&, const Shape&);
template absl::StatusOr<Tensor> Tensor::FromVector<int64_t>(const std::vector<int64_t>&, const Shape&);
template absl::StatusOr<Tensor> Tensor::FromVector<float>(const std::vector<float>&, const Shape&);
template absl::StatusOr<Tensor> Tensor::FromVector<double>(const std::vector<double>&, const Shape&);

template <typename T>
absl::StatusOr<T> Tensor::ScalarValue() const {
  if (dtype_ != DTypeOf<T>::value)
    return absl::InvalidArgumentError(
        absl::StrCat("expected a ", DTypeName(DTypeOf<T>::value), " scalar, got ", DTypeName(dtype_)));
  if (num_elements() != 1)
    return absl::InvalidArgumentError(absl::StrCat("expected a scalar, got shape ", shape().DebugString()));
  if (!device().is_cpu())
    return absl::FailedPreconditionError("ScalarValue of a device tensor: copy it to the CPU first");
  return scalar<T>();
}
template absl::StatusOr<bool> Tensor::ScalarValue<bool>() const;
template absl::StatusOr<int32_t> Tensor::ScalarValue<int32_t>() const;
template absl::StatusOr<int64_t> Tensor::ScalarValue<int64_t>() const;
template absl::StatusOr<float> Tensor::ScalarValue<float>() const;
template absl::StatusOr<double> Tensor::ScalarValue<double>() const;

absl::StatusOr<Tensor> Tensor::Reshape(const Shape& shape) const {
  absl::Status s = shape.Validate();
  if (!s.ok()) return s;
  if (shape.num_elements() != num_elements())
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", this->shape().DebugString(), " (",
                                                   num_elements(), " elements) to ", shape.DebugString()));
  if (!heap_) {
    if (shape.is_scalar()) return *this;
    absl::StatusOr<Tensor> t = Empty(dtype_, shape);
    if (!t.ok()) return t;
    std::memcpy(t->raw_mutable_data(), &u_, DTypeSize(dtype_));
    return t;
  }
  if (shape.is_scalar() && device().is_cpu()) {
    Tensor t;
    t.dtype_ = dtype_;
    std::memcpy(&t.u_, raw_data(), DTypeSize(dtype_));
    return t;
  }
  return FromBuffer(dtype_, shape, u_.rep->buffer);
}

Tensor Tensor::Clone() const {
  if (!heap_) return *this;
  absl::StatusOr<Tensor> t = Empty(dtype_, shape(), device());
  if (!t.ok()) return Tensor();
  if (device().is_cpu()) {
    std::memcpy(t->raw_mutable_data(), raw_data(), bytes());
  } else {
    (void)device_memory::CopyDeviceToDevice(t->raw_mutable_data(), raw_data(), bytes(), device());
  }
  return *std::move(t);
}

absl::Status Tensor::CheckDType(DType want, absl::string_view what) const {
  if (dtype_ == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": expected dtype ", DTypeName(want), ", got ", DTypeName(dtype_)));
}

bool Tensor::Equals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape() != other.shape()) return false;
  if (!device().is_cpu() || !other.device().is_cpu()) return false;
  bool equal = true;
  DispatchDType(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T* a = data<T>();
    const T* b = other.data<T>();
    for (int64_t i = 0, n = num_elements(); i < n; ++i) {
      if (!(a[i] == b[i])) {
        equal = false;
        return;
      }
    }
  });
  return equal;
}

std::string Tensor::DebugString() const {
  if (!valid()) return "<invalid>";
  std::string out = absl::StrCat(DTypeName(dtype_), shape().DebugString());
  if (!device().is_cpu()) return absl::StrCat(out, " on ", device().ToString());
  const int64_t n = num_elements();
  std::vector<std::string> parts;
  DispatchDType(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T* d = data<T>();
    for (int64_t i = 0; i < n && i < 16; ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        parts.push_back(d[i] ? "true" : "false");
      } else {
        parts.push_back(absl::StrCat(d[i]));
      }
    }
  });
  if (n > 16) parts.push_back("...");
  if (is_scalar()) return absl::StrCat(out, " ", parts.empty() ? "" : parts[0]);
  return absl::StrCat(out, " [", absl::StrJoin(parts, ", "), "]");
}

}  // namespace tdf
