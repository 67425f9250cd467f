// actors/data_actor.cc: see data_actor.h.
#include "actors/data_actor.h"

#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/strings/str_cat.h"
#include "data/gpt_batch.h"

namespace mxmaca::actors {
namespace {

struct DataState {
  DataActorConfig cfg;
  std::vector<int32_t> samples;  // reused buffer [b, s + 1]
};

using DataPointer = DataActorHandle::stateful_pointer<DataState>;

DataActorHandle::behavior_type DataBehavior(DataPointer self, DataActorConfig config) {
  self->state.cfg = std::move(config);
  return {
      [=](const ProduceMicroBatches& req) {
        auto& st = self->state;
        const DataActorConfig& c = st.cfg;
        const data::SampleDataset* ds = req.eval ? c.valid.get() : c.train.get();
        const char* split = req.eval ? "valid" : "train";
        if (ds == nullptr) {
          self->send(c.coordinator, DataFailed{req.iteration, absl::StrCat("no ", split, " split")});
          return;
        }
        const int64_t b = c.micro_batch_size, len = c.seq_length + 1;
        const int64_t dp = static_cast<int64_t>(c.recipients.size());
        st.samples.resize(static_cast<size_t>(b * len));
        for (int32_t k = 0; k < req.num_microbatches; ++k) {
          for (int64_t r = 0; r < dp; ++r) {
            for (int64_t i = 0; i < b; ++i) {
              const int64_t index = req.first_sample + (k * dp + r) * b + i;
              if (index >= ds->size()) {
                self->send(c.coordinator,
                           DataFailed{req.iteration,
                                      absl::StrCat(split, " sample ", index,
                                                   " requested but the ", split, " split has ",
                                                   ds->size(), " samples")});
                return;
              }
              absl::Status s =
                  ds->GetSample(index, absl::MakeSpan(st.samples.data() + i * len, len));
              if (!s.ok()) {
                self->send(c.coordinator,
                           DataFailed{req.iteration,
                                      absl::StrCat(split, " sample ", index, ": ", s.message())});
                return;
              }
            }
            auto batch = std::make_shared<const data::GptMicroBatch>(data::BuildGptMicroBatch(
                st.samples, b, c.seq_length, c.eod, c.eod_mask_loss, c.reset_position_ids,
                c.reset_attention_mask));
            const MicroBatchData msg{req.iteration, k, req.eval, batch};
            for (const StageActorHandle& to : c.recipients[r]) self->send(to, msg);
          }
        }
      },
  };
}

}  // namespace

DataActorHandle SpawnDataActor(caf::actor_system& system, DataActorConfig config) {
  return system.spawn(DataBehavior, std::move(config));
}

}  // namespace mxmaca::actors
