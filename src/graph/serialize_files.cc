// Graphs and named tensors in files (tdf/serialize.h): LoadGraph /
// SaveGraph, LoadTensors / SaveTensors. The form (binary or text) follows
// the file's extension, or is sniffed; files are read with a size limit and
// written atomically (a temporary file renamed over the old one).
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/serialize_text.h"
#include "tdf/serialize.h"
#include "tdf/status.h"

namespace tdf {
namespace {

bool IsTextPath(const std::string& path) {
  return absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txt") || absl::EndsWith(path, ".pbtext");
}

bool LooksLikeText(absl::string_view data) {
  for (char c : data) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return true;
}


// A file that would not open: the code errno gives (a missing directory is
// NOT_FOUND, a read-only one PERMISSION_DENIED), `fallback` without one.
absl::Status OpenError(int error_number, absl::StatusCode fallback, const std::string& message) {
  if (error_number == 0) return absl::Status(fallback, message);
  return absl::ErrnoToStatus(error_number, message);
}

// The whole file, refused past `limit` bytes before reading it.
absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, int64_t limit) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return OpenError(errno, absl::StatusCode::kNotFound, absl::StrCat("cannot open '", path, "'"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return absl::UnavailableError(absl::StrCat("cannot read '", path, "'"));
  if (size > limit)
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' has ", size, " bytes, more than the limit of ", limit));
  in.seekg(0, std::ios::beg);
  std::string data(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(data.data(), size)) return absl::UnavailableError(absl::StrCat("cannot read '", path, "'"));
  return data;
}

// Writes a temporary file beside `path` and renames it over `path` (atomic
// on POSIX file systems): a crash or a full disk mid-write leaves the old
// file, never a truncated one, which matters most for checkpoints.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view data) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  errno = 0;
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  if (!out) return OpenError(errno, absl::StatusCode::kPermissionDenied, absl::StrCat("cannot write '", path, "'"));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) {
    std::remove(temp.c_str());
    return absl::DataLossError(absl::StrCat("writing '", path, "' failed"));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error_number = errno;
    std::remove(temp.c_str());
    return OpenError(error_number, absl::StatusCode::kPermissionDenied, absl::StrCat("cannot write '", path, "'"));
  }
  return absl::OkStatus();
}

// Reads `path` in the form its extension names (".pbtxt"/".txt"/".pbtext"
// text, ".pb"/".bin" binary); any other extension tries the likelier form
// first, then the other. Errors name the path.
template <typename T>
absl::StatusOr<T> LoadByForm(const std::string& path, int64_t limit,
                             absl::StatusOr<T> (*from_text)(absl::string_view),
                             absl::StatusOr<T> (*from_binary)(absl::string_view)) {
  TDF_ASSIGN_OR_RETURN(std::string data, ReadFileUpTo(path, limit));
  absl::StatusOr<T> loaded;
  if (IsTextPath(path)) {
    loaded = from_text(data);
  } else if (absl::EndsWith(path, ".pb") || absl::EndsWith(path, ".bin")) {
    loaded = from_binary(data);
  } else {
    const bool text_first = LooksLikeText(data);
    loaded = text_first ? from_text(data) : from_binary(data);
    if (!loaded.ok()) {
      absl::StatusOr<T> other = text_first ? from_binary(data) : from_text(data);
      if (other.ok()) return other;
    }
  }
  if (!loaded.ok()) return absl::Status(loaded.status().code(), absl::StrCat(path, ": ", loaded.status().message()));
  return loaded;
}

}  // namespace

absl::StatusOr<Graph> LoadGraph(const std::string& path) {
  return LoadByForm<Graph>(path, kMaxSerializedGraphBytes, GraphFromText, ParseGraph);
}

absl::Status SaveGraph(const Graph& graph, const std::string& path) {
  std::string data;
  if (IsTextPath(path)) {
    TDF_ASSIGN_OR_RETURN(data, serialization::GraphToTextOrError(graph));
  } else {
    TDF_ASSIGN_OR_RETURN(data, SerializeGraph(graph));
  }
  return WriteFileAtomically(path, data);
}

absl::Status SaveTensors(const NamedTensors& tensors, const std::string& path) {
  std::string data;
  if (IsTextPath(path)) {
    TDF_ASSIGN_OR_RETURN(data, serialization::TensorsToText(tensors));
  } else {
    TDF_ASSIGN_OR_RETURN(data, SerializeTensors(tensors));
  }
  return WriteFileAtomically(path, data);
}

absl::StatusOr<NamedTensors> LoadTensors(const std::string& path) {
  return LoadByForm<NamedTensors>(path, kMaxSerializedTensorsBytes, serialization::TensorsFromText, ParseTensors);
}

}  // namespace tdf
