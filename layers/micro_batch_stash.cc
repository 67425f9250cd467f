// layers/micro_batch_stash.cc
#include "layers/micro_batch_stash.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>

namespace mxmaca::layers {

namespace {
constexpr std::align_val_t kBlockAlign{64};
}  // namespace

void BoundOverflow(int64_t requested, int64_t capacity) {
  std::fprintf(stderr,
               "internal error: a bound stash buffer of %lld elements was asked for %lld "
               "(the slot was planned smaller than the layer's stash)\n",
               static_cast<long long>(capacity), static_cast<long long>(requested));
  std::abort();
}

void* MemoryTracker::NewBlock(int64_t bytes) {
  return ::operator new(static_cast<size_t>(bytes), kBlockAlign);
}

void MemoryTracker::DeleteBlock(void* block) { ::operator delete(block, kBlockAlign); }

MemoryTracker::~MemoryTracker() {
  for (auto& [capacity, block] : cache_) DeleteBlock(block);
}

void MemoryTracker::SetCap(int64_t cap_bytes, std::string shard) {
  cap_bytes_ = std::max<int64_t>(cap_bytes, 0);
  shard_ = std::move(shard);
}

void MemoryTracker::CheckCap(int64_t bytes) {
  if (!cap_error_.ok() || bytes <= cap_bytes_ - live_) return;
  std::string activity = phase_;
  if (layer_ >= 0) activity += " of layer " + std::to_string(layer_);
  if (micro_batch_ >= 0) activity += " of micro-batch " + std::to_string(micro_batch_);
  cap_error_ = absl::ResourceExhaustedError(
      "out of memory: shard " + shard_ + ": allocating " + std::to_string(bytes) + " bytes for " +
      activity + " would use " + std::to_string(live_ + bytes) + " of the " +
      std::to_string(cap_bytes_) + "-byte cap (--memory-cap-per-shard; " +
      std::to_string(live_) + " bytes already held)");
}

void* MemoryTracker::Acquire(int64_t bytes, int64_t* capacity) {
  if (cap_bytes_ > 0) CheckCap(bytes);
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  auto it = cache_.lower_bound(bytes);
  if (it != cache_.end() && it->first <= 2 * bytes) {
    void* block = it->second;
    *capacity = it->first;
    cached_ -= it->first;
    cache_.erase(it);
    return block;
  }
  *capacity = bytes;
  return NewBlock(bytes);
}

void MemoryTracker::Return(void* block, int64_t bytes, int64_t capacity) {
  live_ -= bytes;
  if (cached_ + capacity <= peak_) {
    cache_.emplace(capacity, block);
    cached_ += capacity;
  } else {
    DeleteBlock(block);
  }
}

int64_t LayerStash::bytes() const {
  return input.bytes() + ln1_out.bytes() + ln1_mean.bytes() + ln1_rstd.bytes() + q.bytes() +
         k.bytes() + v.bytes() + probs.bytes() + context.bytes() + residual2.bytes() +
         ln2_out.bytes() + ln2_mean.bytes() + ln2_rstd.bytes() + fc1_out.bytes() + act_out.bytes() +
         d_qkv.bytes() + d_ln1_out.bytes() + d_proj.bytes() + d_ln2_out.bytes() + d_fc1.bytes() +
         d_fc2.bytes() + moe_bytes.bytes() + q_pre.bytes() + k_pre.bytes() + q_mean.bytes() +
         q_rstd.bytes() + k_mean.bytes() + k_rstd.bytes() + d_q_norm.bytes() +
         d_k_norm.bytes();
}

void LayerStash::FreeAllButInput() {
  for (StashBuffer<float>* buf :
       {&ln1_out, &ln1_mean,  &ln1_rstd, &q,         &k,        &v,       &probs,
        &context, &residual2, &ln2_out,  &ln2_mean,  &ln2_rstd, &fc1_out, &act_out,
        &d_qkv,   &d_ln1_out, &d_proj,   &d_ln2_out, &d_fc1,    &d_fc2,
        &q_pre,   &k_pre,     &q_mean,   &q_rstd,    &k_mean,   &k_rstd,  &d_q_norm,
        &d_k_norm}) {
    buf->Free();
  }
  moe.reset();
  moe_bytes.Set(nullptr, 0);
}

void LayerStash::FreeAll() {
  FreeAllButInput();
  input.Free();
}

int64_t MicroBatchStash::bytes() const {
  int64_t n = tokens.bytes() + position_ids.bytes() + doc_start.bytes() + labels.bytes() +
              loss_mask.bytes() + d_embedding.bytes() + final_input.bytes() + lnf_out.bytes() +
              lnf_mean.bytes() + lnf_rstd.bytes() + logits.bytes() + lse.bytes() +
              d_lnf_out.bytes() + pending_grads.bytes();
  for (const LayerStash& l : layers) n += l.bytes();
  return n;
}

}  // namespace mxmaca::layers
