// actors/checkpoint/megatron/pickle_value.cc: see pickle_value.h.
#include "actors/checkpoint/megatron/pickle_value.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

struct TypeRow {
  ScalarType t;
  int size;
  const char* storage;
  const char* dtype;
};
constexpr TypeRow kTypes[] = {
    {ScalarType::kFloat, 4, "FloatStorage", "float32"},
    {ScalarType::kDouble, 8, "DoubleStorage", "float64"},
    {ScalarType::kHalf, 2, "HalfStorage", "float16"},
    {ScalarType::kBFloat16, 2, "BFloat16Storage", "bfloat16"},
    {ScalarType::kLong, 8, "LongStorage", "int64"},
    {ScalarType::kInt, 4, "IntStorage", "int32"},
    {ScalarType::kShort, 2, "ShortStorage", "int16"},
    {ScalarType::kChar, 1, "CharStorage", "int8"},
    {ScalarType::kByte, 1, "ByteStorage", "uint8"},
    {ScalarType::kBool, 1, "BoolStorage", "bool"},
};

const TypeRow& Row(ScalarType t) {
  for (const TypeRow& r : kTypes) {
    if (r.t == t) return r;
  }
  return kTypes[0];
}

PyRef Make(PyKind k) {
  auto v = std::make_shared<PyValue>();
  v->kind = k;
  return v;
}

}  // namespace

int ElementSize(ScalarType t) { return Row(t).size; }
const char* StorageClassName(ScalarType t) { return Row(t).storage; }
const char* DtypeName(ScalarType t) { return Row(t).dtype; }
bool ScalarTypeFromStorageClass(absl::string_view name, ScalarType* out) {
  for (const TypeRow& r : kTypes) {
    if (name == r.storage) {
      *out = r.t;
      return true;
    }
  }
  return false;
}

int64_t TorchTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : size) n *= d;
  return n;
}

bool TorchTensor::IsContiguous() const {
  int64_t expect = 1;
  for (size_t k = size.size(); k-- > 0;) {
    if (size[k] != 1 && stride[k] != expect) return false;
    expect *= size[k];
  }
  return true;
}

const PyValue* PyValue::Get(absl::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k && k->kind == PyKind::kStr && k->s == key) return v.get();
  }
  return nullptr;
}

PyValue* PyValue::GetMutable(absl::string_view key) {
  return const_cast<PyValue*>(static_cast<const PyValue*>(this)->Get(key));
}

void PyValue::Set(const std::string& key, PyRef value) {
  for (auto& [k, v] : entries) {
    if (k && k->kind == PyKind::kStr && k->s == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(PyStr(key), std::move(value));
}

PyRef PyNone() { return Make(PyKind::kNone); }
PyRef PyBool(bool b) {
  PyRef v = Make(PyKind::kBool);
  v->b = b;
  return v;
}
PyRef PyInt(int64_t i) {
  PyRef v = Make(PyKind::kInt);
  v->i = i;
  return v;
}
PyRef PyFloat(double f) {
  PyRef v = Make(PyKind::kFloat);
  v->f = f;
  return v;
}
PyRef PyStr(std::string s) {
  PyRef v = Make(PyKind::kStr);
  v->s = std::move(s);
  return v;
}
PyRef PyBytes(std::string s) {
  PyRef v = Make(PyKind::kBytes);
  v->s = std::move(s);
  return v;
}
PyRef PyTuple(std::vector<PyRef> items) {
  PyRef v = Make(PyKind::kTuple);
  v->items = std::move(items);
  return v;
}
PyRef PyList(std::vector<PyRef> items) {
  PyRef v = Make(PyKind::kList);
  v->items = std::move(items);
  return v;
}
PyRef PyDict() { return Make(PyKind::kDict); }
PyRef PyOrderedDict() {
  PyRef v = Make(PyKind::kDict);
  v->cls = "collections.OrderedDict";
  return v;
}
PyRef PyGlobal(std::string name) {
  PyRef v = Make(PyKind::kGlobal);
  v->s = std::move(name);
  return v;
}
PyRef PyObject(std::string cls) {
  PyRef v = Make(PyKind::kObject);
  v->cls = std::move(cls);
  return v;
}
PyRef PyTensorValue(std::shared_ptr<TorchTensor> t) {
  PyRef v = Make(PyKind::kTensor);
  v->tensor = std::move(t);
  return v;
}

const char* KindName(PyKind k) {
  switch (k) {
    case PyKind::kNone: return "None";
    case PyKind::kBool: return "bool";
    case PyKind::kInt: return "int";
    case PyKind::kFloat: return "float";
    case PyKind::kStr: return "str";
    case PyKind::kBytes: return "bytes";
    case PyKind::kTuple: return "tuple";
    case PyKind::kList: return "list";
    case PyKind::kDict: return "dict";
    case PyKind::kSet: return "set";
    case PyKind::kGlobal: return "global";
    case PyKind::kObject: return "object";
    case PyKind::kTensor: return "torch.Tensor";
    case PyKind::kStorage: return "torch storage";
  }
  return "?";
}

std::string Describe(const PyValue& v) {
  switch (v.kind) {
    case PyKind::kStr: return absl::StrCat("str '", v.s.substr(0, 60), "'");
    case PyKind::kInt: return absl::StrCat("int ", v.i);
    case PyKind::kDict: return absl::StrCat("dict of ", v.entries.size());
    case PyKind::kList:
    case PyKind::kTuple: return absl::StrCat(KindName(v.kind), " of ", v.items.size());
    case PyKind::kGlobal: return absl::StrCat("global ", v.s);
    case PyKind::kObject: return absl::StrCat("object of ", v.cls);
    default: return KindName(v.kind);
  }
}

}  // namespace mxmaca::actors::checkpoint::megatron
