// actors/checkpoint/megatron/torch_interop_test.cc: interoperability with Debian's
// PyTorch 1.13, the independent implementation of the format.
//   1. make_torch_file.py torch.saves a Megatron-style checkpoint dict (random tensors in
//      fp32/bf16/fp16/fp64/int64, a transposed view, two views of one storage, an
//      argparse.Namespace with torch dtypes and Megatron enums, OrderedDicts, numpy and
//      torch RNG states, io.BytesIO extra state); TorchFile reads it and every tensor equals
//      the values Python dumped, bit for bit.
//   2. A pickle whose object names posix.system is refused by name (and nothing runs).
//   3. Truncated files and a storage shorter than its tensor are errors naming the file.
//   4. A file written by TorchFileWriter loads with torch.load (check_torch_file.py) with
//      the same keys, shapes, dtypes and values.
#include <catch2/catch.hpp>

#include <stdio.h>
#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/checkpoint/megatron/pickle_reader.h"
#include "actors/checkpoint/megatron/torch_file.h"
#include "actors/checkpoint/megatron/zip_archive.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

std::string Run(const std::string& cmd, int* code) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string Script(const char* name) {
  return std::string("actors/checkpoint/megatron/") + name;
}

// Walk: the paths torch_helpers.walk builds.
void Walk(const PyValue& v, const std::string& prefix, std::map<std::string, const PyValue*>* out) {
  auto key_text = [](const PyValue& k) {
    if (k.kind == PyKind::kStr) return k.s;
    if (k.kind == PyKind::kInt) return std::to_string(k.i);
    return std::string("?");
  };
  if (v.kind == PyKind::kDict || (v.kind == PyKind::kObject && v.cls == "argparse.Namespace")) {
    for (const auto& [k, val] : v.entries) Walk(*val, prefix + key_text(*k) + "/", out);
    return;
  }
  if (v.kind == PyKind::kList || v.kind == PyKind::kTuple) {
    bool numbers = !v.items.empty();
    for (const PyRef& i : v.items) numbers = numbers && (i->kind == PyKind::kInt || i->kind == PyKind::kFloat);
    if (!numbers) {
      for (size_t k = 0; k < v.items.size(); ++k) Walk(*v.items[k], prefix + std::to_string(k) + "/", out);
      return;
    }
  }
  std::string p = prefix;
  if (!p.empty()) p.pop_back();
  (*out)[p] = &v;
}

std::vector<float> ReadBin(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), {});
  std::vector<float> v(s.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

TEST_CASE("torch.save files load here with the same tensors") {
  const std::string dir = testing::MakeTempDir();
  int code = 0;
  const std::string log = Run("/usr/bin/python3 " + Script("make_torch_file.py") + " " + dir + " 2>&1", &code);
  INFO(log);
  REQUIRE(code == 0);
  const std::string file = dir + "/iter_0000012/mp_rank_00/model_optim_rng.pt";
  auto t = TorchFile::Open(file);
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  REQUIRE(t->VerifyCrcs().ok());

  std::map<std::string, const PyValue*> leaves;
  Walk(t->root(), "", &leaves);
  std::ifstream jf(dir + "/expected.json");
  const nlohmann::json expected = nlohmann::json::parse(jf);
  int checked = 0;
  for (const auto& [path, e] : expected.items()) {
    INFO(path);
    REQUIRE(leaves.count(path) == 1);
    const PyValue& v = *leaves[path];
    REQUIRE(v.kind == PyKind::kTensor);
    REQUIRE(v.tensor->size == e["shape"].get<std::vector<int64_t>>());
    REQUIRE(std::string(DtypeName(v.tensor->storage->dtype)) == e["dtype"].get<std::string>());
    auto values = t->ReadFloat(*v.tensor, path);
    REQUIRE(values.ok());
    REQUIRE(testing::BitEqual(*values, ReadBin(dir + "/" + e["file"].get<std::string>())));
    ++checked;
  }
  REQUIRE(checked == 19);  // the 19 tensors make_torch_file.py saves
  // Tensors in the file and no others: every tensor leaf was listed.
  int tensors = 0;
  for (const auto& [p, v] : leaves) tensors += v->kind == PyKind::kTensor;
  REQUIRE(tensors == checked);

  // args: an attribute dict with Megatron's values.
  const PyValue* args = t->root().Get("args");
  REQUIRE(args != nullptr);
  REQUIRE(args->cls == "argparse.Namespace");
  REQUIRE(args->Get("num_layers")->i == 2);
  REQUIRE(args->Get("consumed_train_samples")->i == 96);
  REQUIRE(args->Get("params_dtype")->s == "torch.bfloat16");
  REQUIRE(args->Get("model_type")->cls == "megatron.core.enums.ModelType");
  // An enum member by value (Python < 3.11) or by name (>= 3.11).
  auto member = [](const PyValue* e) { return e->items.empty() ? e->s : std::to_string(e->items.at(0)->i); };
  const std::string mt = member(args->Get("model_type"));
  REQUIRE((mt == "1" || mt == "encoder_or_decoder"));
  const std::string ab = member(args->Get("attention_backend"));
  REQUIRE((ab == "5" || ab == "auto"));
  REQUIRE(args->Get("big_number")->i == (int64_t{1} << 40));
  REQUIRE(args->Get("negative")->i == -3);
  REQUIRE(std::isinf(args->Get("inf_value")->f));
  REQUIRE(args->Get("load")->kind == PyKind::kNone);
  REQUIRE(args->Get("data_path")->items.at(1)->s == "/data/corpus_text_document");
  REQUIRE(t->root().Get("checkpoint_version")->f == 3.0);
  REQUIRE(t->root().Get("iteration")->i == 12);
  REQUIRE(t->root().Get("model")->cls == "collections.OrderedDict");
  const PyValue* mode = t->root().Get("rerun_state_machine")->Get("mode");
  REQUIRE((mode->s == "disabled" || mode->items.at(0)->s == "disabled"));
  // The two views of one storage share it, at their offsets.
  const PyValue* model = t->root().Get("model");
  const auto& fc1 = *model->Get("decoder.layers.0.mlp.linear_fc1.weight")->tensor;
  const auto& fc2 = *model->Get("decoder.layers.0.mlp.linear_fc2.weight")->tensor;
  REQUIRE(fc1.storage == fc2.storage);
  REQUIRE(fc2.storage_offset == 16);
  REQUIRE(!model->Get("decoder.layers.0.self_attention.linear_proj.weight")->tensor->IsContiguous());
  REQUIRE(model->Get("decoder.layers.0.self_attention.linear_proj._extra_state")->cls == "_io.BytesIO");

  SECTION("a class outside the allow-list is refused by name") {
    auto evil = TorchFile::Open(dir + "/evil.pt");
    REQUIRE(absl::IsInvalidArgument(evil.status()));
    const std::string msg(evil.status().message());
    INFO(msg);
    REQUIRE(msg.find("posix.system") != std::string::npos);
    REQUIRE(msg.find("evil.pt") != std::string::npos);
  }
  SECTION("truncated copies are errors naming the file") {
    std::ifstream f(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), {});
    for (size_t cut : {size_t{0}, size_t{3}, size_t{100}, bytes.size() / 2, bytes.size() - 30,
                       bytes.size() - 1}) {
      const std::string p = dir + "/cut_" + std::to_string(cut) + ".pt";
      std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
      auto r = TorchFile::Open(p);
      INFO(cut);
      REQUIRE(!r.ok());
      REQUIRE(std::string(r.status().message()).find(p) != std::string::npos);
    }
  }
}

TEST_CASE("a storage shorter than its tensor is an error naming file and key") {
  const std::string dir = testing::MakeTempDir();
  TorchFileWriter w;
  float one = 1.0f;
  PyRef t = w.AddTensor(ScalarType::kFloat, {1}, &one);
  t->tensor->storage->numel = 1000;  // the pickle claims 1000 elements, the entry holds 1
  t->tensor->size = {1000};
  PyRef root = PyDict();
  root->Set("w", t);
  REQUIRE(w.Write(dir + "/short.pt", *root).ok());
  auto r = TorchFile::Open(dir + "/short.pt");
  REQUIRE(absl::IsDataLoss(r.status()));
  const std::string msg(r.status().message());
  INFO(msg);
  REQUIRE(msg.find("short.pt") != std::string::npos);
  REQUIRE(msg.find("storage '0' too short") != std::string::npos);
}

TEST_CASE("files written here load with torch.load, same keys, shapes and values") {
  const std::string dir = testing::MakeTempDir();
  const std::string file = dir + "/model_optim_rng.pt";
  TorchFileWriter w;
  const std::vector<float> a = testing::RandomFloats(24 * 8, 1);
  std::string bf16;
  for (float x : a) {
    const uint16_t h = BFloat16FromFloat(x);
    bf16.append(reinterpret_cast<const char*>(&h), 2);
  }
  std::vector<int64_t> ints = {-1, 0, 1, int64_t{1} << 40};
  PyRef root = PyDict();
  PyRef args = PyObject("argparse.Namespace");
  args->Set("num_layers", PyInt(2));
  args->Set("params_dtype", PyGlobal("torch.bfloat16"));
  PyRef mt = PyObject("megatron.core.enums.ModelType");
  mt->items = {PyInt(1)};
  args->Set("model_type", mt);
  args->Set("lr", PyFloat(3e-4));
  root->Set("args", args);
  root->Set("checkpoint_version", PyFloat(3.0));
  root->Set("iteration", PyInt(7));
  PyRef model = PyOrderedDict();
  model->Set("decoder.layers.0.self_attention.linear_qkv.weight", w.AddTensor(ScalarType::kFloat, {24, 8}, a.data()));
  model->Set("decoder.layers.0.self_attention.linear_qkv.layer_norm_weight",
             w.AddOwnedTensor(ScalarType::kBFloat16, {24, 8}, bf16));
  model->Set("decoder.layers.0.self_attention.linear_qkv._extra_state", PyNone());
  model->Set("ints", w.AddTensor(ScalarType::kLong, {4}, ints.data()));
  root->Set("model", model);
  root->Set("blob", PyBytes(std::string("\x00\xff\x80", 3)));
  REQUIRE(w.Write(file, *root).ok());

  int code = 0;
  const std::string out = Run("/usr/bin/python3 " + Script("check_torch_file.py") + " " + file + " 2>&1", &code);
  INFO(out.substr(0, 4000));
  REQUIRE(code == 0);
  const nlohmann::json j = nlohmann::json::parse(out);
  const auto& tensors = j["tensors"];
  REQUIRE(tensors.size() == 3);
  const auto& q = tensors["model/decoder.layers.0.self_attention.linear_qkv.weight"];
  REQUIRE(q["shape"] == nlohmann::json({24, 8}));
  REQUIRE(q["dtype"] == "float32");
  for (size_t k = 0; k < a.size(); ++k) REQUIRE(q["values"][k].get<double>() == static_cast<double>(a[k]));
  const auto& b = tensors["model/decoder.layers.0.self_attention.linear_qkv.layer_norm_weight"];
  REQUIRE(b["dtype"] == "bfloat16");
  for (size_t k = 0; k < a.size(); ++k) {
    const uint16_t h = BFloat16FromFloat(a[k]);
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    REQUIRE(b["values"][k].get<double>() == static_cast<double>(f));
    REQUIRE(std::fabs(f - a[k]) <= std::fabs(a[k]) / 256);  // bf16 keeps 8 bits
  }
  REQUIRE(tensors["model/ints"]["dtype"] == "int64");
  REQUIRE(tensors["model/ints"]["values"][3].get<double>() == 1099511627776.0);
  const auto& s = j["scalars"];
  REQUIRE(s["args/num_layers"] == "2");
  REQUIRE(s["args/params_dtype"] == "torch.bfloat16");
  REQUIRE(s["args/model_type"] == "<ModelType.encoder_or_decoder: 1>");
  REQUIRE(s["checkpoint_version"] == "3.0");
  REQUIRE(s["model/decoder.layers.0.self_attention.linear_qkv._extra_state"] == "None");
  REQUIRE(s["blob"] == "b'\\x00\\xff\\x80'");
  REQUIRE(j["type"] == "dict");
  // And it reads back here too.
  auto back = TorchFile::Open(file);
  REQUIRE(back.ok());
  REQUIRE(back->root().Get("model")->cls == "collections.OrderedDict");
}

TEST_CASE("zip64 archives (past 65,535 entries) interoperate with Python's zipfile") {
  const std::string dir = testing::MakeTempDir();
  // Python writes one; we read it.
  int code = 0;
  std::string out = Run("/usr/bin/python3 -c \"import zipfile\n"
                        "z = zipfile.ZipFile('" + dir + "/py.zip', 'w', zipfile.ZIP_STORED)\n"
                        "[z.writestr('a/%d' % i, str(i)) for i in range(70000)]\n"
                        "z.close()\" 2>&1", &code);
  INFO(out);
  REQUIRE(code == 0);
  std::ifstream f(dir + "/py.zip", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  auto r = ZipReader::Open(bytes.data(), bytes.size(), "py.zip");
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(r->entries().size() == 70000);
  REQUIRE(r->Data(*r->Find("a/69999")) == "69999");
  REQUIRE(r->VerifyCrc(*r->Find("a/12345")).ok());
  // We write one; Python reads and CRC-checks it.
  auto w = ZipWriter::Create(dir + "/ours.zip");
  REQUIRE(w.ok());
  for (int i = 0; i < 70000; ++i) REQUIRE(w->Add("b/" + std::to_string(i), std::to_string(i * 7)).ok());
  REQUIRE(w->Finish().ok());
  out = Run("/usr/bin/python3 -c \"import zipfile\n"
            "z = zipfile.ZipFile('" + dir + "/ours.zip')\n"
            "assert z.testzip() is None\n"
            "assert len(z.infolist()) == 70000 and z.read('b/69999') == b'489993'\n"
            "print('ok')\" 2>&1", &code);
  INFO(out);
  REQUIRE(code == 0);
  REQUIRE(out.find("ok") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint::megatron
