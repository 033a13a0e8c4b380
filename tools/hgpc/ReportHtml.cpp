// ReportHtml.cpp - the self-contained HTML pages of `hgpc compare` and `hgpc explore`
// (Report.h): inline CSS and SVG, no script and nothing fetched. The markup is well-formed XML
// as well as HTML, so tests parse it with either parser.
#include "tools/hgpc/Report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace hgp {

namespace {

const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1",
                         "#edc948", "#9c755f"};
const char* color(size_t i) { return kColors[i % (sizeof kColors / sizeof *kColors)]; }

std::string format(const char* fmt, auto... args) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

/// A round step for about `n` ticks up to `max`.
double niceStep(double max, int n = 5) {
  if (max <= 0) return 1;
  double raw = max / n, mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

void header(const std::string& title, std::ostream& os) {
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>" << esc(title)
     << "</title>\n<style>\n"
        "body{font-family:sans-serif;margin:24px;color:#222;max-width:1140px}\n"
        "h1{font-size:22px}h2{font-size:17px;margin-top:28px}\n"
        "table{border-collapse:collapse;font-size:13px}\n"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\n"
        "th:first-child,td:first-child{text-align:left}\n"
        "tr.best td{background:#e6f4ea}tr.nofit td{color:#b00}\n"
        "svg text{font-size:11px;fill:#222}svg .title{font-size:13px;font-weight:bold}\n"
        "p.note{font-size:12px;color:#555}\n"
        "</style>\n</head>\n<body>\n<h1>"
     << esc(title) << "</h1>\n";
}

void footer(std::ostream& os) {
  os << "<p class=\"note\">Predicted by hgpc's cost model (compiler/analysis/CostModel.h) on the "
        "stream schedule; peak memory is the static memory plan's arena. A configuration fits "
        "when the arena plus "
     << humanBytes(double(kRuntimeReserveBytes)) << " for the runtime is within the limit.</p>\n</body>\n</html>\n";
}

/// Horizontal bars, one row per label and one column of bars per value set.
struct BarColumn {
  std::string title;
  std::vector<double> values;
  std::string color;
  std::string (*label)(double);
};

std::string msLabel(double s) { return format("%.3f ms", s * 1e3); }
std::string mibLabel(double b) { return format("%.1f MiB", b / (1 << 20)); }

void barChart(const std::string& title, const std::vector<std::string>& rows,
              const std::vector<BarColumn>& cols, std::ostream& os, double scaleMax = 0) {
  const int rowH = 14, labelW = 260, colW = 380, top = 36;
  int width = labelW + colW * int(cols.size()) + 20, height = top + rowH * int(rows.size()) + 10;
  os << format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
               width, height, width, height);
  os << "<text class=\"title\" x=\"4\" y=\"14\">" << esc(title) << "</text>\n";
  for (size_t c = 0; c < cols.size(); ++c) {
    double max = scaleMax;
    if (max <= 0)
      for (double v : cols[c].values) max = std::max(max, v);
    int x0 = labelW + colW * int(c);
    os << format("<text x=\"%d\" y=\"30\">%s</text>\n", x0, esc(cols[c].title).c_str());
    for (size_t r = 0; r < rows.size() && r < cols[c].values.size(); ++r) {
      double v = cols[c].values[r];
      double w = max > 0 ? (colW - 110) * v / max : 0;
      int y = top + rowH * int(r);
      os << format("<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>", x0, y + 2,
                   std::max(0.5, w), rowH - 3, cols[c].color.c_str());
      os << format("<text x=\"%.1f\" y=\"%d\">%s</text>\n", x0 + w + 4, y + rowH - 3,
                   esc(cols[c].label(v)).c_str());
    }
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string l = rows[r].size() > 42 ? "..." + rows[r].substr(rows[r].size() - 39) : rows[r];
    os << format("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", labelW - 6,
                 top + rowH * int(r) + rowH - 3, esc(l).c_str());
  }
  os << "</svg>\n";
}

/// One line of a plot: points (x, y); `filled[i]` false draws point i hollow.
struct Series {
  std::string name, color;
  std::vector<double> x, y;
  std::vector<bool> filled;
  bool dashed = false;
};
struct Marker {
  double value;
  std::string label, color;
};

/// A line plot over a log2 x axis (batch sizes), with horizontal and vertical markers.
void linePlot(const std::string& title, const std::string& xLabel, const std::string& yLabel,
              const std::vector<Series>& series, const std::vector<Marker>& hlines,
              const std::vector<Marker>& vlines, std::ostream& os) {
  const int W = 1040, H = 400, L = 80, R = 190, T = 30, B = 50;
  double xmin = 1e300, xmax = 0, ymax = 0;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size(); ++i)
      xmin = std::min(xmin, s.x[i]), xmax = std::max(xmax, s.x[i]), ymax = std::max(ymax, s.y[i]);
  for (const Marker& m : hlines) ymax = std::max(ymax, m.value);
  for (const Marker& m : vlines)
    if (m.value > 0) xmin = std::min(xmin, m.value), xmax = std::max(xmax, m.value);
  if (xmax <= 0) return;
  double lx0 = std::log2(xmin) - 0.3, lx1 = std::log2(std::max(xmax, xmin * 2)) + 0.3;
  double step = niceStep(ymax * 1.08), y1 = std::ceil(ymax * 1.08 / step) * step;
  auto px = [&](double x) { return L + (W - L - R) * (std::log2(x) - lx0) / (lx1 - lx0); };
  auto py = [&](double y) { return T + (H - T - B) * (1 - y / y1); };
  os << format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
               W, H, W, H);
  os << "<text class=\"title\" x=\"" << L << "\" y=\"18\">" << esc(title) << "</text>\n";
  os << format("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", L, T,
               W - L - R, H - T - B);
  for (double y = 0; y <= y1 + step / 2; y += step) {
    os << format("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>", L, py(y), W - R, py(y));
    os << format("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 6, py(y) + 4,
                 humanCount(y).c_str());
  }
  for (double e = std::ceil(lx0); e <= lx1; ++e) {
    double x = std::exp2(e);
    os << format("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>", px(x), T, px(x), H - B);
    os << format("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", px(x), H - B + 16, x);
  }
  os << format("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", (L + W - R) / 2, H - 12,
               esc(xLabel).c_str());
  os << format("<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">%s</text>\n",
               (T + H - B) / 2, (T + H - B) / 2, esc(yLabel).c_str());
  for (const Marker& m : hlines)
    os << format("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" "
                 "stroke-dasharray=\"6 4\"/><text x=\"%d\" y=\"%.1f\">%s</text>\n",
                 L, py(m.value), W - R, py(m.value), m.color.c_str(), W - R + 6, py(m.value) + 4,
                 esc(m.label).c_str());
  int vl = 0;
  for (const Marker& m : vlines) {
    if (m.value <= 0) continue;
    os << format("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\" "
                 "stroke-dasharray=\"6 4\"/><text x=\"%.1f\" y=\"%d\" fill=\"%s\" "
                 "text-anchor=\"end\">%s</text>\n",
                 px(m.value), T, px(m.value), H - B, m.color.c_str(), px(m.value) - 4, T + 14 + 14 * vl++,
                 m.color.c_str(), esc(m.label).c_str());
  }
  int legend = 0;
  for (const Series& s : series) {
    std::string pts;
    for (size_t i = 0; i < s.x.size(); ++i) pts += format("%.1f,%.1f ", px(s.x[i]), py(s.y[i]));
    os << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
       << (s.dashed ? " stroke-dasharray=\"3 3\"" : "") << " points=\"" << pts << "\"/>\n";
    for (size_t i = 0; i < s.x.size(); ++i)
      os << format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" stroke=\"%s\" stroke-width=\"2\" fill=\"%s\"/>",
                   px(s.x[i]), py(s.y[i]), s.color.c_str(),
                   i < s.filled.size() && !s.filled[i] ? "white" : s.color.c_str());
    int ly = T + 10 + 18 * legend++;
    os << format("\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                 "<text x=\"%d\" y=\"%d\">%s</text>\n",
                 W - R + 8, ly, W - R + 30, ly, s.color.c_str(),
                 s.dashed ? " stroke-dasharray=\"3 3\"" : "", W - R + 36, ly + 4, esc(s.name).c_str());
  }
  os << "</svg>\n";
}

/// The configurations as an HTML table.
void configTable(const std::vector<ConfigReport>& configs, bool models,
                 const std::vector<std::pair<std::string, int64_t>>& largest, std::ostream& os) {
  bool measured = false;
  for (const ConfigReport& r : configs) measured |= r.measured.has_value();
  int best = bestFitting(configs);
  os << "<table>\n<tr><th>" << (models ? "model" : "precision") << "</th><th>batch</th>"
     << "<th>parameters</th><th>FLOPs/step</th><th>step (ms)</th><th>images/s</th>"
        "<th>peak memory</th><th>fits</th>";
  if (measured) os << "<th>measured (ms)</th><th>measured images/s</th><th>error</th>";
  os << "<th></th></tr>\n";
  for (size_t i = 0; i < configs.size(); ++i) {
    const ConfigReport& r = configs[i];
    std::string name = models ? r.model : r.precision;
    if (!r.error.empty()) {
      os << "<tr class=\"nofit\"><td>" << esc(name) << "</td><td>" << r.batch
         << "</td><td colspan=\"7\">" << esc(r.error) << "</td></tr>\n";
      continue;
    }
    std::string cls = int(i) == best ? " class=\"best\"" : !r.fits ? " class=\"nofit\"" : "";
    os << "<tr" << cls << "><td>" << esc(name) << "</td><td>" << r.batch << "</td><td>"
       << humanCount(double(r.parameters)) << "</td><td>" << humanCount(r.flops) << "</td><td>"
       << format("%.3f", r.stepSeconds * 1e3) << "</td><td>" << format("%.0f", r.imagesPerSecond())
       << "</td><td>" << humanBytes(double(r.arenaBytes())) << "</td><td>" << (r.fits ? "yes" : "no")
       << "</td>";
    if (measured) {
      if (!r.measured) os << "<td>-</td><td>-</td><td>-</td>";
      else if (!r.measured->ran) os << "<td colspan=\"3\">" << esc(r.measured->failure) << "</td>";
      else
        os << format("<td>%.3f</td><td>%.0f</td><td>%+.1f%%</td>", r.measured->stepSeconds * 1e3,
                     double(r.batch) / r.measured->stepSeconds, 100 * *r.predictionError());
    }
    std::string note = int(i) == best ? (models ? "fastest that fits" : "best that fits") : "";
    for (const auto& [p, b] : largest)
      if (!models && p == r.precision && b == r.batch)
        note += std::string(note.empty() ? "" : "; ") + "largest batch that fits";
    os << "<td>" << esc(note) << "</td></tr>\n";
  }
  os << "</table>\n";
}

std::vector<std::string> names(const std::vector<ReportGroup>& gs) {
  std::vector<std::string> n;
  for (const ReportGroup& g : gs) n.push_back(g.name);
  return n;
}
std::vector<double> seconds(const std::vector<ReportGroup>& gs) {
  std::vector<double> v;
  for (const ReportGroup& g : gs) v.push_back(g.seconds);
  return v;
}
std::vector<double> written(const std::vector<ReportGroup>& gs) {
  std::vector<double> v;
  for (const ReportGroup& g : gs) v.push_back(g.resultBytes);
  return v;
}

} // namespace

void writeCompareHtml(const std::vector<ConfigReport>& models, std::ostream& os) {
  std::string title = "hgpc compare:";
  for (const ConfigReport& m : models) title += " " + m.model;
  header(title, os);
  if (models.empty()) return footer(os);
  const ConfigReport& first = models.front();
  os << "<p>batch " << first.batch << ", precision " << esc(first.precision) << ", target "
     << esc(first.target) << ", memory limit " << humanBytes(double(first.memoryLimitBytes)) << "</p>\n";
  configTable(models, true, {}, os);
  // Time per op family, one column of bars per model.
  std::vector<std::string> families;
  for (const ConfigReport& m : models)
    for (const ReportGroup& g : m.families)
      if (std::find(families.begin(), families.end(), g.name) == families.end()) families.push_back(g.name);
  std::vector<BarColumn> cols;
  for (size_t i = 0; i < models.size(); ++i) {
    if (!models[i].error.empty()) continue;
    BarColumn c{models[i].model, {}, color(i), msLabel};
    for (const std::string& f : families) {
      double s = 0;
      for (const ReportGroup& g : models[i].families)
        if (g.name == f) s = g.seconds;
      c.values.push_back(s);
    }
    cols.push_back(c);
  }
  os << "<h2>Where the time goes, per op family</h2>\n";
  double longest = 0;
  for (const BarColumn& c : cols)
    for (double v : c.values) longest = std::max(longest, v);
  // At most two models side by side per chart, to keep it readable.
  for (size_t i = 0; i < cols.size(); i += 2)
    barChart("predicted time per op family (one stream; one scale for all models)", families,
             std::vector<BarColumn>(cols.begin() + long(i), cols.begin() + long(std::min(cols.size(), i + 2))),
             os, /*scaleMax=*/longest);
  for (size_t i = 0; i < models.size(); ++i) {
    const ConfigReport& m = models[i];
    if (!m.error.empty()) continue;
    os << "<h2>" << esc(m.model) << ": per stage</h2>\n";
    barChart(m.model + ": time and result bytes per stage", names(m.stages),
             {{"predicted time", seconds(m.stages), color(i), msLabel},
              {"bytes of results written", written(m.stages), "#9c755f", mibLabel}},
             os);
    os << "<details><summary>" << esc(m.model) << ": per layer (" << m.layers.size()
       << " layers)</summary>\n";
    barChart(m.model + ": time and result bytes per layer", names(m.layers),
             {{"predicted time", seconds(m.layers), color(i), msLabel},
              {"bytes of results written", written(m.layers), "#9c755f", mibLabel}},
             os);
    os << "</details>\n";
  }
  footer(os);
}

void writeExploreHtml(const std::vector<ConfigReport>& configs,
                      const std::vector<std::pair<std::string, int64_t>>& largestBatch,
                      std::ostream& os) {
  std::string model = configs.empty() ? "" : configs.front().model;
  header("hgpc explore: " + model, os);
  if (configs.empty()) return footer(os);
  const ConfigReport& first = configs.front();
  os << "<p>target " << esc(first.target) << ", memory limit "
     << humanBytes(double(first.memoryLimitBytes)) << "</p>\n";
  std::vector<std::string> precisions;
  for (const ConfigReport& r : configs)
    if (std::find(precisions.begin(), precisions.end(), r.precision) == precisions.end())
      precisions.push_back(r.precision);
  std::vector<Series> speed, memory;
  std::vector<Marker> limits;
  for (size_t p = 0; p < precisions.size(); ++p) {
    Series s{precisions[p] + " predicted", color(p)}, m{precisions[p], color(p)},
        meas{precisions[p] + " measured", color(p)};
    meas.dashed = true;
    for (const ConfigReport& r : configs) {
      if (r.precision != precisions[p] || !r.error.empty()) continue;
      s.x.push_back(double(r.batch)), s.y.push_back(r.imagesPerSecond()), s.filled.push_back(r.fits);
      m.x.push_back(double(r.batch)), m.y.push_back(double(r.arenaBytes()) / (1 << 30));
      m.filled.push_back(r.fits);
      if (r.measured && r.measured->ran)
        meas.x.push_back(double(r.batch)), meas.y.push_back(double(r.batch) / r.measured->stepSeconds);
    }
    speed.push_back(s);
    if (!meas.x.empty()) speed.push_back(meas);
    memory.push_back(m);
    for (const auto& [name, b] : largestBatch)
      if (name == precisions[p] && b > 0)
        limits.push_back({double(b), "memory limit: " + name + " b" + std::to_string(b), color(p)});
  }
  os << "<h2>Throughput against batch</h2>\n";
  linePlot("images/s (hollow: does not fit the memory limit)", "batch (log scale)", "images/s",
           speed, {}, limits, os);
  os << "<h2>Peak memory against batch</h2>\n";
  double limitGiB = double(first.memoryLimitBytes - kRuntimeReserveBytes) / (1 << 30);
  linePlot("plan arena (GiB)", "batch (log scale)", "GiB", memory,
           {{limitGiB, format("limit %.1f GiB", limitGiB), "#e15759"}}, {}, os);
  os << "<h2>Configurations</h2>\n";
  configTable(configs, false, largestBatch, os);
  footer(os);
}

} // namespace hgp
