// scheduler/schedule_validator.cc: see schedule_validator.h.
#include "scheduler/schedule_validator.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::scheduler {
namespace {

// One message on a channel: the sender's op and its index, and the op that consumes it.
struct Message {
  PipelineOp consumer;  // F or B on the receiving virtual stage
  int32_t sender_op = 0;
  PipelineOp sender;
};

// Channel key: (sender stage, receiver stage, direction 0 = activations, 1 = gradients).
using Channel = std::tuple<int32_t, int32_t, int32_t>;

// Checks 2-5 of ValidateSchedule for one stage.
absl::Status CheckStage(const PipelineSchedule& schedule, int32_t stage) {
  const int32_t v = schedule.num_chunks, m = schedule.num_microbatches;
  const StageSchedule& ops = schedule.stages[stage];
  // position[(kind * v + chunk) * m + mb]: op index in the list, -1 when absent.
  std::vector<int64_t> position(3 * static_cast<size_t>(v) * m, -1);
  auto slot = [&](int kind, int32_t chunk, int32_t mb) -> int64_t& {
    return position[(static_cast<size_t>(kind) * v + chunk) * m + mb];
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const PipelineOp& op = ops[i];
    const int kind = static_cast<int>(op.kind);
    if (kind < 0 || kind > 2 || op.microbatch < 0 || op.microbatch >= m || op.chunk < 0 ||
        op.chunk >= v) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", stage, ": op ", i, " (kind ", kind, ", micro-batch ", op.microbatch, ", chunk ",
          op.chunk, ") is out of range: micro-batch in [0, ", m, "), chunk in [0, ", v, ")"));
    }
    if (schedule.forward_only && op.kind != OpKind::kForward) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", stage, ": ", ToString(op), " (op ",
                                                     i, ") in a forward-only schedule"));
    }
    int64_t& at = slot(kind, op.chunk, op.microbatch);
    if (at >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", stage, ": duplicate ", ToString(op), " at ops ", at, " and ", i));
    }
    at = static_cast<int64_t>(i);
  }
  const int kinds = schedule.forward_only ? 1 : 3;
  for (int32_t chunk = 0; chunk < v; ++chunk) {
    for (int32_t mb = 0; mb < m; ++mb) {
      for (int kind = 0; kind < kinds; ++kind) {
        if (slot(kind, chunk, mb) < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("stage ", stage, ": missing ",
                           ToString(PipelineOp{static_cast<OpKind>(kind), mb, chunk}),
                           schedule.forward_only
                               ? " (a forward-only schedule needs one F per micro-batch and chunk)"
                               : " (each micro-batch and chunk needs one F, one B and one W)"));
        }
      }
      for (int kind = 1; kind < kinds; ++kind) {
        const int64_t before = slot(kind - 1, chunk, mb), after = slot(kind, chunk, mb);
        if (after < before) {
          return absl::InvalidArgumentError(absl::StrCat(
              "stage ", stage, ": ", ToString(PipelineOp{static_cast<OpKind>(kind), mb, chunk}),
              " (op ", after, ") before ",
              ToString(PipelineOp{static_cast<OpKind>(kind - 1), mb, chunk}), " (op ", before,
              ")"));
        }
      }
    }
  }
  return absl::OkStatus();
}

// Check 6: FIFO order on every channel.
absl::Status CheckChannels(const PipelineSchedule& schedule) {
  const int32_t p = schedule.num_stages;
  const int32_t num_virtual_stages = p * schedule.num_chunks;
  std::map<Channel, std::vector<Message>> sent;
  std::map<Channel, std::vector<std::pair<PipelineOp, int32_t>>> consumed;
  for (int32_t s = 0; s < p; ++s) {
    const StageSchedule& ops = schedule.stages[s];
    for (size_t i = 0; i < ops.size(); ++i) {
      const PipelineOp& op = ops[i];
      const int32_t k = VirtualStage(schedule, op.chunk, s);
      const int32_t index = static_cast<int32_t>(i);
      if (op.kind == OpKind::kForward) {
        if (k + 1 < num_virtual_stages) {
          const StageChunk to = StageChunkOf(k + 1, p, schedule.placement);
          sent[{s, to.stage, 0}].push_back(
              {PipelineOp{OpKind::kForward, op.microbatch, to.chunk}, index, op});
        }
        if (k > 0) {
          consumed[{StageChunkOf(k - 1, p, schedule.placement).stage, s, 0}].push_back({op, index});
        }
      } else if (op.kind == OpKind::kBackwardInput) {
        if (k > 0) {
          const StageChunk to = StageChunkOf(k - 1, p, schedule.placement);
          sent[{s, to.stage, 1}].push_back(
              {PipelineOp{OpKind::kBackwardInput, op.microbatch, to.chunk}, index, op});
        }
        if (k + 1 < num_virtual_stages) {
          consumed[{StageChunkOf(k + 1, p, schedule.placement).stage, s, 1}].push_back({op, index});
        }
      }
    }
  }
  for (const auto& [channel, messages] : sent) {
    const auto& [from, to, direction] = channel;
    const auto& wanted = consumed[channel];
    const std::string name = absl::StrCat("channel stage ", from, " -> stage ", to,
                                          direction == 0 ? " (activations)" : " (gradients)");
    for (size_t n = 0; n < messages.size() && n < wanted.size(); ++n) {
      if (messages[n].consumer == wanted[n].first) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "crossed sends on ", name, ": message ", n, " sent is ", ToString(messages[n].sender),
          "'s output (stage ", from, " op ", messages[n].sender_op, ") but stage ", to,
          " consumes ", ToString(wanted[n].first), " (op ", wanted[n].second,
          ") first; a channel delivers in send order"));
    }
    // Completeness (checked before) makes the counts equal; guard anyway.
    if (messages.size() != wanted.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", messages.size(), " messages sent but ", wanted.size(), " consumed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSchedule(const PipelineSchedule& schedule) {
  absl::Status status =
      CheckScheduleDimensions(schedule.name.empty() ? "schedule" : schedule.name,
                              schedule.num_stages, schedule.num_chunks, schedule.num_microbatches);
  if (!status.ok()) return status;
  if (schedule.stages.size() != static_cast<size_t>(schedule.num_stages)) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule has ", schedule.stages.size(),
                     " stage lists, expected p = ", schedule.num_stages));
  }
  for (int32_t s = 0; s < schedule.num_stages; ++s) {
    status = CheckStage(schedule, s);
    if (!status.ok()) return status;
  }
  status = CheckChannels(schedule);
  if (!status.ok()) return status;
  absl::StatusOr<ScheduleTiming> replay =
      SimulateSchedule(schedule, OpCosts::Uniform(schedule.num_stages, 1, 1, 1));
  return replay.status();
}

}  // namespace mxmaca::scheduler
