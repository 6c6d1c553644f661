// Device strings with a rank (tdf/tensor.h DeviceName), and Device::Parse,
// which accepts them and keeps the device part.
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tdf/tensor.h"

namespace tdf {
namespace {

constexpr absl::string_view kWant =
    "want cpu, cuda:N, rank:R[/cpu|/cuda:N] or /job:worker/task:R/device:CPU:0";

absl::Status Bad(absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", name, "' (", why, why.empty() ? "" : "; ", kWant,
                                                 ")"));
}

bool ParseIndex(absl::string_view text, int* index) {
  return !text.empty() && absl::SimpleAtoi(text, index) && *index >= 0;
}

// "cpu", "cpu:0", "cuda", "gpu", "cuda:N", "gpu:N" (tdf's own names); with
// `tf_case` also TensorFlow's "CPU:0" / "GPU:1" spellings.
bool ParseLocalDevice(absl::string_view text, bool tf_case, Device* device) {
  std::string lower(text);
  if (tf_case) absl::AsciiStrToLower(&lower);
  if (lower == "cpu" || lower == "cpu:0") {
    *device = Device::Cpu();
    return true;
  }
  if (lower == "cuda" || lower == "gpu") {
    *device = Device::Cuda(0);
    return true;
  }
  for (absl::string_view prefix : {"cuda:", "gpu:"}) {
    int index = 0;
    if (absl::StartsWith(lower, prefix) && ParseIndex(absl::string_view(lower).substr(prefix.size()), &index)) {
      *device = Device::Cuda(index);
      return true;
    }
  }
  return false;
}

// TensorFlow's "/job:J/replica:0/task:T/device:TYPE:N" and its short forms
// ("/cpu:0", "/device:GPU:1", "/job:worker/task:1"). The job names the
// process group: "worker" tasks are ranks, "localhost" is the local
// process (rank 0). Other jobs ("ps", "chief") have no rank to map to.
absl::StatusOr<DeviceName> ParseTensorFlowName(absl::string_view name) {
  DeviceName out;
  bool seen_job = false, seen_replica = false, seen_task = false;
  std::string job;
  for (absl::string_view part : absl::StrSplit(name.substr(1), '/')) {
    if (absl::StartsWith(part, "job:")) {
      if (seen_job) return Bad(name, "two jobs");
      seen_job = true;
      job = std::string(part.substr(4));
      if (job != "worker" && job != "localhost")
        return Bad(name, absl::StrCat("job '", job, "' does not map to a rank: only /job:worker/task:R and ",
                                      "/job:localhost do"));
    } else if (absl::StartsWith(part, "replica:")) {
      int replica = 0;
      if (seen_replica || !ParseIndex(part.substr(8), &replica) || replica != 0)
        return Bad(name, "only replica 0 is supported");
      seen_replica = true;
    } else if (absl::StartsWith(part, "task:")) {
      if (seen_task || !ParseIndex(part.substr(5), &out.rank)) return Bad(name, "bad task");
      seen_task = true;
    } else if (absl::StartsWith(part, "device:")) {
      if (out.has_device || !ParseLocalDevice(part.substr(7), /*tf_case=*/true, &out.device))
        return Bad(name, "bad device component");
      out.has_device = true;
    } else if (!out.has_device && ParseLocalDevice(part, /*tf_case=*/true, &out.device)) {
      out.has_device = true;  // the legacy short form: "/cpu:0", "/gpu:1"
    } else {
      return Bad(name, absl::StrCat("unknown component '", part, "'"));
    }
  }
  if (job == "localhost") {
    if (out.rank > 0) return Bad(name, "/job:localhost has task 0 only");
    out.rank = 0;
  }
  return out;
}

}  // namespace

absl::StatusOr<DeviceName> DeviceName::Parse(absl::string_view name) {
  DeviceName out;
  if (name.empty()) return out;
  if (name[0] == '/') return ParseTensorFlowName(name);
  absl::string_view device = name;
  if (absl::StartsWith(name, "rank:")) {
    const size_t slash = name.find('/');
    absl::string_view rank = name.substr(5, slash == absl::string_view::npos ? absl::string_view::npos : slash - 5);
    if (!ParseIndex(rank, &out.rank)) return Bad(name, absl::StrCat("bad rank '", rank, "'"));
    if (slash == absl::string_view::npos) return out;
    device = name.substr(slash + 1);
  }
  if (!ParseLocalDevice(device, /*tf_case=*/false, &out.device)) return Bad(name, "");
  out.has_device = true;
  return out;
}

std::string DeviceName::ToString() const {
  std::string out = rank >= 0 ? absl::StrCat("rank:", rank) : "";
  if (has_device) absl::StrAppend(&out, rank >= 0 ? "/" : "", device.ToString());
  return out;
}

absl::StatusOr<Device> Device::Parse(absl::string_view name) {
  absl::StatusOr<DeviceName> parsed = DeviceName::Parse(name);
  if (!parsed.ok()) return parsed.status();
  return parsed->device;
}

}  // namespace tdf
