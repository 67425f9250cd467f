// kernels/cpu/rope_dump.cc: test driver for rope_scaling_test.sh. Reads one case from a
// text file and prints RopeInvFreq and RopeForward / RopeBackward of it, so the PyTorch
// reference (rope_scaling_reference.py) can compare them.
// Input (whitespace-separated): base rotary_dim d llama3_scaling(0|1) scaling_factor
// seq_len_interpolation_factor(0 = none) b s heads, then positions int32 [b, s], then
// x fp32 [b, heads, s, d].
// Output: three lines: inv_freq [rotary_dim / 2]; RopeForward(x); RopeBackward(x); each
// value printed with %.9g (round-trips fp32).
#include <cstdio>
#include <fstream>
#include <vector>

#include "kernels/cpu/rope.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: rope_dump CASE_FILE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  mxmaca::kernels::cpu::RopeFrequencies f;
  int64_t rotary_dim = 0, d = 0, b = 0, s = 0, heads = 0;
  int scaling = 0;
  in >> f.base >> rotary_dim >> d >> scaling >> f.scaling_factor >>
      f.seq_len_interpolation_factor >> b >> s >> heads;
  f.llama3_scaling = scaling != 0;
  if (!in || rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > d || b <= 0 || s <= 0 ||
      heads <= 0) {
    std::fprintf(stderr, "rope_dump: bad case header in %s\n", argv[1]);
    return 2;
  }
  std::vector<int32_t> pos(b * s);
  for (int32_t& p : pos) in >> p;
  std::vector<float> x(b * heads * s * d);
  for (float& v : x) in >> v;
  if (!in) {
    std::fprintf(stderr, "rope_dump: short case file %s\n", argv[1]);
    return 2;
  }
  mxmaca::kernels::ExecContext ctx;
  std::vector<float> inv(rotary_dim / 2);
  mxmaca::kernels::cpu::RopeInvFreq(f, rotary_dim, inv.data());
  std::vector<float> fwd = x, bwd = x;
  mxmaca::kernels::cpu::RopeForward(ctx, fwd.data(), pos.data(), b, s, heads, d, rotary_dim, f);
  mxmaca::kernels::cpu::RopeBackward(ctx, bwd.data(), pos.data(), b, s, heads, d, rotary_dim, f);
  for (const std::vector<float>* v : {&inv, &fwd, &bwd}) {
    for (size_t i = 0; i < v->size(); ++i) std::printf(i ? " %.9g" : "%.9g", (*v)[i]);
    std::printf("\n");
  }
  return 0;
}
