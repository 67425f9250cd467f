// actors/checkpoint/megatron/pickle_test.cc: the pickler's output reads back through the
// restricted unpickler to the same tree; hand-written pickles with globals outside the
// allow-list are refused by name; malformed pickles give errors, never crashes.
// (Pickles from CPython/torch themselves are read in torch_interop_test.)
#include <catch2/catch.hpp>

#include <string>

#include "actors/checkpoint/megatron/pickle_reader.h"
#include "actors/checkpoint/megatron/pickle_writer.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

bool Same(const PyValue& a, const PyValue& b) {
  if (a.kind != b.kind || a.s != b.s || a.cls != b.cls || a.items.size() != b.items.size() ||
      a.entries.size() != b.entries.size()) {
    return false;
  }
  switch (a.kind) {
    case PyKind::kBool: if (a.b != b.b) return false; break;
    case PyKind::kInt: if (a.i != b.i) return false; break;
    case PyKind::kFloat: if (a.f != b.f) return false; break;
    case PyKind::kTensor:
      if (a.tensor->size != b.tensor->size || a.tensor->stride != b.tensor->stride ||
          a.tensor->storage_offset != b.tensor->storage_offset ||
          a.tensor->storage->key != b.tensor->storage->key ||
          a.tensor->storage->dtype != b.tensor->storage->dtype ||
          a.tensor->storage->numel != b.tensor->storage->numel) {
        return false;
      }
      break;
    default: break;
  }
  for (size_t k = 0; k < a.items.size(); ++k) if (!Same(*a.items[k], *b.items[k])) return false;
  for (size_t k = 0; k < a.entries.size(); ++k) {
    if (!Same(*a.entries[k].first, *b.entries[k].first) ||
        !Same(*a.entries[k].second, *b.entries[k].second)) {
      return false;
    }
  }
  if ((a.state == nullptr) != (b.state == nullptr)) return false;
  return a.state == nullptr || Same(*a.state, *b.state);
}

PyRef Tensor(const std::string& key, ScalarType t, std::vector<int64_t> size) {
  auto st = std::make_shared<TorchStorage>();
  st->key = key;
  st->dtype = t;
  st->numel = 1;
  for (int64_t d : size) st->numel *= d;
  auto tt = std::make_shared<TorchTensor>();
  tt->storage = st;
  tt->size = size;
  tt->stride.assign(size.size(), 1);
  for (size_t k = size.size(); k-- > 1;) tt->stride[k - 1] = tt->stride[k] * size[k];
  return PyTensorValue(tt);
}

TEST_CASE("Pickle then Unpickle gives the same tree") {
  PyRef root = PyDict();
  PyRef args = PyObject("argparse.Namespace");
  args->Set("num_layers", PyInt(4));
  args->Set("lr", PyFloat(3e-4));
  args->Set("params_dtype", PyGlobal("torch.bfloat16"));
  args->Set("big", PyInt(int64_t{1} << 40));
  args->Set("neg", PyInt(-5));
  args->Set("neg_big", PyInt(-(int64_t{1} << 50)));
  args->Set("minimum", PyInt(INT64_MIN));
  args->Set("name", PyStr("gpt \xc3\xa9"));
  args->Set("none", PyNone());
  args->Set("flag", PyBool(true));
  args->Set("list", PyList({PyInt(1), PyInt(300), PyInt(70000)}));
  args->Set("tuple4", PyTuple({PyInt(1), PyInt(2), PyInt(3), PyInt(4)}));
  args->Set("tuple1", PyTuple({PyStr("x")}));
  PyRef e = PyObject("megatron.core.enums.ModelType");
  e->items = {PyInt(1)};
  args->Set("model_type", e);
  PyRef by_name = PyObject("megatron.core.transformer.enums.AttnBackend");
  by_name->s = "auto";
  args->Set("attention_backend", by_name);
  root->Set("args", args);
  root->Set("checkpoint_version", PyFloat(3.0));
  PyRef model = PyOrderedDict();
  model->Set("decoder.layers.0.mlp.linear_fc1.weight", Tensor("0", ScalarType::kFloat, {8, 4}));
  model->Set("embedding.word_embeddings.weight", Tensor("1", ScalarType::kBFloat16, {16, 4}));
  model->Set("decoder.layers.0.self_attention.linear_qkv._extra_state", PyNone());
  root->Set("model", model);
  root->Set("blob", PyBytes(std::string("\x00\x01\x7f\x80\xff", 5)));
  PyRef set = PyList({PyInt(3)});
  set->kind = PyKind::kSet;
  root->Set("set", set);

  auto bytes = Pickle(*root);
  REQUIRE(bytes.ok());
  auto back = Unpickle(*bytes, "test");
  REQUIRE(back.ok());
  REQUIRE(Same(*root, **back));
  REQUIRE((*back)->Get("model")->cls == "collections.OrderedDict");
  REQUIRE((*back)->Get("blob")->s == std::string("\x00\x01\x7f\x80\xff", 5));
}

TEST_CASE("Unpickle refuses globals outside the allow-list, naming them") {
  // cos\nsystem\n(S'echo hi'\ntR. — the classic code-execution pickle, protocol 2 framing.
  const std::string evil = std::string("\x80\x02") + "cposix\nsystem\nX\x07\x00\x00\x00" +
                           "echo hi\x85R.";
  auto r = Unpickle(evil, "model_optim_rng.pt: model_optim_rng/data.pkl");
  REQUIRE(absl::IsInvalidArgument(r.status()));
  const std::string msg(r.status().message());
  REQUIRE(msg.find("posix.system") != std::string::npos);
  REQUIRE(msg.find("model_optim_rng.pt") != std::string::npos);
  REQUIRE(!IsAllowedGlobal("builtins", "eval"));
  REQUIRE(!IsAllowedGlobal("torch", "load"));
  REQUIRE(IsAllowedGlobal("torch", "BFloat16Storage"));
  REQUIRE(IsAllowedGlobal("argparse", "Namespace"));
}

TEST_CASE("Unpickle errors on malformed input") {
  const std::vector<std::string> bad = {
      "",                                  // no STOP
      "\x80\x02",                          // truncated
      "\x80\x09N.",                        // protocol 9
      "\x80\x02X\xff\xff\x00\x00ab.",      // string longer than input
      "\x80\x02" "a.",                     // APPEND with an empty stack
      "\x80\x02]q\x00h\x00a.",             // list appended to itself
      "\x80\x02h\x05.",                    // memo entry missing
      "\x80\x02NN.",                       // two values at STOP
      "\x80\x02\xff.",                     // unknown opcode
      "\x80\x02(X\x07\x00\x00\x00storageK\x01X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x01tQ.",
  };
  for (const std::string& b : bad) {
    INFO(b.size());
    auto r = Unpickle(b, "f");
    REQUIRE(!r.ok());
  }
  // Deep nesting: 1000 nested lists is refused (limit 256), not a stack overflow.
  std::string deep = "\x80\x02";
  for (int i = 0; i < 1000; ++i) deep += "]";
  for (int i = 0; i < 999; ++i) deep += "a";
  deep += ".";
  auto r = Unpickle(deep, "f");
  REQUIRE(!r.ok());
  REQUIRE(std::string(r.status().message()).find("nest") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint::megatron
