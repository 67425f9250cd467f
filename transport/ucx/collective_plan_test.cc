// transport/ucx/collective_plan_test.cc: the UCX backend's algorithms without UCX — every
// rank's plan run in lockstep by a loopback executor (each receive is matched with the
// peer's send of the same step and copied). Group sizes 1..5 with non-contiguous global
// ranks, odd counts, in-place buffers; results against plain loops written here: rank
// order bit for bit (InProcessHub's order), ring order bit for bit against the ring's
// documented order, data movement exact.
#include "transport/ucx/collective_plan.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mxmaca::transport::ucx {
namespace {

const std::vector<int> kGlobal = {3, 7, 8, 12, 20};  // global rank of member i

// RunLockstep: runs plans[i] (member i) step by step; "" or what went wrong.
std::string RunLockstep(std::vector<Plan>& plans) {
  const int n = static_cast<int>(plans.size());
  const size_t steps = plans[0].steps.size();
  for (const Plan& p : plans) {
    if (p.steps.size() != steps) return "members have different step counts";
  }
  for (size_t s = 0; s < steps; ++s) {
    for (Plan& p : plans) {
      if (p.steps[s].before) p.steps[s].before();
    }
    std::vector<std::vector<bool>> used(n);
    for (int i = 0; i < n; ++i) used[i].assign(plans[i].steps[s].sends.size(), false);
    for (int i = 0; i < n; ++i) {
      for (Xfer& r : plans[i].steps[s].recvs) {
        const int j =
            static_cast<int>(std::find(kGlobal.begin(), kGlobal.end(), r.peer) - kGlobal.begin());
        if (j >= n) return "receive from a non-member";
        bool found = false;
        auto& sends = plans[j].steps[s].sends;
        for (size_t k = 0; k < sends.size(); ++k) {
          if (sends[k].peer != kGlobal[i] || used[j][k]) continue;
          if (sends[k].bytes != r.bytes) return "send and receive lengths differ";
          std::memcpy(r.buffer, sends[k].buffer, static_cast<size_t>(r.bytes));
          used[j][k] = found = true;
          break;
        }
        if (!found) return "a receive without a matching send in step " + std::to_string(s);
      }
    }
    for (int i = 0; i < n; ++i) {
      for (bool u : used[i]) {
        if (!u) return "a send without a matching receive in step " + std::to_string(s);
      }
    }
    for (Plan& p : plans) {
      if (p.steps[s].after && !p.steps[s].after().ok()) return "after() failed";
    }
  }
  return "";
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  // Mixed magnitudes, so that different summation orders give different bits.
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mantissa(gen), exponent(gen));
  return v;
}

Members MembersOf(int n, int i) {
  Members m;
  m.ranks.assign(kGlobal.begin(), kGlobal.begin() + n);
  m.me = i;
  return m;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// RankOrderSum: ((x_0 + x_1) + ...) + x_{n-1} on [begin, begin + len).
std::vector<float> RankOrderSum(const std::vector<std::vector<float>>& x, int64_t begin,
                                int64_t len) {
  std::vector<float> out(len);
  for (int64_t i = 0; i < len; ++i) {
    float acc = x[0][begin + i];
    for (size_t r = 1; r < x.size(); ++r) acc += x[r][begin + i];
    out[i] = acc;
  }
  return out;
}

// RingOrderChunkSum: chunk c summed from member c+1 around the ring.
std::vector<float> RingOrderChunkSum(const std::vector<std::vector<float>>& x, int c, int64_t begin,
                                     int64_t len) {
  const int n = static_cast<int>(x.size());
  std::vector<float> out(len);
  for (int64_t i = 0; i < len; ++i) {
    float acc = x[(c + 1) % n][begin + i];
    for (int k = 2; k <= n; ++k) acc += x[(c + k) % n][begin + i];
    out[i] = acc;
  }
  return out;
}

TEST_CASE("all-reduce: rank order bit for bit, ring in ring order, in place or not") {
  bool ring_differs_somewhere = false;
  for (int n = 1; n <= 5; ++n) {
    for (int64_t count : {0, 1, 2, 7, 1000, 1001}) {
      for (bool ring : {false, true}) {
        for (bool in_place : {false, true}) {
          INFO("n " << n << " count " << count << " ring " << ring << " in place " << in_place);
          std::vector<std::vector<float>> x(n), out(n);
          for (int i = 0; i < n; ++i) x[i] = Random(count, 100 * n + i + count);
          std::vector<std::vector<float>> buf = x;
          std::vector<Plan> plans(n);
          for (int i = 0; i < n; ++i) {
            out[i].assign(count, -1.0f);
            float* dst = in_place ? buf[i].data() : out[i].data();
            if (ring) {
              BuildAllReduceRing(MembersOf(n, i), buf[i].data(), dst, count, &plans[i]);
            } else {
              BuildAllReduceRankOrder(MembersOf(n, i), buf[i].data(), dst, count, &plans[i]);
            }
          }
          REQUIRE(RunLockstep(plans) == "");
          // Expected: rank order, or (ring, n >= 3) ring order per even chunk.
          std::vector<float> want = RankOrderSum(x, 0, count);
          if (ring && n >= 3) {
            int64_t begin = 0;
            for (int c = 0; c < n; ++c) {
              const int64_t len = count / n + (c < count % n ? 1 : 0);
              std::vector<float> part = RingOrderChunkSum(x, c, begin, len);
              std::copy(part.begin(), part.end(), want.begin() + begin);
              begin += len;
            }
            ring_differs_somewhere |= !SameBits(want, RankOrderSum(x, 0, count));
          }
          for (int i = 0; i < n; ++i) CHECK(SameBits(in_place ? buf[i] : out[i], want));
        }
      }
    }
  }
  // The two orders are distinguishable on this data (so the checks above can fail).
  CHECK(ring_differs_somewhere);
}

TEST_CASE("reduce-scatter: rank order bit for bit, ring in ring order") {
  for (int n = 1; n <= 5; ++n) {
    for (int64_t rc : {0, 1, 3, 257}) {
      for (bool ring : {false, true}) {
        INFO("n " << n << " recv_count " << rc << " ring " << ring);
        std::vector<std::vector<float>> x(n), out(n, std::vector<float>(rc, -1.0f));
        for (int i = 0; i < n; ++i) x[i] = Random(rc * n, 7 * n + i + rc);
        std::vector<Plan> plans(n);
        for (int i = 0; i < n; ++i) {
          if (ring) {
            BuildReduceScatterRing(MembersOf(n, i), x[i].data(), out[i].data(), rc, &plans[i]);
          } else {
            BuildReduceScatterRankOrder(MembersOf(n, i), x[i].data(), out[i].data(), rc, &plans[i]);
          }
        }
        REQUIRE(RunLockstep(plans) == "");
        for (int i = 0; i < n; ++i) {
          const std::vector<float> want =
              (ring && n >= 3) ? RingOrderChunkSum(x, i, i * rc, rc) : RankOrderSum(x, i * rc, rc);
          CHECK(SameBits(out[i], want));
        }
      }
    }
  }
}

TEST_CASE("all-gather, broadcast and all-to-all-v move bytes exactly") {
  std::mt19937 gen(5);
  for (int n = 1; n <= 5; ++n) {
    for (int64_t bytes : {0, 1, 13, 4096}) {
      for (bool ring : {false, true}) {
        INFO("n " << n << " bytes " << bytes << " ring " << ring);
        // All-gather (member 2 in place when it exists).
        std::vector<std::string> in(n), out(n, std::string(bytes * n, '?'));
        std::string want;
        for (int i = 0; i < n; ++i) {
          in[i].resize(bytes);
          for (char& c : in[i]) c = static_cast<char>(gen());
          want += in[i];
        }
        std::vector<Plan> plans(n);
        for (int i = 0; i < n; ++i) {
          const void* send = in[i].data();
          if (i == 2) {
            std::memcpy(&out[i][i * bytes], in[i].data(), bytes);
            send = &out[i][i * bytes];
          }
          BuildAllGather(MembersOf(n, i), send, out[i].data(), bytes, ring, &plans[i]);
        }
        REQUIRE(RunLockstep(plans) == "");
        for (int i = 0; i < n; ++i) CHECK(out[i] == want);

        // Broadcast from the last member.
        std::vector<std::string> buf(n, std::string(bytes, '.'));
        buf[n - 1] = in[n - 1];
        std::vector<Plan> bplans(n);
        for (int i = 0; i < n; ++i) {
          BuildBroadcast(MembersOf(n, i), n - 1, buf[i].data(), bytes, ring, &bplans[i]);
        }
        REQUIRE(RunLockstep(bplans) == "");
        for (int i = 0; i < n; ++i) CHECK(buf[i] == in[n - 1]);
      }
      // All-to-all-v: member i sends m[i][j] bytes to j.
      std::vector<std::vector<int64_t>> m(n, std::vector<int64_t>(n));
      for (auto& row : m) {
        for (int64_t& c : row) c = std::uniform_int_distribution<int64_t>(0, bytes)(gen);
      }
      std::vector<std::string> send(n), recv(n);
      std::vector<std::vector<int64_t>> sb(n), so(n), rb(n), ro(n);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          so[i].push_back(static_cast<int64_t>(send[i].size()));
          sb[i].push_back(m[i][j]);
          for (int64_t k = 0; k < m[i][j]; ++k) send[i].push_back(static_cast<char>(gen()));
          ro[i].push_back(static_cast<int64_t>(recv[i].size()));
          rb[i].push_back(m[j][i]);
          recv[i].append(m[j][i], '?');
        }
      }
      std::vector<Plan> plans(n);
      for (int i = 0; i < n; ++i) {
        BuildAllToAllV(MembersOf(n, i), send[i].data(), sb[i], so[i], recv[i].data(), rb[i], ro[i],
                       &plans[i]);
      }
      REQUIRE(RunLockstep(plans) == "");
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          CHECK(recv[i].substr(ro[i][j], rb[i][j]) == send[j].substr(so[j][i], sb[j][i]));
        }
      }
    }
  }
}

TEST_CASE("SplitEvenly") {
  Chunks c = SplitEvenly(10, 4);
  CHECK(c.offset == std::vector<int64_t>{0, 3, 6, 8});
  CHECK(c.length == std::vector<int64_t>{3, 3, 2, 2});
  c = SplitEvenly(2, 3);
  CHECK(c.length == std::vector<int64_t>{1, 1, 0});
}

}  // namespace
}  // namespace mxmaca::transport::ucx
