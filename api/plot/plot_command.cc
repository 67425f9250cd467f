// api/plot/plot_command.cc: RunPlot (metrics_plot.h).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/args/subcommand_flags.h"
#include "api/plot/metrics_plot.h"
#include "base/status_macros.h"

namespace mxmaca::api {

absl::Status RunPlot(const std::vector<std::string>& argv) {
  std::string metrics, output, title;
  std::vector<std::string> unknown;
  for (FlagCursor c(argv); c.Next();) {
    const std::string& flag = c.flag();
    std::string* target = flag == "--metrics"  ? &metrics
                          : flag == "--output" ? &output
                          : flag == "--title"  ? &title
                                               : nullptr;
    if (target == nullptr) {
      unknown.push_back(c.arg());
      continue;
    }
    absl::StatusOr<std::string> value = c.Value();
    if (!value.ok()) return value.status();
    *target = *value;
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown argument(s) ", absl::StrJoin(unknown, " "),
                     "; usage: mxmaca plot --metrics FILE.jsonl --output OUT.svg [--title TEXT]"));
  }
  if (metrics.empty() || output.empty()) {
    return absl::InvalidArgumentError(
        "usage: mxmaca plot --metrics FILE.jsonl --output OUT.svg [--title TEXT] (--metrics "
        "and --output are required)");
  }
  MXMACA_ASSIGN_OR_RETURN(MetricsSeries series, ReadMetricsJsonl(metrics));
  const std::string svg = RenderMetricsSvg(series, title.empty() ? metrics : title);
  std::FILE* f = std::fopen(output.c_str(), "wb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--output ", output, ": cannot create the file"));
  }
  const bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
  if (std::fclose(f) != 0 || !ok) {
    return absl::DataLossError(absl::StrCat("--output ", output, ": write failed"));
  }
  std::printf("mxmaca plot: wrote %s (%zu train points, %zu evaluations)\n", output.c_str(),
              series.lm_loss.size(), series.validation_loss.size());
  return absl::OkStatus();
}

}  // namespace mxmaca::api
