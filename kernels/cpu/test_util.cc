// kernels/cpu/test_util.cc: see test_util.h.
#include "kernels/cpu/test_util.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

namespace mxmaca::kernels::cpu::testing {

std::vector<float> RandomVector(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::vector<float> RandomNormal(int64_t n, uint32_t seed, float stddev) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::vector<int32_t> RandomInts(int64_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::vector<double> ToDouble(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

double RelError(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

double RelError(const std::vector<float>& got, const std::vector<float>& want) {
  return RelError(got, ToDouble(want));
}

double MaxAbsDiff(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double m = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return m;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<double> NumericalVjp(
    const std::function<std::vector<double>(const std::vector<double>&)>& f,
    std::vector<double> x, const std::vector<double>& dy, double h) {
  auto dot = [&](const std::vector<double>& y) {
    REQUIRE(y.size() == dy.size());
    double s = 0.0;
    for (size_t i = 0; i < y.size(); ++i) s += dy[i] * y[i];
    return s;
  };
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double plus = dot(f(x));
    x[i] = x0 - h;
    const double minus = dot(f(x));
    x[i] = x0;
    g[i] = (plus - minus) / (2 * h);
  }
  return g;
}

std::string ReferenceScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string rel = "mxmaca/tests/kernels_reference/torch_ops.py";
  if (srcdir != nullptr) {
    const std::string p = std::string(srcdir) + "/" + rel;
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return "tests/kernels_reference/torch_ops.py";  // cwd = runfiles root .../mxmaca
}

namespace {

template <typename T>
void WriteRaw(const std::string& path, const std::vector<T>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(T));
  REQUIRE(f.good());
}

}  // namespace

TorchRef::TorchRef(std::string op) : op_(std::move(op)) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/torchref_XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  REQUIRE(mkdtemp(buf.data()) != nullptr);
  dir_ = buf.data();
}

TorchRef::~TorchRef() {
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        unlink((dir_ + "/" + e->d_name).c_str());
      }
    }
    closedir(d);
  }
  rmdir(dir_.c_str());
}

void TorchRef::Param(const std::string& name, double value) { params_[name] = value; }

void TorchRef::Input(const std::string& name, const std::vector<float>& data) {
  WriteRaw(dir_ + "/" + name + ".f32", data);
}

void TorchRef::Input(const std::string& name, const std::vector<int32_t>& data) {
  WriteRaw(dir_ + "/" + name + ".i32", data);
}

std::map<std::string, std::vector<double>> TorchRef::Run() {
  {
    std::ofstream f(dir_ + "/params.txt");
    f.precision(17);
    for (const auto& [k, v] : params_) f << k << " " << v << "\n";
    REQUIRE(f.good());
  }
  const std::string cmd = "/usr/bin/python3 " + ReferenceScriptPath() + " " + op_ + " " +
                          dir_ + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string log;
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) log += line;
  const int rc = pclose(p);
  INFO("reference script: " << cmd << "\n" << log);
  REQUIRE(rc == 0);
  std::map<std::string, std::vector<double>> out;
  DIR* d = opendir(dir_.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 4 && name.substr(name.size() - 4) == ".f64") {
      std::ifstream f(dir_ + "/" + name, std::ios::binary | std::ios::ate);
      const std::streamsize bytes = f.tellg();
      f.seekg(0);
      std::vector<double> v(bytes / sizeof(double));
      f.read(reinterpret_cast<char*>(v.data()), bytes);
      out[name.substr(0, name.size() - 4)] = std::move(v);
    }
  }
  closedir(d);
  REQUIRE(!out.empty());
  return out;
}

}  // namespace mxmaca::kernels::cpu::testing
