// tests/bench/pipeline_trace_stats.h: reads a --trace-file (actors/trace.h, Chrome trace
// format) of a pipeline job back into ops and measures the runtime's per-message costs
// from it, for the pipeline benchmarks.
//
// Every traced op is one span on its rank's track: ts = when the op started on the strand
// (µs), dur = the op's own time. For a consumer op with an input from another stage — F on
// virtual stage k > 0 (the activation of k - 1), B on k < K - 1 (the gradient of k + 1) —
// the producer is the same micro-batch's F / B on the neighbouring virtual stage:
//   hop: consumer start - producer end, counted when the consumer was IDLE when the
//        producer ended (its previous op had ended by then): the whole runtime path of one
//        message — OpFinished to the producer's actor, ActivationMessage to the consumer's
//        actor, the post to its strand and a pool thread picking it up;
//   turnaround: consumer start - the consumer's previous op end, when the input was
//        already there (and for ops with no input from another stage): the per-op cost of
//        the strand -> actor -> strand round trip between back-to-back ops.
#ifndef MXMACA_TESTS_BENCH_PIPELINE_TRACE_STATS_H_
#define MXMACA_TESTS_BENCH_PIPELINE_TRACE_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::bench {

// TracedOp: one compute span of the trace.
struct TracedOp {
  int32_t rank = 0;  // the track (global rank)
  int64_t iteration = 0;
  scheduler::OpKind kind = scheduler::OpKind::kForward;
  int32_t microbatch = 0;
  int32_t chunk = 0;
  int64_t start_us = 0;
  int64_t duration_us = 0;
  int64_t end_us() const { return start_us + duration_us; }
};

// LoadTracedOps: the "compute" spans of the trace at `path` ("F3", "B3.c1", ...), in file
// order. Errors: unreadable file or JSON, a span name that is not an op (naming it).
absl::StatusOr<std::vector<TracedOp>> LoadTracedOps(const std::string& path);

// HopSamples: per-message and per-op runtime costs (µs), see the file comment.
struct HopSamples {
  std::vector<double> hop_us;
  std::vector<double> turnaround_us;
};

// MeasureHops: the samples of every op of iterations >= first_iteration, for a job of
// pipeline size p, data-parallel size dp and v chunks per stage (rank = pipeline rank *
// dp + DP rank). Ops whose producer is missing from the trace are skipped.
HopSamples MeasureHops(const std::vector<TracedOp>& ops, int32_t p, int32_t dp, int32_t v,
                       int64_t first_iteration);

// IterationBusy: per iteration >= first_iteration (ascending), the mean over ranks of the
// summed op durations (seconds) and the iteration's makespan from its first op start to
// its last op end (seconds).
struct IterationBusy {
  int64_t iteration = 0;
  double mean_busy_seconds = 0;
  double makespan_seconds = 0;
};
std::vector<IterationBusy> BusyPerIteration(const std::vector<TracedOp>& ops, int32_t ranks,
                                            int64_t first_iteration);

// Percentile: the q-quantile (0..1, nearest rank) of `v`; NaN when empty.
double Percentile(std::vector<double> v, double q);
// Mean: NaN when empty.
double Mean(const std::vector<double>& v);

}  // namespace mxmaca::bench

#endif  // MXMACA_TESTS_BENCH_PIPELINE_TRACE_STATS_H_
