// api/plot/metrics_plot.h: `mxmaca plot`: a --metrics-jsonl file as an SVG of three
// panels (lm loss, throughput in tokens/s, mean pipeline bubble %), against iteration.
//
// The SVG is written by hand: each panel is a <g class="panel" id="loss|throughput|bubble">
// with a frame, x and y axes whose ticks sit at "nice" values (1, 2 or 5 x 10^k apart;
// labels <text class="xtick"> / <text class="ytick"> holding the value, at the tick's
// position), axis labels, a title, and one <polyline class="series" data-series="NAME">
// per series (train lm_loss and, when the file has evaluations, validation lm_loss;
// tokens_per_second; bubble_percent). Points are in SVG user units, two decimals. A panel
// without data (e.g. bubble with one pipeline stage) says so in its frame instead.
#ifndef MXMACA_API_PLOT_METRICS_PLOT_H_
#define MXMACA_API_PLOT_METRICS_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::api {

// MetricsPoint: one point of a series (x = iteration).
struct MetricsPoint {
  double x = 0.0;
  double y = 0.0;
};

// MetricsSeries: the series a metrics file holds (empty where it has none).
struct MetricsSeries {
  std::vector<MetricsPoint> lm_loss;            // "type": "train" objects, "lm_loss"
  std::vector<MetricsPoint> validation_loss;    // "type": "validation" objects, "lm_loss"
  std::vector<MetricsPoint> tokens_per_second;  // train, "tokens_per_second"
  std::vector<MetricsPoint> bubble_percent;     // train, "bubble_percent"
};

// ReadMetricsJsonl: the series of a --metrics-jsonl file (actors/metrics/metrics_jsonl.h);
// null values (NaN in the run) and missing keys are left out of their series. Errors: the
// file cannot be read (NotFound), a line is not a JSON object with a numeric "iteration"
// (InvalidArgument naming the line number), or no train object (InvalidArgument).
absl::StatusOr<MetricsSeries> ReadMetricsJsonl(const std::string& path);

// RenderMetricsSvg: the three-panel SVG (above) of `series`, titled with `title`.
std::string RenderMetricsSvg(const MetricsSeries& series, const std::string& title);

// NiceTicks: tick values covering [lo, hi]: a step of 1, 2 or 5 x 10^k giving about
// `target` intervals, from floor(lo / step) x step to ceil(hi / step) x step. An empty or
// zero-width range is widened around its value first.
std::vector<double> NiceTicks(double lo, double hi, int target = 5);

// RunPlot: `mxmaca plot --metrics FILE --output OUT.svg [--title TEXT]`. Errors: unknown or
// missing flags (InvalidArgument naming them), ReadMetricsJsonl's, an output that cannot be
// written.
absl::Status RunPlot(const std::vector<std::string>& argv);

}  // namespace mxmaca::api

#endif  // MXMACA_API_PLOT_METRICS_PLOT_H_
