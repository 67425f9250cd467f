// actors/data_actor.h: DataActor, which turns the sampled dataset into micro-batch
// messages.
//
// For each ProduceMicroBatches request it reads the global batch's samples in Megatron's
// order (megatron/legacy/data/data_samplers.py MegatronPretrainingSampler: consecutive
// samples from the consumed-samples position, taken dp·b at a time, DP rank r getting
// the r-th b of each group; so micro-batch k of replica r holds samples
// [first + (k·dp + r)·b, first + (k·dp + r + 1)·b)), builds tokens / labels / loss mask /
// position ids / document starts (data::BuildGptMicroBatch) and sends each micro-batch,
// as one shared, immutable payload, to the stages of replica r that read data: the first
// (which embeds the tokens), the last (labels and mask) and, with
// --reset-attention-mask, every stage (document starts).
#ifndef MXMACA_ACTORS_DATA_ACTOR_H_
#define MXMACA_ACTORS_DATA_ACTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/messages.h"
#include "data/gpt_dataset.h"

namespace mxmaca::actors {

// DataActorConfig: datasets (valid may be null when there is no validation split).
struct DataActorConfig {
  std::shared_ptr<const data::SampleDataset> train;
  std::shared_ptr<const data::SampleDataset> valid;
  int64_t micro_batch_size = 1;
  int64_t seq_length = 0;
  int32_t eod = 0;
  bool eod_mask_loss = false;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  // recipients[r]: the stage actors of DP replica r that receive its micro-batches
  // (each once); recipients.size() is the data-parallel size.
  std::vector<std::vector<StageActorHandle>> recipients;
  CoordinatorActor coordinator;
};

// SpawnDataActor: spawns the actor in `system`. A sample index past the end of its split
// is reported to the coordinator as DataFailed naming the split, index and size.
DataActorHandle SpawnDataActor(caf::actor_system& system, DataActorConfig config);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_DATA_ACTOR_H_
