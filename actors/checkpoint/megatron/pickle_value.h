// actors/checkpoint/megatron/pickle_value.h: the Python values a torch.save pickle of a
// Megatron checkpoint holds, as a C++ tree: None, bool, int (64-bit), float, str, bytes,
// tuple, list, dict (insertion order kept; OrderedDict is a dict), set, a global (a class
// or function named by module and name, e.g. torch.bfloat16), an object of an allowed
// class (argparse.Namespace as its attribute dict; an enum as its value) and torch tensors
// with their storages. Built by the restricted unpickler (pickle_reader.h) and written by
// the pickler (pickle_writer.h).
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_VALUE_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace mxmaca::actors::checkpoint::megatron {

// ScalarType: element types of torch storages (torch.<Name>Storage).
enum class ScalarType { kFloat, kDouble, kHalf, kBFloat16, kLong, kInt, kShort, kChar, kByte, kBool };

// ElementSize: bytes per element (4, 8, 2, 2, 8, 4, 2, 1, 1, 1).
int ElementSize(ScalarType t);
// StorageClassName: "FloatStorage", "BFloat16Storage", ... (the torch.* global).
const char* StorageClassName(ScalarType t);
// ScalarTypeFromStorageClass: the inverse; false for an unknown name.
bool ScalarTypeFromStorageClass(absl::string_view name, ScalarType* out);
// DtypeName: "float32", "bfloat16", ... (torch.<name>).
const char* DtypeName(ScalarType t);

// TorchStorage: a persistent storage reference: ('storage', torch.<T>Storage, key,
// location, numel); the bytes are archive entry "<archive>/data/<key>".
struct TorchStorage {
  std::string key;
  ScalarType dtype = ScalarType::kFloat;
  std::string location = "cpu";
  int64_t numel = 0;
};

// TorchTensor: torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
// requires_grad, backward_hooks): elements at storage_offset + sum(i_k * stride_k).
struct TorchTensor {
  std::shared_ptr<TorchStorage> storage;
  int64_t storage_offset = 0;
  std::vector<int64_t> size;
  std::vector<int64_t> stride;
  bool requires_grad = false;
  int64_t numel() const;
  // IsContiguous: stride is the C-order stride of size.
  bool IsContiguous() const;
};

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

enum class PyKind {
  kNone, kBool, kInt, kFloat, kStr, kBytes, kTuple, kList, kDict, kSet, kGlobal, kObject,
  kTensor, kStorage
};

// PyValue: one node. Which fields are used depends on `kind`:
//   kBool b; kInt i; kFloat f; kStr/kBytes s (UTF-8 / raw); kGlobal s = "module.name";
//   kTuple/kList/kSet items; kDict entries (keys any hashable value), cls =
//     "collections.OrderedDict" for an OrderedDict (else empty);
//   kObject: cls = "module.name"; entries = its attribute dict (argparse.Namespace), or
//     items = its constructor arguments (an enum: [value]), or s = an enum member's name
//     (pickled by name); state = BUILD's argument
//     when it was not a dict;
//   kTensor tensor; kStorage storage.
struct PyValue {
  PyKind kind = PyKind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::string cls;
  std::vector<PyRef> items;
  std::vector<std::pair<PyRef, PyRef>> entries;
  PyRef state;
  std::shared_ptr<TorchTensor> tensor;
  std::shared_ptr<TorchStorage> storage;
  // Unpickler bookkeeping: nesting depth below this node, and whether another value
  // holds it (then it may no longer change; pickle_reader.h).
  int depth = 0;
  bool sealed = false;

  // Lookup: the value of dict (or object attribute) key `key` (a str), or nullptr.
  const PyValue* Get(absl::string_view key) const;
  PyValue* GetMutable(absl::string_view key);
  // Set: sets (or replaces) string key `key` of a dict or object.
  void Set(const std::string& key, PyRef value);
  bool is_str() const { return kind == PyKind::kStr; }
};

// Constructors.
PyRef PyNone();
PyRef PyBool(bool v);
PyRef PyInt(int64_t v);
PyRef PyFloat(double v);
PyRef PyStr(std::string v);
PyRef PyBytes(std::string v);
PyRef PyTuple(std::vector<PyRef> items);
PyRef PyList(std::vector<PyRef> items);
PyRef PyDict();         // an empty dict
PyRef PyOrderedDict();  // an empty collections.OrderedDict
PyRef PyGlobal(std::string qualified_name);
PyRef PyObject(std::string cls);
PyRef PyTensorValue(std::shared_ptr<TorchTensor> t);

// KindName: "None", "int", "dict", "torch.Tensor", ... for messages.
const char* KindName(PyKind k);
// Describe: a short text of a value for messages (kind, and a str's text or a dict's size).
std::string Describe(const PyValue& v);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_VALUE_H_
