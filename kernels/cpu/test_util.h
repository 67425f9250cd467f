// kernels/cpu/test_util.h: helpers shared by the CPU kernel tests (testonly).
//
// Random inputs, norm-wise error measures, and a bridge to the PyTorch references in
// tests/kernels_reference/: a test writes its inputs as raw little-endian files into a
// fresh temporary folder, runs `/usr/bin/python3 tests/kernels_reference/torch_ops.py
// <op> <folder>` and reads the float64 outputs back.
#ifndef MXMACA_KERNELS_CPU_TEST_UTIL_H_
#define MXMACA_KERNELS_CPU_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace mxmaca::kernels::cpu::testing {

// RandomVector: n floats uniform in [lo, hi) from a seeded mt19937.
std::vector<float> RandomVector(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// RandomNormal: n floats ~ N(0, stddev^2).
std::vector<float> RandomNormal(int64_t n, uint32_t seed, float stddev = 1.0f);

// RandomInts: n int32 uniform in [lo, hi].
std::vector<int32_t> RandomInts(int64_t n, uint32_t seed, int32_t lo, int32_t hi);

// ToDouble: element-wise widening copy.
std::vector<double> ToDouble(const std::vector<float>& x);

// RelError: ||got - want||_2 / max(||want||_2, tiny). Sizes must match.
double RelError(const std::vector<float>& got, const std::vector<double>& want);
double RelError(const std::vector<float>& got, const std::vector<float>& want);

// MaxAbsDiff: max_i |got[i] - want[i]|.
double MaxAbsDiff(const std::vector<float>& got, const std::vector<double>& want);

// BitEqual: same size and identical bits.
bool BitEqual(const std::vector<float>& a, const std::vector<float>& b);

// NumericalVjp: the vector-Jacobian product dy^T (df/dx) of a fp64 reference function
// f: R^n -> R^m by central differences, g_i = (dy.f(x + h e_i) - dy.f(x - h e_i)) / 2h.
// Truncation error O(h^2 f'''), rounding error O(eps_64 |dy.f| / h).
std::vector<double> NumericalVjp(
    const std::function<std::vector<double>(const std::vector<double>&)>& f,
    std::vector<double> x, const std::vector<double>& dy, double h);

// TorchRef: one call of the PyTorch reference script.
//   TorchRef ref("layer_norm");
//   ref.Param("eps", 1e-5); ref.Input("x", x); ...
//   std::map<std::string, std::vector<double>> out = ref.Run();   // throws on failure
class TorchRef {
 public:
  explicit TorchRef(std::string op);
  ~TorchRef();
  void Param(const std::string& name, double value);
  void Input(const std::string& name, const std::vector<float>& data);
  void Input(const std::string& name, const std::vector<int32_t>& data);
  // Runs the script; returns every output "<name>.f64" it wrote. Fails the current
  // Catch2 test (REQUIRE) if the script fails or writes nothing.
  std::map<std::string, std::vector<double>> Run();

 private:
  std::string op_;
  std::string dir_;
  std::map<std::string, double> params_;
};

// ReferenceScriptPath: the runfiles path of tests/kernels_reference/torch_ops.py.
std::string ReferenceScriptPath();

}  // namespace mxmaca::kernels::cpu::testing

#endif  // MXMACA_KERNELS_CPU_TEST_UTIL_H_
