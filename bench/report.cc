// File: bench/report.cc
//
// The table (stdout), the CSV and the gnuplot chart.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "harness.h"

namespace tdf_bench {
namespace {

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Seconds(double s) {
  if (std::isnan(s)) return "-";
  if (s < 1e-6) return Fmt("%.0fns", s * 1e9);
  if (s < 1e-3) return Fmt("%.1fus", s * 1e6);
  if (s < 1) return Fmt("%.1fms", s * 1e3);
  return Fmt("%.2fs", s);
}

std::string Ratio(double r) { return std::isnan(r) || std::isinf(r) ? "-" : Fmt("%.2fx", r); }

// "0.85x" for one round, "0.85x [0.80-0.92]" (median [min-max] of the
// per-round ratios) for several.
std::string RatioSpread(const std::vector<double>& ratios) {
  if (ratios.empty()) return "-";
  if (ratios.size() == 1) return Ratio(ratios[0]);
  auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  return absl::StrCat(Ratio(Median(ratios)), " [", Fmt("%.2f", *lo), "-", Fmt("%.2f", *hi), "]");
}

std::string Count(double n) {
  if (n < 0 || std::isnan(n)) return "-";
  if (n < 1e4) return Fmt("%.0f", n);
  if (n < 1e6) return Fmt("%.1fk", n / 1e3);
  if (n < 1e9) return Fmt("%.2fM", n / 1e6);
  return Fmt("%.2fG", n / 1e9);
}

std::string Mb(double mb) { return std::isnan(mb) ? "-" : Fmt("%.1f", mb); }

// Seconds per run of a variant; NaN if it did not run or failed.
double Time(const CaseResult& r, const std::string& key) {
  const Measurement* m = r.Find(key);
  return m != nullptr && m->ok ? m->seconds : kNaN;
}

// A time cell: "FAIL" when the variant ran and failed.
std::string TimeCell(const CaseResult& r, const std::string& key) {
  const Measurement* m = r.Find(key);
  if (m != nullptr && m->ran && !m->ok) return "FAIL";
  return Seconds(Time(r, key));
}

double Rss(const CaseResult& r, const std::string& key) {
  const Measurement* m = r.Find(key);
  return m != nullptr ? m->rss_mb : kNaN;
}

int64_t Firings(const CaseResult& r, const std::string& key) {
  const Measurement* m = r.Find(key);
  return m != nullptr && m->ok ? m->firings : -1;
}

int64_t PeakFrames(const CaseResult& r, const std::string& key) {
  const Measurement* m = r.Find(key);
  return m != nullptr && m->ok ? m->peak_live_frames : -1;
}

std::string W(const char* kind, int w) { return absl::StrCat(kind, "/", w, "w"); }

double Div(double a, double b) { return std::isnan(a) || std::isnan(b) || b == 0 ? kNaN : a / b; }

struct Column {
  std::string header;
  bool left = false;
  std::function<std::string(const CaseResult&)> cell;
};

std::vector<Column> Columns(const ReportOptions& o) {
  std::vector<Column> cols;
  cols.push_back({"benchmark", true, [](const CaseResult& r) { return r.c.label; }});
  cols.push_back({"calls", false, [](const CaseResult& r) {
                    std::string n = Count(static_cast<double>(r.calls));
                    return r.c.unit == "calls" ? n : absl::StrCat(n, " ", r.c.unit);
                  }});
  cols.push_back({"static", false, [](const CaseResult& r) { return TimeCell(r, "static/1w"); }});
  cols.push_back({"dynamic", false, [](const CaseResult& r) { return TimeCell(r, "dynamic/1w"); }});
  cols.push_back({"st/dyn", false, [](const CaseResult& r) {
                    return Ratio(Div(Time(r, "dynamic/1w"), Time(r, "static/1w")));
                  }});
  for (size_t i = 1; i < o.workers.size(); ++i) {
    int w = o.workers[i];
    cols.push_back({absl::StrCat("st ", w, "w"), false, [w](const CaseResult& r) {
                      return RatioSpread(RoundRatios(r.Find("static/1w"), r.Find(W("static", w))));
                    }});
    cols.push_back({absl::StrCat("dyn ", w, "w"), false, [w](const CaseResult& r) {
                      return RatioSpread(RoundRatios(r.Find("dynamic/1w"), r.Find(W("dynamic", w))));
                    }});
  }
  cols.push_back({"st/tbb", false, [](const CaseResult& r) {
                    return RatioSpread(RoundRatios(r.Find("static/1w"), r.Find("tbb/1w")));
                  }});
  cols.push_back({"ns/call", false, [](const CaseResult& r) {
                    double ns = Div(Time(r, "static/1w"), static_cast<double>(r.calls)) * 1e9;
                    return std::isnan(ns) ? std::string("-") : Fmt("%.0f", ns);
                  }});
  cols.push_back({"ns/fire", false, [](const CaseResult& r) {
                    int64_t f = Firings(r, "static/1w");
                    double ns = f > 0 ? Time(r, "static/1w") / static_cast<double>(f) * 1e9 : kNaN;
                    return std::isnan(ns) ? std::string("-") : Fmt("%.0f", ns);
                  }});
  cols.push_back({"frames", false, [](const CaseResult& r) {
                    return Count(static_cast<double>(PeakFrames(r, "static/1w")));
                  }});
  cols.push_back({"compile", false, [](const CaseResult& r) {
                    const Measurement* m = r.Find("static/1w");
                    return m == nullptr ? std::string("-") : Seconds(m->compile_s);
                  }});
  cols.push_back({"RSS st", false, [](const CaseResult& r) { return Mb(Rss(r, "static/1w")); }});
  cols.push_back({"RSS dyn", false, [](const CaseResult& r) { return Mb(Rss(r, "dynamic/1w")); }});
  cols.push_back({"native", false, [](const CaseResult& r) { return TimeCell(r, "native"); }});
  for (int w : o.workers) {
    cols.push_back({absl::StrCat("tbb ", w, "w"), false, [w](const CaseResult& r) { return TimeCell(r, W("tbb", w)); }});
  }
  cols.push_back({"RSS tbb", false, [](const CaseResult& r) { return Mb(Rss(r, "tbb/1w")); }});
  cols.push_back({"paper st", false, [](const CaseResult& r) { return Seconds(r.c.paper_static_s); }});
  cols.push_back({"paper dyn", false, [](const CaseResult& r) { return Seconds(r.c.paper_dynamic_s); }});
  cols.push_back({"vs p.st", false, [](const CaseResult& r) {
                    return Ratio(Div(r.c.paper_static_s, Time(r, "static/1w")));
                  }});
  cols.push_back({"vs p.dyn", false, [](const CaseResult& r) {
                    return Ratio(Div(r.c.paper_dynamic_s, Time(r, "dynamic/1w")));
                  }});
  return cols;
}

std::string Csv(double v) {
  if (std::isnan(v)) return "";
  return Fmt("%.9g", v);
}

}  // namespace

double Median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<double> RoundRatios(const Measurement* a, const Measurement* b) {
  std::vector<double> ratios;
  if (a == nullptr || b == nullptr || !a->ok || !b->ok || a->round_seconds.size() != b->round_seconds.size())
    return ratios;
  for (size_t i = 0; i < a->round_seconds.size(); ++i) {
    if (b->round_seconds[i] <= 0) return {};
    ratios.push_back(a->round_seconds[i] / b->round_seconds[i]);
  }
  return ratios;
}

void PrintTable(const std::vector<CaseResult>& results, const ReportOptions& o) {
  std::vector<Column> cols = Columns(o);
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width(cols.size());
  for (size_t j = 0; j < cols.size(); ++j) width[j] = cols[j].header.size();
  for (const CaseResult& r : results) {
    std::vector<std::string> row;
    for (size_t j = 0; j < cols.size(); ++j) {
      row.push_back(cols[j].cell(r));
      width[j] = std::max(width[j], row.back().size());
    }
    cells.push_back(std::move(row));
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t j = 0; j < cols.size(); ++j) {
      std::string pad(width[j] - row[j].size(), ' ');
      line += j == 0 ? "" : "  ";
      line += cols[j].left ? row[j] + pad : pad + row[j];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  };
  std::vector<std::string> header;
  for (const Column& c : cols) header.push_back(c.header);
  print_row(header);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  std::printf("%s\n", std::string(total - 2, '-').c_str());
  std::string family;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!family.empty() && results[i].c.family != family) std::printf("\n");
    family = results[i].c.family;
    print_row(cells[i]);
  }

  double baseline = kNaN;
  for (const CaseResult& r : results) {
    for (const auto& [key, m] : r.by_variant) {
      if (!std::isnan(m.rss_baseline_mb)) baseline = std::isnan(baseline) ? m.rss_baseline_mb : std::min(baseline, m.rss_baseline_mb);
    }
  }
  std::string multi;
  for (size_t i = 1; i < o.workers.size(); ++i) absl::StrAppend(&multi, i > 1 ? ", " : "", "st ", o.workers[i], "w, dyn ", o.workers[i], "w");
  std::printf(
      "\nTimes: wall-clock per run (Google Benchmark, mean over its iterations; %s), variants run one after\n"
      "the other in this process; every answer was checked against the native oracle. static/dynamic: tdf at\n"
      "1 worker. st/dyn: dynamic time / static time (>1: static faster). %s: 1-worker time / that worker\n"
      "count's time. st/tbb: tdf static time / oneTBB's (a task per call), both at 1 worker (<1: tdf faster).\n"
      "Ratios with a [min-max]: the median of the per-round ratios and their range.\n"
      "ns/call: static 1w time / calls (loop iterations for while, ops for chain). ns/fire: static 1w time /\n"
      "RunStats.firings. frames: RunStats.peak_live_frames (static 1w). compile: Session::Create (static 1w; not\n"
      "in the times). RSS (MB): %s\n"
      "paper st/dyn: seeds/002 table 1 (TensorFlow-based, their machine); vs p.*: paper time / our time.\n"
      "Machine: %s.\n",
      o.rounds > 1 ? absl::StrCat("the median of ", o.rounds, " rounds").c_str() : "one round (--rounds=N for more)",
      multi.empty() ? "Nw" : multi.c_str(),
      std::isnan(baseline)
          ? "not measured (--no-rss)."
          : absl::StrCat("peak RSS (VmHWM) of a fresh child process that ran the variant once at 1 worker,\n"
                         "graph building included; such a process starts at ",
                         Mb(baseline), " MB.")
                .c_str(),
      o.machine.c_str());
  if (!o.tdf_available) std::printf("tdf cases NOT run: %s\n", o.tdf_unavailable_reason.c_str());
}

bool WriteCsv(const std::vector<CaseResult>& results, const ReportOptions& o) {
  if (o.csv_path.empty()) return true;
  std::ofstream out(o.csv_path);
  if (!out) {
    std::fprintf(stderr, "tdf_bench: cannot write %s\n", o.csv_path.c_str());
    return false;
  }
  std::vector<std::string> keys = {"native"};
  for (const char* kind : {"tbb", "static", "dynamic"}) {
    for (int w : o.workers) keys.push_back(W(kind, w));
  }
  std::vector<std::string> header = {"benchmark", "family", "args", "calls", "unit"};
  for (const std::string& k : keys) {
    header.push_back(k + "_s");
    if (k.rfind("static", 0) == 0 || k.rfind("dynamic", 0) == 0) {
      header.push_back(k + "_firings");
      header.push_back(k + "_peak_live_frames");
      header.push_back(k + "_frames_created");
      header.push_back(k + "_build_s");
      header.push_back(k + "_compile_s");
    }
    header.push_back(k + "_rss_mb");
    header.push_back(k + "_status");
  }
  for (const char* h : {"ns_per_call_static_1w", "ns_per_firing_static_1w", "ns_per_firing_dynamic_1w",
                        "paper_static_s", "paper_dynamic_s", "speedup_vs_paper_static", "speedup_vs_paper_dynamic",
                        "rounds", "static_over_tbb_1w_median", "static_over_tbb_1w_min", "static_over_tbb_1w_max"}) {
    header.push_back(h);
  }
  out << absl::StrJoin(header, ",") << "\n";
  for (const CaseResult& r : results) {
    std::vector<std::string> row = {"\"" + r.c.label + "\"", r.c.family, "\"" + absl::StrJoin(r.c.args, " ") + "\"",
                                    absl::StrCat(r.calls), r.c.unit};
    for (const std::string& k : keys) {
      const Measurement* m = r.Find(k);
      row.push_back(Csv(Time(r, k)));
      if (k.rfind("static", 0) == 0 || k.rfind("dynamic", 0) == 0) {
        bool have = m != nullptr && m->ok && m->firings >= 0;
        row.push_back(have ? absl::StrCat(m->firings) : "");
        row.push_back(have ? absl::StrCat(m->peak_live_frames) : "");
        row.push_back(have ? absl::StrCat(m->frames_created) : "");
        row.push_back(m != nullptr ? Csv(m->build_s) : "");
        row.push_back(m != nullptr ? Csv(m->compile_s) : "");
      }
      row.push_back(Csv(Rss(r, k)));
      row.push_back(m == nullptr || !m->ran ? "not_run" : m->ok ? "ok" : "FAILED");
    }
    auto per_firing = [&](const std::string& k) {
      int64_t f = Firings(r, k);
      return f > 0 ? Time(r, k) / static_cast<double>(f) * 1e9 : kNaN;
    };
    row.push_back(Csv(Div(Time(r, "static/1w"), static_cast<double>(r.calls)) * 1e9));
    row.push_back(Csv(per_firing("static/1w")));
    row.push_back(Csv(per_firing("dynamic/1w")));
    row.push_back(Csv(r.c.paper_static_s));
    row.push_back(Csv(r.c.paper_dynamic_s));
    row.push_back(Csv(Div(r.c.paper_static_s, Time(r, "static/1w"))));
    row.push_back(Csv(Div(r.c.paper_dynamic_s, Time(r, "dynamic/1w"))));
    row.push_back(absl::StrCat(o.rounds));
    const std::vector<double> vs_tbb = RoundRatios(r.Find("static/1w"), r.Find("tbb/1w"));
    row.push_back(Csv(Median(vs_tbb)));
    row.push_back(vs_tbb.empty() ? "" : Csv(*std::min_element(vs_tbb.begin(), vs_tbb.end())));
    row.push_back(vs_tbb.empty() ? "" : Csv(*std::max_element(vs_tbb.begin(), vs_tbb.end())));
    out << absl::StrJoin(row, ",") << "\n";
  }
  std::fprintf(stderr, "tdf_bench: wrote %s\n", o.csv_path.c_str());
  return static_cast<bool>(out);
}

bool WritePlot(const std::vector<CaseResult>& results, const ReportOptions& o) {
  if (o.plot_path.empty()) return true;
  struct Series {
    const char* title;
    std::function<double(const CaseResult&)> y;
    const char* style;
  };
  const std::vector<Series> time_series = {
      {"tdf static", [](const CaseResult& r) { return Time(r, "static/1w"); }, "linespoints pt 7 lc rgb '#1f77b4'"},
      {"tdf dynamic", [](const CaseResult& r) { return Time(r, "dynamic/1w"); }, "linespoints pt 5 lc rgb '#ff7f0e'"},
      {"native C++", [](const CaseResult& r) { return Time(r, "native"); }, "linespoints pt 9 lc rgb '#2ca02c'"},
      {"oneTBB 1w", [](const CaseResult& r) { return Time(r, "tbb/1w"); }, "linespoints pt 11 lc rgb '#9467bd'"},
      {"paper static", [](const CaseResult& r) { return r.c.paper_static_s; }, "points pt 6 ps 1.5 lc rgb '#1f77b4'"},
      {"paper dynamic", [](const CaseResult& r) { return r.c.paper_dynamic_s; }, "points pt 4 ps 1.5 lc rgb '#ff7f0e'"},
  };
  const std::vector<Series> rss_series = {
      {"tdf static", [](const CaseResult& r) { return Rss(r, "static/1w"); }, "linespoints pt 7 lc rgb '#1f77b4'"},
      {"tdf dynamic", [](const CaseResult& r) { return Rss(r, "dynamic/1w"); }, "linespoints pt 5 lc rgb '#ff7f0e'"},
      {"native C++", [](const CaseResult& r) { return Rss(r, "native"); }, "linespoints pt 9 lc rgb '#2ca02c'"},
      {"oneTBB 1w", [](const CaseResult& r) { return Rss(r, "tbb/1w"); }, "linespoints pt 11 lc rgb '#9467bd'"},
  };
  struct Panel {
    std::string family, title, xlabel, ylabel;
    bool logx;
    const std::vector<Series>* series;
  };
  const std::vector<Panel> panels = {
      {"fib", "fib(n)", "n", "seconds per run", false, &time_series},
      {"ack", "ack(3,n)", "n", "seconds per run", false, &time_series},
      {"tak", "tak(x,y,z) against x", "x", "seconds per run", false, &time_series},
      {"primes", "primes(n)", "n", "seconds per run", false, &time_series},
      {"sum", "sum(n): recursion depth n", "n", "seconds per run", true, &time_series},
      {"sum", "sum(n): peak RSS of one run", "n", "MB (VmHWM)", true, &rss_series},
  };

  const std::string data_path = o.plot_path + ".dat";
  const std::string script_path = o.plot_path + ".gp";
  std::ofstream data(data_path);
  std::string script = absl::StrCat("# Written by tdf_bench; rerun with: gnuplot ", script_path, "\n",
                                    "set terminal pngcairo noenhanced size 1500,900 font 'sans,9'\n", "set output '", o.plot_path,
                                    "'\n", "set datafile missing 'NaN'\n", "set grid\nset key top left\nset format y '%g'\n");
  std::string plots;
  int block = 0, count = 0;
  for (const Panel& p : panels) {
    std::vector<const CaseResult*> rows;
    for (const CaseResult& r : results) {
      if (r.c.family == p.family && !std::isnan(r.c.plot_x)) rows.push_back(&r);
    }
    std::vector<int> present;
    for (size_t s = 0; s < p.series->size(); ++s) {
      for (const CaseResult* r : rows) {
        double y = (*p.series)[s].y(*r);
        if (!std::isnan(y) && y > 0) {
          present.push_back(static_cast<int>(s));
          break;
        }
      }
    }
    if (present.empty()) continue;
    data << "# " << p.title << ": x";
    for (const Series& s : *p.series) data << " | " << s.title;
    data << "\n";
    for (const CaseResult* r : rows) {
      data << r->c.plot_x;
      for (const Series& s : *p.series) {
        double y = s.y(*r);
        data << " " << (std::isnan(y) || y <= 0 ? std::string("NaN") : Fmt("%.9g", y));
      }
      data << "\n";
    }
    data << "\n\n";
    double xmin = rows.front()->c.plot_x, xmax = xmin;
    for (const CaseResult* r : rows) {
      xmin = std::min(xmin, r->c.plot_x);
      xmax = std::max(xmax, r->c.plot_x);
    }
    // gnuplot warns about an empty range when a panel has one x.
    std::string xrange = xmin == xmax ? absl::StrCat("set xrange [", xmin * 0.9, ":", xmax * 1.1, "]\n")
                                      : std::string("set autoscale x\n");
    absl::StrAppend(&plots, "set title '", p.title, "'\nset xlabel '", p.xlabel, "'\nset ylabel '", p.ylabel,
                    "'\nset logscale y\n", p.logx ? "set logscale x\n" : "unset logscale x\n", xrange, "plot ");
    for (size_t k = 0; k < present.size(); ++k) {
      const Series& s = (*p.series)[present[k]];
      absl::StrAppend(&plots, k ? ", \\\n     " : "", "'", data_path, "' index ", block, " using 1:",
                      present[k] + 2, " with ", s.style, " title '", s.title, "'");
    }
    plots += "\n";
    ++block;
    ++count;
  }
  data.close();
  if (count == 0) {
    std::fprintf(stderr, "tdf_bench: nothing to plot (no fib/ack/tak/primes/sum results)\n");
    return true;
  }
  int cols = count <= 2 ? count : 3;
  int rows = (count + cols - 1) / cols;
  absl::StrAppend(&script, "set multiplot layout ", rows, ",", cols, " title 'tdf_bench: time against n'\n", plots,
                  "unset multiplot\n");
  std::ofstream(script_path) << script;
  std::string cmd = absl::StrCat("gnuplot '", script_path, "'");
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    // The chart is a convenience: without gnuplot the table and CSV stand.
    std::fprintf(stderr, "tdf_bench: warning: '%s' failed (exit %d); chart data left in %s\n", cmd.c_str(), rc,
                 data_path.c_str());
    return true;
  }
  std::fprintf(stderr, "tdf_bench: wrote %s (script %s)\n", o.plot_path.c_str(), script_path.c_str());
  return true;
}

}  // namespace tdf_bench
