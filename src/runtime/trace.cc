#include "runtime/trace.h"
#include "base/sync.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace tdf {
namespace runtime {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrCat("\\u00", c < 16 ? "0" : "", absl::Hex(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

void TraceWriter::Add(const FiringEvent& e) {
  base::MutexLock lock(&mu_);
  events_.push_back(Event{*e.node, *e.op, e.tag, e.worker, e.dead, e.start_ns, e.end_ns, e.batch});
}

std::string TraceWriter::ToChromeJson() const {
  base::MutexLock lock(&mu_);
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    const double ts_us = e.start_ns / 1000.0;
    const double dur_us = std::max<int64_t>(e.end_ns - e.start_ns, 1) / 1000.0;
    absl::StrAppend(&out, i == 0 ? "" : ",\n", "{\"name\":\"", JsonEscape(e.node), "\",\"cat\":\"", JsonEscape(e.op),
                    "\",\"ph\":\"X\",\"pid\":1,\"tid\":", e.worker, ",\"ts\":", ts_us, ",\"dur\":", dur_us,
                    ",\"args\":{\"tag\":\"", JsonEscape(e.tag), "\",\"dead\":", e.dead ? "true" : "false");
    if (e.batch > 0) absl::StrAppend(&out, ",\"batch\":", e.batch);
    out += "}}";
  }
  out += "\n],\"displayTimeUnit\":\"ns\"}\n";
  return out;
}

absl::Status TraceWriter::WriteChromeJson(const std::string& path) const {
  std::ofstream f(path);
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write trace file '", path, "'"));
  f << ToChromeJson();
  if (!f) return absl::UnavailableError(absl::StrCat("error writing trace file '", path, "'"));
  return absl::OkStatus();
}

}  // namespace runtime
}  // namespace tdf
