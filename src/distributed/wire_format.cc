#include "distributed/wire_format.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tdf {
namespace distributed {
namespace {

constexpr uint8_t kVersion = 1;
constexpr uint8_t kDead = 1;
constexpr uint8_t kControl = 2;
constexpr uint8_t kHasValue = 4;

void PutVarint(uint64_t v, std::vector<char>* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

class Reader {
 public:
  Reader(const char* data, size_t size) : p_(reinterpret_cast<const uint8_t*>(data)), end_(p_ + size) {}

  size_t left() const { return static_cast<size_t>(end_ - p_); }

  absl::Status Byte(uint8_t* v, const char* what) {
    if (p_ == end_) return Truncated(what);
    *v = *p_++;
    return absl::OkStatus();
  }

  // A varint that must fit in int64 (keys, labels, dims, lengths).
  absl::Status Varint(int64_t* v, const char* what) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return Truncated(what);
      const uint8_t b = *p_++;
      result |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        if (result > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          return absl::InvalidArgumentError(absl::StrCat(what, " does not fit in int64"));
        *v = static_cast<int64_t>(result);
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(what, ": varint longer than 10 bytes"));
  }

  const uint8_t* position() const { return p_; }

 private:
  static absl::Status Truncated(const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("message ends inside ", what));
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace

absl::Status EncodeToken(const WireToken& token, std::vector<char>* out) {
  out->clear();
  if (token.key < 0) return absl::InvalidArgumentError(absl::StrCat("token key must be >= 0, is ", token.key));
  const bool has_value = !token.dead && !token.control;
  if (has_value) {
    if (!token.value.valid()) return absl::InvalidArgumentError("a live data token needs a valid value");
    if (!token.value.device().is_cpu())
      return absl::InvalidArgumentError(absl::StrCat("the value is on ", token.value.device().ToString(),
                                                     ": only host values cross ranks (copy it to the host first)"));
  } else if (token.value.valid()) {
    return absl::InvalidArgumentError(token.dead ? "a dead token carries no value" : "a control token carries no value");
  }
  out->reserve(16 + token.tag.size() + (has_value ? token.value.bytes() + 8 * token.value.rank() : 0));
  out->push_back(static_cast<char>(kVersion));
  out->push_back(static_cast<char>((token.dead ? kDead : 0) | (token.control ? kControl : 0) |
                                   (has_value ? kHasValue : 0)));
  PutVarint(static_cast<uint64_t>(token.key), out);
  PutVarint(token.tag.size(), out);
  for (size_t i = 0; i < token.tag.size(); ++i) {
    if (token.tag[i] < 0)
      return absl::InvalidArgumentError(absl::StrCat("tag label ", i, " must be >= 0, is ", token.tag[i]));
    PutVarint(static_cast<uint64_t>(token.tag[i]), out);
  }
  if (has_value) {
    const Tensor& v = token.value;
    out->push_back(static_cast<char>(v.dtype()));
    PutVarint(static_cast<uint64_t>(v.rank()), out);
    for (int64_t d : v.shape().dims()) PutVarint(static_cast<uint64_t>(d), out);
    const char* bytes = static_cast<const char*>(v.raw_data());
    out->insert(out->end(), bytes, bytes + v.bytes());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<char>> EncodeToken(const WireToken& token) {
  std::vector<char> out;
  absl::Status s = EncodeToken(token, &out);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<WireToken> DecodeToken(const char* data, size_t size) {
  Reader in(data, size);
  WireToken token;
  uint8_t version = 0, flags = 0;
  absl::Status s = in.Byte(&version, "the version");
  if (!s.ok()) return s;
  if (version != kVersion)
    return absl::InvalidArgumentError(absl::StrCat("wire format version ", version, ", expected ", kVersion));
  if (!(s = in.Byte(&flags, "the flags")).ok()) return s;
  if ((flags & ~(kDead | kControl | kHasValue)) != 0)
    return absl::InvalidArgumentError(absl::StrCat("unknown flags 0x", absl::Hex(flags)));
  token.dead = (flags & kDead) != 0;
  token.control = (flags & kControl) != 0;
  const bool has_value = (flags & kHasValue) != 0;
  if (has_value != (!token.dead && !token.control))
    return absl::InvalidArgumentError("flags: a token has a value exactly when it is live data");
  if (!(s = in.Varint(&token.key, "the key")).ok()) return s;
  int64_t depth = 0;
  if (!(s = in.Varint(&depth, "the tag length")).ok()) return s;
  // Every label takes at least one byte: no allocation beyond the message.
  if (static_cast<uint64_t>(depth) > in.left())
    return absl::InvalidArgumentError(
        absl::StrCat("tag length ", depth, " is longer than the ", in.left(), " bytes left in the message"));
  token.tag.resize(static_cast<size_t>(depth));
  for (int64_t i = 0; i < depth; ++i)
    if (!(s = in.Varint(&token.tag[i], "a tag label")).ok()) return s;
  if (!has_value) {
    if (in.left() != 0) return absl::InvalidArgumentError(absl::StrCat(in.left(), " bytes after a token without value"));
    return token;
  }
  uint8_t dtype_byte = 0;
  int64_t rank = 0;
  if (!(s = in.Byte(&dtype_byte, "the dtype")).ok()) return s;
  const DType dtype = static_cast<DType>(dtype_byte);
  if (DTypeSize(dtype) == 0) return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", dtype_byte));
  if (!(s = in.Varint(&rank, "the rank")).ok()) return s;
  if (static_cast<uint64_t>(rank) > in.left())
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is more than the bytes left in the message"));
  absl::InlinedVector<int64_t, 4> dims(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i)
    if (!(s = in.Varint(&dims[i], "a dimension")).ok()) return s;
  const Shape shape{absl::MakeConstSpan(dims)};
  if (!(s = shape.Validate()).ok()) return s;
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;  // no overflow: Validate checked it
  const size_t element_size = DTypeSize(dtype);
  if (static_cast<uint64_t>(elements) > in.left() / element_size ||
      static_cast<uint64_t>(elements) * element_size != in.left())
    return absl::InvalidArgumentError(absl::StrCat(DTypeName(dtype), shape.DebugString(), " needs ",
                                                   static_cast<uint64_t>(elements) * element_size,
                                                   " bytes of data; the message has ", in.left()));
  if (dtype == DType::kBool) {
    for (const uint8_t* b = in.position(); b != in.position() + in.left(); ++b)
      if (*b > 1) return absl::InvalidArgumentError(absl::StrCat("bool element holds ", *b, ", not 0 or 1"));
  }
  absl::StatusOr<Tensor> value = Tensor::Empty(dtype, shape);
  if (!value.ok()) return value.status();
  if (in.left() > 0) std::memcpy(value->raw_mutable_data(), in.position(), in.left());
  token.value = *std::move(value);
  return token;
}

}  // namespace distributed
}  // namespace tdf
