/// \file
/// tdf::Tensor: dtype x shape x refcounted buffer on a device.
///
/// The executor moves billions of scalar tokens, so a Tensor is 16 bytes and a
/// CPU scalar lives inline in it: creating, copying and destroying a scalar
/// never touches the heap or an atomic. Everything else (rank >= 1, or any
/// tensor on a GPU) points at a refcounted Rep that owns its shape and shares a
/// refcounted Buffer (so Reshape is O(1) and copies share storage).
///
/// \code
///   tdf::Tensor a = tdf::Tensor::Scalar<int64_t>(30);
///   absl::StatusOr<tdf::Tensor> m = tdf::Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
///   float x = m->data<float>()[3];
/// \endcode
#ifndef TDF_TENSOR_H_
#define TDF_TENSOR_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tdf {

/// The element types of tensors (TensorFlow's DT_* of the same names).
enum class DType : uint8_t {
  kInvalid = 0,
  kBool = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat32 = 4,
  kFloat64 = 5,
};

/// "bool", "int32", "int64", "float32", "float64" ("invalid" otherwise).
absl::string_view DTypeName(DType dtype);
/// The inverse of DTypeName; INVALID_ARGUMENT for any other name.
absl::StatusOr<DType> DTypeFromName(absl::string_view name);
/// Size of one element in bytes (0 for kInvalid).
size_t DTypeSize(DType dtype);
/// float32 or float64.
bool IsFloating(DType dtype);
/// int32 or int64.
bool IsInteger(DType dtype);

/// The DType of a C++ element type: DTypeOf<double>::value is kFloat64.
template <typename T>
struct DTypeOf;
/// \cond SPECIALIZATIONS
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
/// \endcond

/// Calls fn(T{}) with the C++ type of `dtype`; returns false for kInvalid.
template <typename Fn>
bool DispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBool: fn(bool{}); return true;
    case DType::kInt32: fn(int32_t{}); return true;
    case DType::kInt64: fn(int64_t{}); return true;
    case DType::kFloat32: fn(float{}); return true;
    case DType::kFloat64: fn(double{}); return true;
    default: return false;
  }
}

/// A tensor's dimensions; rank 0 is a scalar.
class Shape {
 public:
  Shape() = default;  ///< a scalar
  /// Shape({2, 3}): two rows of three.
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  /// From a list of dimensions.
  explicit Shape(absl::Span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {}

  /// \name Dimensions
  /// The rank, one dimension, all of them, their product; changing one.
  /// @{

  /// The number of dimensions.
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  int64_t num_elements() const;
  bool is_scalar() const { return dims_.empty(); }
  void AddDim(int64_t d) { dims_.push_back(d); }
  void set_dim(int i, int64_t d) { dims_[i] = d; }
  /// @}
  /// Checks that every dim is >= 0 and the element count fits in int64.
  absl::Status Validate() const;
  std::string DebugString() const;  ///< "[2,3]"; "[]" for a scalar

  /// Same dimensions.
  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }
  /// Different dimensions.
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  absl::InlinedVector<int64_t, 4> dims_;
};

/// Where a tensor's data lives and a kernel runs: the CPU or a CUDA device.
struct Device {
  /// The kind of device.
  enum class Type : uint8_t { kCpu = 0, kCuda = 1 };
  Type type = Type::kCpu;  ///< the kind
  int index = 0;           ///< which CUDA device (0 for the CPU)

  /// The CPU.
  static Device Cpu() { return Device{}; }
  /// CUDA device `index`.
  static Device Cuda(int index) { return Device{Type::kCuda, index}; }
  /// Whether this is the CPU.
  bool is_cpu() const { return type == Type::kCpu; }
  std::string ToString() const;  ///< "cpu", "cuda:0"
  static absl::StatusOr<Device> Parse(absl::string_view name);  ///< "" means cpu
  /// The same device.
  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
  /// Different devices.
  friend bool operator!=(Device a, Device b) { return !(a == b); }
};

/// A node's device string in full: the rank (process) of a distributed run
/// that runs the node, and the device on that rank (design.md §8). Accepted:
///
/// \code
///   ""  "cpu"  "cuda:1"                       no rank: any rank may run it
///   "rank:2"  "rank:2/cpu"  "rank:2/cuda:0"   rank 2 (its own cuda:0)
///   "/job:worker/task:2/device:GPU:0"         TensorFlow's names: task R of
///   "/job:localhost/replica:0/task:0/cpu:0"   job "worker" is rank R; the
///                                             local job is rank 0
/// \endcode
///
/// In one process (a Session) the rank is ignored: every rank is this
/// process, so a graph placed for N ranks runs unchanged, which is how
/// distributed answers are checked against one-process runs. Device::Parse
/// accepts all of these and returns the device part.
struct DeviceName {
  static constexpr int kAnyRank = -1;  ///< no rank named: any rank may run the node
  int rank = kAnyRank;                 ///< the rank, or kAnyRank
  Device device;            ///< cpu when not named
  bool has_device = false;  ///< the string named a device (not just a rank)

  /// Errors (InvalidArgument) name the string and what is wrong with it.
  static absl::StatusOr<DeviceName> Parse(absl::string_view name);
  /// The canonical form: "cpu", "cuda:0", "rank:2", "rank:2/cuda:0"; "" for
  /// no rank and no device.
  std::string ToString() const;
  /// Same rank and device.
  friend bool operator==(const DeviceName& a, const DeviceName& b) {
    return a.rank == b.rank && a.device == b.device && a.has_device == b.has_device;
  }
};

/// Raw storage. Allocated by the device's allocator; freed when the last
/// Rep referencing it goes away.
class Buffer {
 public:
  /// Frees wrapped data.
  using Deleter = void (*)(void* data, size_t bytes, Device device);
  static Buffer* Allocate(size_t bytes, Device device);  ///< CPU: 64-byte aligned
  /// Takes ownership of `data`; `deleter` frees it.
  static Buffer* Wrap(void* data, size_t bytes, Device device, Deleter deleter);
  /// `bytes` of `parent`'s storage from `offset` on, without a copy: the
  /// view holds a reference to the parent (to the parent's own parent when
  /// that is a view too, so views never nest). Batching hands the rows of one
  /// batched kernel output to its instances this way.
  static Buffer* View(Buffer* parent, size_t offset, size_t bytes);

  void* data() const { return data_; }        ///< the storage (a device pointer on a GPU)
  size_t bytes() const { return bytes_; }     ///< its size
  Device device() const { return device_; }   ///< where it lives
  /// The buffer a View shares storage with; null for one that owns its own.
  Buffer* parent() const { return parent_; }
  /// Adds a reference.
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  /// Drops a reference; the last one frees the buffer.
  void Unref();
  /// True when one Rep alone references this buffer. Acquire: whatever
  /// earlier holders did with the data happened before their Unref.
  bool RefCountIsOne() const { return refs_.load(std::memory_order_acquire) == 1; }

  /// From the allocator tensor data comes from (tensor.cc), not the global heap.
  static void* operator new(size_t bytes);
  /// Back to that allocator.
  static void operator delete(void* p);

 private:
  friend class Tensor;  ///< Tensor::Empty puts a small tensor's Rep in the buffer's block
  Buffer(void* data, size_t bytes, Device device, Deleter deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(deleter) {}
  std::atomic<int32_t> refs_{1};
  /// A small CPU buffer whose data follows it in one block: 1 (Allocate),
  /// 2 when a tensor's Rep comes first in the block (Tensor::Empty). The
  /// last Unref frees the block: one allocation instead of two or three.
  uint8_t in_block_ = 0;
  void* data_;
  size_t bytes_;
  Device device_;
  Deleter deleter_;
  Buffer* parent_ = nullptr;  ///< a View's owned reference; its deleter_ is null
};

namespace runtime {
struct Token;
}  // namespace runtime

/// A dtype, a shape and reference-counted storage on a device. CPU scalars
/// are held inline (16 bytes, no allocation); copies share the storage.
class Tensor {
 public:
  /// An invalid tensor (dtype kInvalid); the state of empty token slots.
  Tensor() { std::memset(static_cast<void*>(this), 0, sizeof(Tensor)); }
  /// \name Copy and move
  /// Copies share the storage (one more reference); moves take it.
  /// @{

  /// A copy sharing `other`'s storage.
  Tensor(const Tensor& other) { CopyFrom(other); }
  Tensor(Tensor&& other) noexcept {
    std::memcpy(static_cast<void*>(this), &other, sizeof(Tensor));
    other.StoreWords(0, 0);
  }
  Tensor& operator=(const Tensor& other) {
    if (this != &other) {
      Release();
      CopyFrom(other);
    }
    return *this;
  }
  Tensor& operator=(Tensor&& other) noexcept {
    if (this != &other) {
      Release();
      std::memcpy(static_cast<void*>(this), &other, sizeof(Tensor));
      other.StoreWords(0, 0);
    }
    return *this;
  }
  /// @}
  ~Tensor() { Release(); }

  /// A scalar of T's dtype, held inline.
  template <typename T>
  static Tensor Scalar(T value) {
    static_assert(std::is_arithmetic_v<T>, "scalar type");
    uint64_t payload = 0;
    std::memcpy(&payload, &value, sizeof(T));
    Tensor t;
    t.StoreWords(static_cast<uint64_t>(DTypeOf<T>::value), payload);  // heap_ = 0
    return t;
  }
  /// A zero-filled tensor. Errors on a negative dim or kInvalid.
  static absl::StatusOr<Tensor> Zeros(DType dtype, const Shape& shape,
                                      Device device = Device::Cpu());
  /// Uninitialized contents (for kernels that overwrite every element).
  static absl::StatusOr<Tensor> Empty(DType dtype, const Shape& shape,
                                      Device device = Device::Cpu());
  /// A CPU tensor of `shape` holding `values` (row-major); INVALID_ARGUMENT
  /// when their count is not the shape's.
  template <typename T>
  static absl::StatusOr<Tensor> FromVector(const std::vector<T>& values, const Shape& shape);
  /// A CPU vector holding `values`.
  template <typename T>
  static Tensor Vector(const std::vector<T>& values) {
    return *FromVector<T>(values, Shape({static_cast<int64_t>(values.size())}));
  }
  /// A tensor over an existing buffer (takes one reference to `buffer`).
  static Tensor FromBuffer(DType dtype, const Shape& shape, Buffer* buffer);

  /// \name Type, shape and place
  /// @{
  /// Whether it has a dtype (a default-constructed tensor has none).
  bool valid() const { return dtype_ != DType::kInvalid; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return heap_ ? u_.rep->shape : ScalarShape(); }
  int rank() const { return heap_ ? u_.rep->shape.rank() : 0; }
  int64_t num_elements() const { return heap_ ? u_.rep->num_elements : (valid() ? 1 : 0); }
  bool is_scalar() const { return rank() == 0; }
  /// True for inline CPU scalars: the executor's fast path.
  bool is_inline_scalar() const { return !heap_; }
  Device device() const { return heap_ ? u_.rep->buffer->device() : Device::Cpu(); }
  Buffer* buffer() const { return heap_ ? u_.rep->buffer : nullptr; }
  size_t bytes() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype_); }
  /// @}

  /// Precondition: dtype() == DTypeOf<T> and the tensor is a CPU scalar (or
  /// has one element on the CPU). Use ScalarValue for a checked read.
  template <typename T>
  T scalar() const {
    if (heap_) return *static_cast<const T*>(u_.rep->buffer->data());
    T value;
    std::memcpy(&value, &u_, sizeof(T));
    return value;
  }
  /// The value of a one-element CPU tensor of T's dtype; INVALID_ARGUMENT
  /// otherwise.
  template <typename T>
  absl::StatusOr<T> ScalarValue() const;

  /// Element data (CPU tensors; for device tensors a device pointer).
  /// Precondition: dtype() == DTypeOf<T>.
  template <typename T>
  const T* data() const {
    return heap_ ? static_cast<const T*>(u_.rep->buffer->data()) : reinterpret_cast<const T*>(&u_);
  }
  /// Writable element data; see RefCountIsOne before writing to a shared tensor.
  template <typename T>
  T* mutable_data() {
    return heap_ ? static_cast<T*>(u_.rep->buffer->data()) : reinterpret_cast<T*>(&u_);
  }
  /// The data, untyped.
  const void* raw_data() const { return heap_ ? u_.rep->buffer->data() : static_cast<const void*>(&u_); }
  /// The data, untyped and writable.
  void* raw_mutable_data() { return heap_ ? u_.rep->buffer->data() : static_cast<void*>(&u_); }

  /// True when no other Tensor shares this one's storage (its Rep and buffer
  /// are referenced once; always true for an inline scalar), so writing
  /// through mutable_data() cannot be observed elsewhere. Only meaningful
  /// while nothing can take a new copy concurrently (e.g. under the lock of
  /// the variable that holds it): copies only ever raise the count.
  bool RefCountIsOne() const {
    return !heap_ || (u_.rep->refs.load(std::memory_order_acquire) == 1 && u_.rep->buffer->RefCountIsOne());
  }

  /// Shares the buffer. Errors if the element counts differ.
  absl::StatusOr<Tensor> Reshape(const Shape& shape) const;
  /// A deep copy on the same (CPU) device.
  Tensor Clone() const;
  /// Errors unless dtype() == want, naming `what`.
  absl::Status CheckDType(DType want, absl::string_view what) const;

  /// Same dtype, shape and element values (NaN != NaN). CPU tensors only.
  bool Equals(const Tensor& other) const;
  /// "int64[] 30", "float32[2,2] [1, 2, 3, 4]" (first 16 elements).
  std::string DebugString() const;

 private:
  friend struct runtime::Token;  ///< keeps a token's deadness in reserved_[0]
  struct Rep {
    static void* operator new(size_t bytes);  ///< as Buffer's
    static void operator delete(void* p);
    std::atomic<int32_t> refs{1};
    /// In one block with its Buffer and data (Empty): the buffer's last
    /// Unref frees it, not `delete`.
    bool in_block = false;
    Shape shape;
    int64_t num_elements = 0;
    Buffer* buffer = nullptr;  ///< owned reference
  };
  template <typename T>
  void SetScalar(T value) {
    std::memcpy(&u_, &value, sizeof(T));
  }
  /// Writes the whole tensor in one 16-byte store: the header word (dtype_,
  /// heap_, reserved_; little-endian) and the payload. Tokens are copied
  /// with 16-byte loads, and a load that spans several narrower stores
  /// cannot be forwarded from them: a scalar built field by field stalled
  /// every firing that copied it on (a third of a scalar op's time).
  void StoreWords(uint64_t header, uint64_t payload) {
    typedef uint64_t Words __attribute__((vector_size(16)));
    const Words words = {header, payload};
    std::memcpy(static_cast<void*>(this), &words, sizeof(Tensor));
  }
  void CopyFrom(const Tensor& other) {
    std::memcpy(static_cast<void*>(this), &other, sizeof(Tensor));
    if (heap_) u_.rep->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void Release() {
    if (heap_) ReleaseRep();
  }
  void ReleaseRep();
  /// The shape of every inline scalar (out of line: built on first use).
  static const Shape& ScalarShape();
  static Tensor MakeHeap(DType dtype, const Shape& shape, Buffer* buffer);
  /// A small CPU tensor's Rep, Buffer and data in one block; null when out
  /// of memory.
  static Rep* MakeInBlock(const Shape& shape, size_t bytes);

  DType dtype_;
  uint8_t heap_;  ///< 1: rep_ is valid; 0: inline scalar in u_
  uint8_t reserved_[6];
  /// Inline scalar payload, or the Rep when heap_ is set.
  union Payload {
    int64_t i64;
    double f64;
    Rep* rep;
  } u_;
};

static_assert(sizeof(Tensor) == 16, "Tensor must stay 16 bytes");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Tensor::StoreWords writes the header little-endian");

}  // namespace tdf

#endif  // TDF_TENSOR_H_
