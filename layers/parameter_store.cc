// layers/parameter_store.cc
#include "layers/parameter_store.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/philox.h"

namespace mxmaca::layers {
namespace {

constexpr int64_t kAlignFloats = 16;  // 64 bytes

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

uint64_t ParameterStream(const std::string& name) {
  return kernels::MakeRngStream(Fnv1a64(name), 0x1A17, 0, 0);
}

namespace {

// NormalAt: std * Box-Muller(u1 = UniformAt(key, 2i), u2 = UniformAt(key, 2i + 1)).
float NormalAt(const kernels::RngKey& key, float std, int64_t index) {
  const double u1 = kernels::UniformAt(key, 2 * static_cast<uint64_t>(index));
  const double u2 = kernels::UniformAt(key, 2 * static_cast<uint64_t>(index) + 1);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(kTwoPi * u2);
  return static_cast<float>(static_cast<double>(std) * z);
}

}  // namespace

float InitialValue(uint64_t seed, const ParameterSpec& spec, int64_t index) {
  switch (spec.init) {
    case ParameterInit::kZeros:
      return 0.0f;
    case ParameterInit::kOnes:
      return 1.0f;
    case ParameterInit::kNormal:
      break;
  }
  return NormalAt({seed, ParameterStream(spec.name)}, spec.init_std, index);
}

absl::StatusOr<int> ParameterStore::Register(const ParameterSpec& spec) {
  return RegisterShard(spec, std::vector<int64_t>(spec.shape.size(), 0), spec.shape, 1);
}

absl::StatusOr<int> ParameterStore::RegisterShard(const ParameterSpec& spec,
                                                  const std::vector<int64_t>& shard_offset,
                                                  const std::vector<int64_t>& shard_shape,
                                                  int64_t shard_chunks) {
  if (finalized_) {
    return absl::FailedPreconditionError(
        absl::StrCat("ParameterStore::Register('", spec.name, "') after Finalize"));
  }
  if (index_.contains(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name, "' registered twice"));
  }
  for (int64_t d : spec.shape) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name, "': shape [",
                                                     absl::StrJoin(spec.shape, ", "),
                                                     "] has a dimension <= 0"));
    }
  }
  if (spec.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name, "': empty shape"));
  }
  const auto bad_shard = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", spec.name, "' [", absl::StrJoin(spec.shape, ", "),
                     "]: shard offset [", absl::StrJoin(shard_offset, ", "), "] shape [",
                     absl::StrJoin(shard_shape, ", "), "] chunks ", shard_chunks, ": ", why));
  };
  if (shard_offset.size() != spec.shape.size() || shard_shape.size() != spec.shape.size()) {
    return bad_shard("rank differs from the tensor's");
  }
  if (shard_chunks < 1 || spec.shape[0] % shard_chunks != 0 || shard_shape[0] % shard_chunks != 0) {
    return bad_shard("dim 0 is not divisible by the chunk count");
  }
  int64_t numel = 1;
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    const int64_t full = d == 0 ? spec.shape[0] / shard_chunks : spec.shape[d];
    const int64_t extent = d == 0 ? shard_shape[0] / shard_chunks : shard_shape[d];
    if (shard_offset[d] < 0 || extent <= 0 || shard_offset[d] + extent > full) {
      return bad_shard(absl::StrCat("dim ", d, " does not fit"));
    }
    numel *= shard_shape[d];
  }
  ParameterInfo info;
  info.spec = spec;
  info.shard_offset = shard_offset;
  info.shard_shape = shard_shape;
  info.shard_chunks = shard_chunks;
  info.numel = numel;
  int64_t end = 0;
  if (!infos_.empty()) end = infos_.back().arena_offset + infos_.back().numel;
  end = std::max(end, next_offset_);
  info.arena_offset = (end + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  const int id = static_cast<int>(infos_.size());
  infos_.push_back(std::move(info));
  index_[spec.name] = id;
  return id;
}

bool ParameterInfo::is_whole() const { return shard_chunks == 1 && shard_shape == spec.shape; }

int64_t ParameterInfo::FullIndex(int64_t local) const {
  const size_t n = shard_shape.size();
  int64_t full = 0, stride = 1;
  // Digits of `local` in shard_shape, last dim first; dim 0 carries the chunk.
  for (size_t d = n; d-- > 0;) {
    const int64_t i = local % shard_shape[d];
    local /= shard_shape[d];
    int64_t row = shard_offset[d] + i;
    if (d == 0 && shard_chunks > 1) {
      const int64_t per_chunk = shard_shape[0] / shard_chunks;
      row = (i / per_chunk) * (spec.shape[0] / shard_chunks) + shard_offset[0] + i % per_chunk;
    }
    full += row * stride;
    stride *= spec.shape[d];
  }
  return full;
}

std::vector<ShardBox> ShardBoxes(const ParameterInfo& info) {
  if (info.shard_chunks == 1) return {{info.shard_offset, info.shard_shape, 0}};
  std::vector<ShardBox> boxes;
  const int64_t local_rows = info.shard_shape[0] / info.shard_chunks;
  const int64_t full_rows = info.spec.shape[0] / info.shard_chunks;
  const int64_t box_numel = info.numel / info.shard_chunks;
  for (int64_t c = 0; c < info.shard_chunks; ++c) {
    ShardBox box{info.shard_offset, info.shard_shape, c * box_numel};
    box.offset[0] = c * full_rows + info.shard_offset[0];
    box.shape[0] = local_rows;
    boxes.push_back(std::move(box));
  }
  return boxes;
}

absl::StatusOr<int64_t> ParameterStore::AlignNextTo(int64_t multiple) {
  if (finalized_) return absl::FailedPreconditionError("ParameterStore: AlignNextTo after Finalize");
  if (multiple <= 0 || multiple % kAlignFloats != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ParameterStore: AlignNextTo(", multiple,
                                                   "): expected a positive multiple of ",
                                                   kAlignFloats));
  }
  int64_t end = 0;
  if (!infos_.empty()) end = infos_.back().arena_offset + infos_.back().numel;
  end = std::max(end, next_offset_);
  next_offset_ = (end + multiple - 1) / multiple * multiple;
  return next_offset_;
}

void ParameterStore::Finalize(int64_t pad_to_multiple_of) {
  if (pad_to_multiple_of <= 0 || pad_to_multiple_of % kAlignFloats != 0) {
    // A caller bug (the value comes from code, e.g. dp * 16), not bad input.
    std::fprintf(stderr,
                 "ParameterStore::Finalize: pad_to_multiple_of %lld is not a positive multiple "
                 "of %lld\n",
                 static_cast<long long>(pad_to_multiple_of), static_cast<long long>(kAlignFloats));
    std::abort();
  }
  int64_t end = 0;
  if (!infos_.empty()) end = infos_.back().arena_offset + infos_.back().numel;
  end = std::max(end, next_offset_);
  end = (end + pad_to_multiple_of - 1) / pad_to_multiple_of * pad_to_multiple_of;
  params_.assign(end, 0.0f);
  grads_.assign(end, 0.0f);
  finalized_ = true;
}

void ParameterStore::Initialize(uint64_t seed) {
  // Every element is a function of (seed, name, full index) alone, so the tensors are cut
  // into pieces of kPiece elements filled by all cores in any order: the same bits as one
  // thread (a 1.3B-parameter model takes minutes on one core).
  constexpr int64_t kPiece = int64_t{1} << 20;
  struct Piece {
    int tensor;
    int64_t begin, end;
  };
  std::vector<Piece> pieces;
  for (int i = 0; i < size(); ++i) {
    for (int64_t b = 0; b < infos_[i].numel; b += kPiece) {
      pieces.push_back({i, b, std::min(infos_[i].numel, b + kPiece)});
    }
  }
  auto fill = [&](const Piece& piece) {
    const ParameterInfo& info = infos_[piece.tensor];
    float* p = param(piece.tensor);
    if (info.spec.init != ParameterInit::kNormal) {
      std::fill(p + piece.begin, p + piece.end, InitialValue(seed, info.spec, 0));
      return;
    }
    const kernels::RngKey key{seed, ParameterStream(info.spec.name)};
    for (int64_t e = piece.begin; e < piece.end; ++e) {
      // Shard element e is full element FullIndex(e): the slice of the full tensor.
      p[e] = NormalAt(key, info.spec.init_std, info.is_whole() ? e : info.FullIndex(e));
    }
  };
  const int threads = static_cast<int>(std::min<size_t>(
      pieces.size() / 4, std::max(1u, std::thread::hardware_concurrency())));
  if (threads <= 1) {
    for (const Piece& piece : pieces) fill(piece);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t k = next++; k < pieces.size(); k = next++) fill(pieces[k]);
    });
  }
  for (std::thread& th : pool) th.join();
}

void ParameterStore::ZeroGrads() {
  if (!grads_.empty()) std::memset(grads_.data(), 0, grads_.size() * sizeof(float));
}

absl::StatusOr<int> ParameterStore::Index(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("no parameter named '", name, "'"));
  }
  return it->second;
}

int64_t ParameterStore::num_elements() const {
  int64_t n = 0;
  for (const ParameterInfo& info : infos_) n += info.numel;
  return n;
}

std::vector<OptimizerTensor> ParameterStore::OptimizerTensors() {
  std::vector<OptimizerTensor> out;
  for (int i = 0; i < size(); ++i) {
    out.push_back({infos_[i].spec.name, param(i), grad(i), infos_[i].numel,
                   infos_[i].spec.weight_decay, /*flat_offset=*/0,
                   IsEmbeddingOrOutputParameter(infos_[i].spec.name)});
  }
  return out;
}

std::vector<GradSpan> ParameterStore::GradSpans() {
  std::vector<GradSpan> out;
  for (int i = 0; i < size(); ++i) out.push_back({grad(i), infos_[i].numel});
  return out;
}

}  // namespace mxmaca::layers
