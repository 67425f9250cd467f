// transport/ucx/collective_plan.cc: the algorithms of the UCX backend as step programs.
#include "transport/ucx/collective_plan.h"

#include <algorithm>
#include <cstring>

namespace mxmaca::transport::ucx {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Add: appends a transfer unless it moves nothing.
void Add(std::vector<Xfer>* xfers, int peer, const void* buffer, int64_t bytes) {
  if (bytes <= 0) return;
  Xfer x;
  x.peer = peer;
  x.buffer = const_cast<void*>(buffer);
  x.bytes = bytes;
  xfers->push_back(x);
}

void Copy(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(bytes));
}

// AddRingAllGather: n-1 steps; `base` holds n chunks at byte offsets off[k] (lengths
// len[k]); this rank's chunk is in place. Step s sends chunk (me - s) to the right and
// receives chunk (me - s - 1) from the left.
void AddRingAllGather(const Members& m, char* base, const std::vector<int64_t>& off,
                      const std::vector<int64_t>& len, Plan* plan) {
  const int n = m.size();
  const int right = m.ranks[Mod(m.me + 1, n)];
  const int left = m.ranks[Mod(m.me - 1, n)];
  for (int s = 0; s < n - 1; ++s) {
    Step step;
    const int cs = Mod(m.me - s, n);
    const int cr = Mod(m.me - s - 1, n);
    Add(&step.sends, right, base + off[cs], len[cs]);
    Add(&step.recvs, left, base + off[cr], len[cr]);
    plan->steps.push_back(std::move(step));
  }
}

// AddPairwiseAllGather: one step; every member sends its chunk to every other member.
void AddPairwiseAllGather(const Members& m, char* base, const std::vector<int64_t>& off,
                          const std::vector<int64_t>& len, Plan* plan) {
  Step step;
  for (int k = 0; k < m.size(); ++k) {
    if (k == m.me) continue;
    Add(&step.sends, m.ranks[k], base + off[m.me], len[m.me]);
    Add(&step.recvs, m.ranks[k], base + off[k], len[k]);
  }
  plan->steps.push_back(std::move(step));
}

// AddPairwiseReduceScatter: one step; member k receives chunk k (offset off[k], length
// len[k] floats of `send`) from everyone and sums it in rank order into `out`.
void AddPairwiseReduceScatter(const Members& m, const float* send, const Chunks& c, float* out,
                              Plan* plan) {
  const int n = m.size();
  const int64_t mine = c.length[m.me];
  float* slots = reinterpret_cast<float*>(plan->Scratch(std::max<int64_t>(1, mine) * n * 4));
  Step step;
  for (int k = 0; k < n; ++k) {
    if (k == m.me) continue;
    Add(&step.sends, m.ranks[k], send + c.offset[k], c.length[k] * 4);
    Add(&step.recvs, m.ranks[k], slots + k * mine, mine * 4);
  }
  const int me = m.me;
  const float* own = send + c.offset[me];
  step.after = [n, me, mine, own, slots, out]() {
    std::vector<const float*> src(n);
    for (int r = 0; r < n; ++r) src[r] = r == me ? own : slots + r * mine;
    SumInRankOrder(src, mine, out);
    return absl::OkStatus();
  };
  plan->steps.push_back(std::move(step));
}

// AddRingReduceScatter: n-1 steps. Step s sends the partial of chunk (me - s - 1) (the
// raw input at s = 0) to the right and receives the partial of chunk (me - s - 2) from
// the left, then partial = received + own input; the last step writes chunk `me` to `out`.
void AddRingReduceScatter(const Members& m, const float* send, const Chunks& c, float* out,
                          Plan* plan) {
  const int n = m.size();
  const int64_t longest = *std::max_element(c.length.begin(), c.length.end());
  float* received = reinterpret_cast<float*>(plan->Scratch(std::max<int64_t>(1, longest) * 4));
  float* partial = reinterpret_cast<float*>(plan->Scratch(std::max<int64_t>(1, longest) * 4));
  const int right = m.ranks[Mod(m.me + 1, n)];
  const int left = m.ranks[Mod(m.me - 1, n)];
  for (int s = 0; s < n - 1; ++s) {
    Step step;
    const int cs = Mod(m.me - s - 1, n);
    const int cr = Mod(m.me - s - 2, n);
    Add(&step.sends, right, s == 0 ? send + c.offset[cs] : partial, c.length[cs] * 4);
    Add(&step.recvs, left, received, c.length[cr] * 4);
    float* dst = s == n - 2 ? out : partial;
    const float* own = send + c.offset[cr];
    const int64_t length = c.length[cr];
    step.after = [dst, received, own, length]() {
      for (int64_t i = 0; i < length; ++i) dst[i] = received[i] + own[i];
      return absl::OkStatus();
    };
    plan->steps.push_back(std::move(step));
  }
}

std::vector<int64_t> Scaled(const std::vector<int64_t>& v, int64_t k) {
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] * k;
  return out;
}

}  // namespace

std::unique_ptr<char[]> ScratchPool::Get(int64_t bytes, int64_t* capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.lower_bound(bytes);
    // Reuse a buffer no more than twice the size asked for.
    if (it != idle_.end() && it->first <= 2 * bytes) {
      *capacity = it->first;
      idle_bytes_ -= it->first;
      std::unique_ptr<char[]> out = std::move(it->second);
      idle_.erase(it);
      return out;
    }
  }
  *capacity = bytes;
  // Not zeroed: every byte is written by a receive or a reduction before it is read.
  return std::unique_ptr<char[]>(new char[static_cast<size_t>(bytes)]);
}

void ScratchPool::Put(std::unique_ptr<char[]> buffer, int64_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_bytes_ + capacity > max_bytes_) return;  // frees it
  idle_bytes_ += capacity;
  idle_.emplace(capacity, std::move(buffer));
}

Plan::~Plan() {
  if (pool == nullptr) return;
  for (auto& [buffer, capacity] : scratch) pool->Put(std::move(buffer), capacity);
}

char* Plan::Scratch(int64_t bytes) {
  bytes = std::max<int64_t>(1, bytes);
  int64_t capacity = bytes;
  std::unique_ptr<char[]> buffer =
      pool != nullptr ? pool->Get(bytes, &capacity)
                      : std::unique_ptr<char[]>(new char[static_cast<size_t>(bytes)]);
  scratch.emplace_back(std::move(buffer), capacity);
  return scratch.back().first.get();
}

Chunks SplitEvenly(int64_t count, int n) {
  Chunks c;
  c.offset.resize(n);
  c.length.resize(n);
  int64_t at = 0;
  for (int k = 0; k < n; ++k) {
    c.offset[k] = at;
    c.length[k] = count / n + (k < count % n ? 1 : 0);
    at += c.length[k];
  }
  return c;
}

void SumInRankOrder(const std::vector<const float*>& src, int64_t length, float* out) {
  constexpr int64_t kBlock = 512;
  float acc[kBlock];
  const size_t n = src.size();
  for (int64_t b = 0; b < length; b += kBlock) {
    const int64_t m = std::min(kBlock, length - b);
    const float* x0 = src[0] + b;
    for (int64_t i = 0; i < m; ++i) acc[i] = x0[i];
    for (size_t r = 1; r < n; ++r) {
      const float* x = src[r] + b;
      for (int64_t i = 0; i < m; ++i) acc[i] += x[i];
    }
    std::memcpy(out + b, acc, static_cast<size_t>(m) * sizeof(float));
  }
}

void BuildAllReduceRankOrder(const Members& m, const float* send, float* recv, int64_t count,
                             Plan* plan) {
  const int n = m.size();
  if (n == 1) {
    Step step;
    step.after = [send, recv, count]() {
      Copy(recv, send, count * 4);
      return absl::OkStatus();
    };
    plan->steps.push_back(std::move(step));
    return;
  }
  const Chunks c = SplitEvenly(count, n);
  AddPairwiseReduceScatter(m, send, c, recv + c.offset[m.me], plan);
  AddPairwiseAllGather(m, reinterpret_cast<char*>(recv), Scaled(c.offset, 4), Scaled(c.length, 4),
                       plan);
}

void BuildAllReduceRing(const Members& m, const float* send, float* recv, int64_t count,
                        Plan* plan) {
  const int n = m.size();
  if (n <= 2) {
    // For n <= 2 the ring and rank order sum the same two values (commutative): use the
    // pairwise plan (one step instead of two).
    BuildAllReduceRankOrder(m, send, recv, count, plan);
    return;
  }
  const Chunks c = SplitEvenly(count, n);
  AddRingReduceScatter(m, send, c, recv + c.offset[m.me], plan);
  AddRingAllGather(m, reinterpret_cast<char*>(recv), Scaled(c.offset, 4), Scaled(c.length, 4),
                   plan);
}

void BuildReduceScatterRankOrder(const Members& m, const float* send, float* recv,
                                 int64_t recv_count, Plan* plan) {
  const int n = m.size();
  Chunks c;
  for (int k = 0; k < n; ++k) {
    c.offset.push_back(k * recv_count);
    c.length.push_back(recv_count);
  }
  if (n == 1) {
    Step step;
    step.after = [send, recv, recv_count]() {
      Copy(recv, send, recv_count * 4);
      return absl::OkStatus();
    };
    plan->steps.push_back(std::move(step));
    return;
  }
  AddPairwiseReduceScatter(m, send, c, recv, plan);
}

void BuildReduceScatterRing(const Members& m, const float* send, float* recv, int64_t recv_count,
                            Plan* plan) {
  const int n = m.size();
  if (n <= 2) {
    BuildReduceScatterRankOrder(m, send, recv, recv_count, plan);
    return;
  }
  Chunks c;
  for (int k = 0; k < n; ++k) {
    c.offset.push_back(k * recv_count);
    c.length.push_back(recv_count);
  }
  AddRingReduceScatter(m, send, c, recv, plan);
}

void BuildAllGather(const Members& m, const void* send, void* recv, int64_t bytes, bool ring,
                    Plan* plan) {
  const int n = m.size();
  char* base = static_cast<char*>(recv);
  std::vector<int64_t> off(n), len(n, bytes);
  for (int k = 0; k < n; ++k) off[k] = k * bytes;
  char* mine = base + off[m.me];
  const bool use_ring = ring && n > 2;
  Step first;  // copies this rank's block into place before anything is sent
  if (!use_ring) {
    // Pairwise: send straight from `send` (no need to wait for the local copy).
    for (int k = 0; k < n; ++k) {
      if (k == m.me) continue;
      Add(&first.sends, m.ranks[k], send, bytes);
      Add(&first.recvs, m.ranks[k], base + off[k], bytes);
    }
    first.after = [mine, send, bytes]() {
      Copy(mine, send, bytes);
      return absl::OkStatus();
    };
    plan->steps.push_back(std::move(first));
    return;
  }
  first.after = [mine, send, bytes]() {
    Copy(mine, send, bytes);
    return absl::OkStatus();
  };
  plan->steps.push_back(std::move(first));
  AddRingAllGather(m, base, off, len, plan);
}

void BuildBroadcast(const Members& m, int root, void* buffer, int64_t bytes, bool ring,
                    Plan* plan) {
  const int n = m.size();
  char* base = static_cast<char*>(buffer);
  if (!ring || n <= 2) {
    Step step;
    if (m.me == root) {
      for (int k = 0; k < n; ++k) {
        if (k != root) Add(&step.sends, m.ranks[k], base, bytes);
      }
    } else {
      Add(&step.recvs, m.ranks[root], base, bytes);
    }
    plan->steps.push_back(std::move(step));
    return;
  }
  // Scatter: member k gets chunk k from the root; then a ring all-gather of the chunks.
  const Chunks c = SplitEvenly(bytes, n);
  Step scatter;
  if (m.me == root) {
    for (int k = 0; k < n; ++k) {
      if (k != root) Add(&scatter.sends, m.ranks[k], base + c.offset[k], c.length[k]);
    }
  } else {
    Add(&scatter.recvs, m.ranks[root], base + c.offset[m.me], c.length[m.me]);
  }
  plan->steps.push_back(std::move(scatter));
  AddRingAllGather(m, base, c.offset, c.length, plan);
}

void BuildAllToAllV(const Members& m, const void* send, const std::vector<int64_t>& send_bytes,
                    const std::vector<int64_t>& send_offsets, void* recv,
                    const std::vector<int64_t>& recv_bytes,
                    const std::vector<int64_t>& recv_offsets, Plan* plan) {
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  Step step;
  for (int k = 0; k < m.size(); ++k) {
    if (k == m.me) continue;
    Add(&step.sends, m.ranks[k], in + send_offsets[k], send_bytes[k]);
    Add(&step.recvs, m.ranks[k], out + recv_offsets[k], recv_bytes[k]);
  }
  const int me = m.me;
  char* own_dst = out + recv_offsets[me];
  const char* own_src = in + send_offsets[me];
  const int64_t own_bytes = std::min(send_bytes[me], recv_bytes[me]);
  step.before = [own_dst, own_src, own_bytes]() { Copy(own_dst, own_src, own_bytes); };
  plan->steps.push_back(std::move(step));
}

}  // namespace mxmaca::transport::ucx
