// layers/context_parallel/ring_attention_parity_test.cc: the simulated CP ring (CP 2 and
// 4, causal and document-masked, GQA) against PyTorch's float64 attention with autograd
// (tests/kernels_reference/torch_ops.py `attention`: Megatron's unfused core attention),
// an implementation independent of this repository's kernels.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "layers/context_parallel/ring_test_util.h"

namespace mxmaca::layers::cp {
namespace {

using testing::MaxRelToMax;
using testing::RandomDocStarts;
using testing::RandomNormal;
using testing::Result;
using testing::RunRing;
using testing::Shape;
using testing::Tol;

std::string ScriptPath() {
  const std::string rel = "mxmaca/tests/kernels_reference/torch_ops.py";
  if (const char* srcdir = std::getenv("TEST_SRCDIR")) {
    const std::string p = std::string(srcdir) + "/" + rel;
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return "tests/kernels_reference/torch_ops.py";  // cwd = runfiles root .../mxmaca
}

template <typename T>
void WriteRaw(const std::string& path, const std::vector<T>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(T));
  REQUIRE(f.good());
}

std::vector<double> ReadF64(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  REQUIRE(f.good());
  const std::streamsize bytes = f.tellg();
  f.seekg(0);
  std::vector<double> v(bytes / sizeof(double));
  f.read(reinterpret_cast<char*>(v.data()), bytes);
  return v;
}

// TorchAttention: runs torch_ops.py attention on the inputs; returns o, dq, dk, dv.
std::map<std::string, std::vector<double>> TorchAttention(
    const Shape& sh, const std::vector<float>& q, const std::vector<float>& k,
    const std::vector<float>& v, const std::vector<float>& dout,
    const std::vector<int32_t>& doc_start) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/ring_ref_XXXXXX";
  REQUIRE(mkdtemp(templ.data()) != nullptr);
  const std::string dir = templ;
  WriteRaw(dir + "/q.f32", q);
  WriteRaw(dir + "/k.f32", k);
  WriteRaw(dir + "/v.f32", v);
  WriteRaw(dir + "/dout.f32", dout);
  if (!doc_start.empty()) WriteRaw(dir + "/doc_start.i32", doc_start);
  {
    std::ofstream f(dir + "/params.txt");
    f.precision(17);
    f << "b " << sh.b << "\ns " << sh.s << "\nnh " << sh.np << "\nng " << sh.ng << "\nd "
      << sh.hn << "\nscale " << 1.0 / std::sqrt(static_cast<double>(sh.hn)) << "\n";
    REQUIRE(f.good());
  }
  const std::string cmd = "/usr/bin/python3 " + ScriptPath() + " attention " + dir + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string log;
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) log += line;
  INFO("reference: " << cmd << "\n" << log);
  REQUIRE(pclose(p) == 0);
  std::map<std::string, std::vector<double>> out;
  for (const char* name : {"o", "dq", "dk", "dv"}) {
    out[name] = ReadF64(dir + "/" + name + ".f64");
  }
  return out;
}

// Tolerances: ring_test_util.h's Tol model (C = 8 forward, 16 gradients) against an
// exact-in-fp32-terms float64 reference.
TEST_CASE("ring attention parity: CP 2 and 4 against PyTorch float64", "[parity]") {
  const Shape sh{2, 4, 2, 256, 32};
  const int64_t tile = 16;
  const double n_tiles = static_cast<double>(sh.s) / tile;
  const std::vector<float> q = RandomNormal(sh.b * sh.np * sh.s * sh.hn, 41);
  const std::vector<float> k = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 42);
  const std::vector<float> v = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 43);
  const std::vector<float> dout = RandomNormal(q.size(), 44);
  for (bool docs : {false, true}) {
    const std::vector<int32_t> ds =
        docs ? RandomDocStarts(sh.b, sh.s, 90, 45) : std::vector<int32_t>{};
    auto ref = TorchAttention(sh, q, k, v, dout, ds);
    for (int64_t cp : {2, 4}) {
      const Result got = RunRing(sh, cp, tile, q, k, v, dout, ds);
      const double e_out = MaxRelToMax(got.out, ref["o"]);
      const double e_dq = MaxRelToMax(got.dq, ref["dq"]);
      const double e_dk = MaxRelToMax(got.dk, ref["dk"]);
      const double e_dv = MaxRelToMax(got.dv, ref["dv"]);
      WARN("torch parity docs " << docs << " cp " << cp << " out " << e_out << " dq " << e_dq
                                << " dk " << e_dk << " dv " << e_dv);
      CHECK(e_out < Tol(8, n_tiles));
      CHECK(e_dq < Tol(16, n_tiles));
      CHECK(e_dk < Tol(16, n_tiles));
      CHECK(e_dv < Tol(16, n_tiles));
    }
  }
}

}  // namespace
}  // namespace mxmaca::layers::cp
