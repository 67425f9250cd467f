// api/plot/metrics_plot.cc: ReadMetricsJsonl, RenderMetricsSvg, NiceTicks (metrics_plot.h).
#include "api/plot/metrics_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace mxmaca::api {
namespace {

// Layout of one panel (SVG user units).
constexpr double kWidth = 760, kPanelHeight = 240, kTitleHeight = 36;
constexpr double kLeft = 90, kRight = 24, kTop = 30, kBottom = 46;
constexpr const char* kColors[] = {"#1f77b4", "#d62728"};

std::string Escape(const std::string& text) {
  return absl::StrReplaceAll(text,
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// Label: a tick value as text that parses back to it: ticks are multiples of a step of
// 1, 2 or 5 x 10^k, so k < 0 needs -k (or -k + 1 for 5 x 10^k... covered by ceil) decimals.
std::string Label(double v, double step) {
  if (std::abs(v) < step * 1e-9) v = 0.0;
  if (step >= 1.0) return absl::StrFormat("%.0f", v);
  const int decimals = static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  return absl::StrFormat("%.*f", decimals, v);
}

struct Panel {
  std::string id, title, y_label;
  std::vector<std::pair<std::string, const std::vector<MetricsPoint>*>> series;
};

void AppendPanel(std::string* svg, const Panel& p, double top) {
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = top + kTop, y1 = top + kPanelHeight - kBottom;
  absl::StrAppendFormat(svg, "<g class=\"panel\" id=\"%s\">\n", p.id);
  absl::StrAppendFormat(
      svg, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", x0,
      top + 20, Escape(p.title));
  absl::StrAppendFormat(svg,
                        "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
                        "stroke=\"#444\"/>\n",
                        x0, y0, x1 - x0, y1 - y0);
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& [name, points] : p.series) {
    for (const MetricsPoint& q : *points) {
      xlo = std::min(xlo, q.x), xhi = std::max(xhi, q.x);
      ylo = std::min(ylo, q.y), yhi = std::max(yhi, q.y);
    }
  }
  if (!(xlo <= xhi)) {
    absl::StrAppendFormat(svg,
                          "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" fill=\"#666\">no %s "
                          "data in the metrics file</text>\n</g>\n",
                          (x0 + x1) / 2, (y0 + y1) / 2, Escape(p.y_label));
    return;
  }
  const std::vector<double> xt = NiceTicks(xlo, xhi), yt = NiceTicks(ylo, yhi);
  const double ax = xt.front(), bx = xt.back(), ay = yt.front(), by = yt.back();
  auto px = [&](double v) { return x0 + (v - ax) / (bx - ax) * (x1 - x0); };
  auto py = [&](double v) { return y1 - (v - ay) / (by - ay) * (y1 - y0); };
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double v : xt) {
    absl::StrAppendFormat(
        svg, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#444\"/>\n", px(v), y1,
        px(v), y1 + 5);
    absl::StrAppendFormat(svg,
                          "<text class=\"xtick\" x=\"%.2f\" y=\"%.2f\" font-size=\"11\" "
                          "text-anchor=\"middle\">%s</text>\n",
                          px(v), y1 + 18, Label(v, xstep));
  }
  for (double v : yt) {
    absl::StrAppendFormat(
        svg, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#444\"/>\n", x0 - 5,
        py(v), x0, py(v));
    absl::StrAppendFormat(
        svg, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#ddd\"/>\n", x0, py(v),
        x1, py(v));
    absl::StrAppendFormat(svg,
                          "<text class=\"ytick\" x=\"%.2f\" y=\"%.2f\" font-size=\"11\" "
                          "text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n",
                          x0 - 8, py(v), Label(v, ystep));
  }
  absl::StrAppendFormat(svg,
                        "<text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\" font-size=\"12\" "
                        "text-anchor=\"middle\">iteration</text>\n",
                        (x0 + x1) / 2, y1 + 36);
  absl::StrAppendFormat(svg,
                        "<text class=\"ylabel\" x=\"%.2f\" y=\"%.2f\" font-size=\"12\" "
                        "text-anchor=\"middle\" transform=\"rotate(-90 %.2f %.2f)\">%s</text>\n",
                        x0 - 62, (y0 + y1) / 2, x0 - 62, (y0 + y1) / 2, Escape(p.y_label));
  for (size_t s = 0; s < p.series.size(); ++s) {
    const auto& [name, points] = p.series[s];
    if (points->empty()) continue;
    std::string pts;
    for (const MetricsPoint& q : *points) {
      absl::StrAppendFormat(&pts, "%s%.2f,%.2f", pts.empty() ? "" : " ", px(q.x), py(q.y));
    }
    const char* color = kColors[s % 2];
    absl::StrAppendFormat(svg,
                          "<polyline class=\"series\" data-series=\"%s\" fill=\"none\" "
                          "stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n",
                          name, color, pts);
    // Legend entry, top right inside the frame.
    const double ly = y0 + 14 + 16 * static_cast<double>(s);
    absl::StrAppendFormat(svg,
                          "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                          "stroke-width=\"2\"/>\n<text x=\"%.2f\" y=\"%.2f\" font-size=\"11\" "
                          "dominant-baseline=\"middle\">%s</text>\n",
                          x1 - 150, ly, x1 - 130, ly, color, x1 - 124, ly, Escape(name));
  }
  *svg += "</g>\n";
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(lo <= hi) || !std::isfinite(lo) || !std::isfinite(hi)) lo = 0.0, hi = 1.0;
  if (hi - lo <= std::abs(hi) * 1e-12) {
    const double pad = std::max(std::abs(lo) * 0.05, 1e-9);
    lo -= pad, hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last; ++k) ticks.push_back(k * step);
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

absl::StatusOr<MetricsSeries> ReadMetricsJsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--metrics ", path, ": cannot read the file"));
  MetricsSeries out;
  std::string line;
  int line_number = 0;
  auto add = [](std::vector<MetricsPoint>* series, const nlohmann::json& j, double x,
                const char* key) {
    auto it = j.find(key);
    if (it != j.end() && it->is_number()) series->push_back({x, it->get<double>()});
  };
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("iteration") || !j["iteration"].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics ", path, " line ", line_number,
          ": expected a JSON object with a numeric \"iteration\" (a --metrics-jsonl line)"));
    }
    const double x = j["iteration"].get<double>();
    if (j.value("type", "train") == "validation") {
      add(&out.validation_loss, j, x, "lm_loss");
    } else {
      add(&out.lm_loss, j, x, "lm_loss");
      add(&out.tokens_per_second, j, x, "tokens_per_second");
      add(&out.bubble_percent, j, x, "bubble_percent");
    }
  }
  if (out.lm_loss.empty() && out.tokens_per_second.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics ", path, ": no training lines (\"type\": \"train\") to plot"));
  }
  return out;
}

std::string RenderMetricsSvg(const MetricsSeries& series, const std::string& title) {
  const std::vector<Panel> panels = {
      {"loss", "lm loss", "lm loss", {{"lm_loss", &series.lm_loss}}},
      {"throughput", "throughput", "tokens/s", {{"tokens_per_second", &series.tokens_per_second}}},
      {"bubble",
       "pipeline bubble (mean over stages)",
       "bubble %",
       {{"bubble_percent", &series.bubble_percent}}},
  };
  std::vector<Panel> with_validation = panels;
  if (!series.validation_loss.empty()) {
    with_validation[0].series.push_back({"validation_lm_loss", &series.validation_loss});
  }
  const double height = kTitleHeight + kPanelHeight * static_cast<double>(panels.size());
  std::string svg = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.2f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s</text>\n",
      kWidth, height, kWidth, height, kLeft, Escape(title));
  for (size_t i = 0; i < with_validation.size(); ++i) {
    AppendPanel(&svg, with_validation[i], kTitleHeight + kPanelHeight * static_cast<double>(i));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mxmaca::api
