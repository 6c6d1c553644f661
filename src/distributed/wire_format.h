// File: distributed/wire_format.h (internal)
//
// A token as it crosses ranks (docs/distributed.md "On the wire"): the key
// of its Send/Recv pair (tdf/partition.h), its tag as the path of labels
// from the root frame, its deadness and, for a live data token, its value.
// One token is one MPI message:
//
//   byte     version (1)
//   byte     flags: 1 dead, 2 control (no value), 4 a value follows
//   varint   key
//   varint   tag length n, then n varint labels (root first)
//   [value]  byte dtype, varint rank, rank varint dims, then the elements'
//            bytes (little-endian, as in memory) to the end of the message
//
// Varints are unsigned LEB128: a label or key below 128 takes one byte, so
// a tag path costs about one byte per frame of depth.
//
//   std::vector<char> bytes = EncodeToken(token).value();
//   absl::StatusOr<WireToken> back = DecodeToken(bytes.data(), bytes.size());
//
// Decoding never trusts the message: a malformed one is an InvalidArgument
// that says what is wrong, never a crash or an oversized allocation.
#ifndef TDF_SRC_DISTRIBUTED_WIRE_FORMAT_H_
#define TDF_SRC_DISTRIBUTED_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "tdf/tensor.h"

namespace tdf {
namespace distributed {

// Labels from the root frame to the token's frame; each >= 0. The executor's
// encoding of frames into labels is described in docs/distributed.md.
using WireTag = absl::InlinedVector<int64_t, 8>;

struct WireToken {
  int64_t key = 0;       // the Send/Recv pair; >= 0
  WireTag tag;
  bool dead = false;
  bool control = false;  // a control edge's token: "go" (or dead), no value
  Tensor value;          // live data tokens only: a valid CPU tensor
};

// Checks the token (key and labels >= 0; a live data token has a valid CPU
// value; dead and control tokens have none) and encodes it.
absl::StatusOr<std::vector<char>> EncodeToken(const WireToken& token);
// The same into `out` (cleared first), for reused buffers. A vector, not a
// string: moving it keeps its bytes where MPI reads them.
absl::Status EncodeToken(const WireToken& token, std::vector<char>* out);
absl::StatusOr<WireToken> DecodeToken(const char* data, size_t size);

}  // namespace distributed
}  // namespace tdf

#endif  // TDF_SRC_DISTRIBUTED_WIRE_FORMAT_H_
