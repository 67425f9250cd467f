// api/calibrate/cost_table.h: a measured kernel cost table — what `mxmaca calibrate`
// writes and `mxmaca simulate --cost-table FILE` reads instead of the roofline
// (docs/SIMULATOR.md, "Calibrated cost tables").
//
// The file is JSON (format "mxmaca-cost-table/1"):
//   {
//     "format": "mxmaca-cost-table/1",
//     "host": "...", "measured_at": "2026-11-30T10:00:00Z", "load_average_1m": 2.1,
//     "cores": 2,                  // hardware threads of the measuring machine
//     "threads_per_op": 1,         // OpenMP threads each measured op used
//     "precision": "fp32",         // fp32 | bf16 (the GEMMs' precision)
//     "gemm_gflops": 141.0,        // measured GEMM rate (reported as the "peak")
//     "ops": [                     // one entry per measured (op, shape, tp, concurrency)
//       {"op": "layer", "tp": 1, "sp": false, "concurrency": 1, "stage_layers": 2,
//        "work": [F, B, W], "seconds": [F, B, W], "shape": "b 2 s 256 h 256 ..."},
//       {"op": "embedding", ...}, {"op": "loss_head", ...}
//     ],
//     "optimizer_seconds_per_parameter": 2.1e-9,
//     "allreduce": {"ranks": 2, "latency_s": 4e-5, "seconds_per_byte": 1.1e-10},
//     "p2p": {"latency_s": 2e-5, "seconds_per_byte": 0},
//     "op_overhead_s": 1.5e-5,     // strand -> actor -> strand turnaround per op
//     "step_overhead_s": 1.2e-3    // fixed per iteration: coordinator, data, reports
//   }
// Units: seconds, bytes. "work" is the op's size measure at the measured shape (WorkOf):
// GEMM FLOPs for "layer" (F, B, W of one transformer layer on one TP rank) and
// "loss_head" (final norm + logits GEMM + cross-entropy), elements T h for "embedding".
//
// Lookup (OpSeconds): the entries of the op with the same tp, sp, stage depth ("layer"
// entries record how many layers the measured stage held, "stage_layers": a deeper stage
// has a larger working set and runs each layer slower on a CPU's caches; the measured
// depth nearest the stage's is used) and concurrency (the nearest measured concurrency not
// above the requested one, else the lowest) are sorted by work; the time at work x is interpolated linearly between the two measured points
// around x, and outside the measured range scaled in proportion to work from the nearest
// point (t = t_0 x / x_0). One point: proportional scaling.
#ifndef MXMACA_API_CALIBRATE_COST_TABLE_H_
#define MXMACA_API_CALIBRATE_COST_TABLE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::api {

// CostOpKind: what a cost entry measured.
enum class CostOpKind { kLayer, kEmbedding, kLossHead };

// CostOpName: "layer", "embedding", "loss_head".
const char* CostOpName(CostOpKind kind);

// OpShape: the dimensions an op's work depends on (Megatron names, whole-model sizes;
// the TP shard is taken inside WorkOf). b micro-batch, s sequence, h hidden, a heads,
// g query groups, d head dim, f ffn hidden, f1 fc1 width (2f with SwiGLU), V padded vocab,
// t TP size, sp sequence parallelism.
struct OpShape {
  int64_t b = 1, s = 1, h = 1, a = 1, g = 1, d = 1, f = 1, f1 = 1, V = 1, t = 1;
  bool sp = false;
  std::string ToString() const;
};

// WorkOf: the work measure of `kind` at `shape` on one TP rank, [F, B, W]:
//   layer: GEMM FLOPs (the step model's formulas, docs/SIMULATOR.md "Kernels"): linears
//     L = 2T h (a+2g) d / t + 2T a d h / t + 2T h f1 / t + 2T f h / t, causal core
//     attention A = 2 b (a/t) s s d; F = L + A, B = L + 2A, W = L (T = b s);
//   loss_head: the logits GEMM 2 T h V / t in each of F, B, W;
//   embedding: T h elements in each of F, B, W.
std::array<double, 3> WorkOf(CostOpKind kind, const OpShape& shape);

// CostEntry: one measurement.
struct CostEntry {
  CostOpKind op = CostOpKind::kLayer;
  int64_t tp = 1;
  bool sp = false;
  int concurrency = 1;  // copies of the op measured at once on separate threads
  int64_t stage_layers = 0;  // "layer": layers in the measured stage (0: not recorded)
  std::array<double, 3> work = {0, 0, 0};
  std::array<double, 3> seconds = {0, 0, 0};
  std::string shape;  // OpShape::ToString of the measured shape (information only)
};

// LinearCost: latency + bytes x seconds_per_byte.
struct LinearCost {
  double latency_s = 0;
  double seconds_per_byte = 0;
  double Seconds(double bytes) const { return latency_s + bytes * seconds_per_byte; }
};

// CostTable: the whole file.
struct CostTable {
  std::string host, measured_at;
  double load_average_1m = 0;
  int cores = 1;
  int threads_per_op = 1;
  std::string precision = "fp32";
  double gemm_gflops = 0;
  std::vector<CostEntry> ops;
  double optimizer_seconds_per_parameter = 0;
  int allreduce_ranks = 2;  // the group size the all-reduce was measured at
  LinearCost allreduce;     // in-process all-reduce of fp32 gradients
  LinearCost p2p;           // one pipeline hand-over (actor hop incl. message)
  double op_overhead_s = 0;
  double step_overhead_s = 0;

  // OpSeconds: [F, B, W] seconds of `kind` at `shape` with `concurrency` ops running at
  // once, for a stage of `stage_layers` layers (0: any; see the file comment). NotFound
  // naming the op, tp, sp when the table has no entry for them.
  absl::StatusOr<std::array<double, 3>> OpSeconds(CostOpKind kind, const OpShape& shape,
                                                  int concurrency,
                                                  int64_t stage_layers = 0) const;
};

// CostTableToJson: the file text (2-space indented JSON).
std::string CostTableToJson(const CostTable& table);

// ParseCostTable: the table from file text. InvalidArgument naming `source` and the field
// for malformed JSON, a wrong "format", a missing or mistyped field, negative times.
absl::StatusOr<CostTable> ParseCostTable(const std::string& text, const std::string& source);

// LoadCostTable / SaveCostTable: read / write `path` (NotFound / Internal naming it).
absl::StatusOr<CostTable> LoadCostTable(const std::string& path);
absl::Status SaveCostTable(const CostTable& table, const std::string& path);

}  // namespace mxmaca::api

#endif  // MXMACA_API_CALIBRATE_COST_TABLE_H_
