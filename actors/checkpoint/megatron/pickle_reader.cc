// actors/checkpoint/megatron/pickle_reader.cc: see pickle_reader.h. Opcode semantics from
// CPython's Lib/pickle.py (_Unpickler) and Lib/pickletools.py.
#include "actors/checkpoint/megatron/pickle_reader.h"

#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

constexpr int kMaxDepth = 256;

// Globals that name classes whose instances we build as objects (REDUCE(cls, args) or
// NEWOBJ(cls, args)).
constexpr const char* kObjectClasses[] = {
    "argparse.Namespace",
    "types.SimpleNamespace",
    "_io.BytesIO",
    "numpy.ndarray",
    "numpy.dtype",
    "megatron.core.enums.ModelType",
    "megatron.core.transformer.enums.AttnBackend",
    "megatron.core.transformer.enums.AttnMaskType",
    "megatron.core.transformer.enums.AttnType",
    "megatron.core.transformer.enums.LayerType",
    "megatron.core.transformer.enums.CudaGraphModule",
    "megatron.core.transformer.enums.CudaGraphScope",
    "megatron.core.transformer.enums.InferenceCudaGraphScope",
    "megatron.core.rerun_state_machine.RerunMode",
    "megatron.core.rerun_state_machine.RerunState",
    "megatron.core.rerun_state_machine.RerunDiagnostic",
    "megatron.core.rerun_state_machine.RerunValidationStatus",
};

constexpr const char* kFunctions[] = {
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_parameter",
    "torch.Size",
    "builtins.set",
    "builtins.frozenset",
    "__builtin__.set",
    "__builtin__.frozenset",
    "builtins.object",
    "builtins.getattr",
    "__builtin__.getattr",
    "__builtin__.object",
    "_codecs.encode",
    "copyreg._reconstructor",
    "copy_reg._reconstructor",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
};

constexpr const char* kDtypes[] = {"float32", "float", "bfloat16", "float16", "half",
                                   "float64", "double", "int64", "long", "int32",
                                   "int", "int16", "short", "int8", "uint8", "bool"};

bool InList(absl::string_view q, absl::Span<const char* const> list) {
  for (const char* c : list) {
    if (q == c) return true;
  }
  return false;
}

bool IsObjectClass(absl::string_view q) { return InList(q, kObjectClasses); }

class Unpickler {
 public:
  Unpickler(absl::string_view data, const std::string& what) : d_(data), what_(what) {}

  absl::StatusOr<PyRef> Run() {
    while (true) {
      if (pos_ >= d_.size()) return Err("truncated: no STOP opcode");
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(d_[pos_++]);
      absl::Status s = Step(op, at);
      if (!s.ok()) return s;
      if (stopped_) {
        if (stack_.size() != 1 || !marks_.empty()) return Err("STOP with a malformed stack", at);
        return stack_.back();
      }
    }
  }

 private:
  absl::Status Err(const std::string& what, size_t at) const {
    return absl::DataLossError(absl::StrCat(what_, ": ", what, " at byte ", at));
  }
  absl::Status Err(const std::string& what) const { return Err(what, pos_); }

  absl::Status Need(size_t n) const {
    if (d_.size() - pos_ < n) {
      return Err(absl::StrCat("truncated: ", n, " more bytes needed, ", d_.size() - pos_, " left"));
    }
    return absl::OkStatus();
  }
  uint64_t ReadLe(int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(d_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  absl::StatusOr<std::string> ReadBytes(uint64_t n) {
    if (d_.size() - pos_ < n) {
      return Err(absl::StrCat("truncated: a string of ", n, " bytes, ", d_.size() - pos_, " left"));
    }
    std::string s(d_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  absl::StatusOr<std::string> ReadLine() {
    size_t e = d_.find('\n', pos_);
    if (e == absl::string_view::npos) return Err("truncated: unterminated text argument");
    std::string s(d_.substr(pos_, e - pos_));
    pos_ = e + 1;
    return s;
  }

  absl::StatusOr<PyRef> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Err("stack underflow");
    }
    PyRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<PyRef*> Top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Err("stack underflow");
    }
    return &stack_.back();
  }
  absl::StatusOr<std::vector<PyRef>> PopMark() {
    if (marks_.empty()) return Err("no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> items(std::make_move_iterator(stack_.begin() + m),
                             std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  // Hold: `child` becomes part of `parent`: sealed, and parent's depth updated.
  absl::Status Hold(PyValue& parent, const PyRef& child) {
    if (!child) return Err("null value");
    if (child.get() == &parent) return Err("a value that contains itself is not supported");
    child->sealed = true;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth) return Err(absl::StrCat("values nest deeper than ", kMaxDepth));
    return absl::OkStatus();
  }
  absl::StatusOr<PyRef> MakeTuple(std::vector<PyRef> items) {
    PyRef t = PyTuple({});
    for (const PyRef& i : items) MXMACA_RETURN_IF_ERROR(Hold(*t, i));
    t->items = std::move(items);
    return t;
  }
  absl::Status Mutable(const PyValue& v, const char* op) {
    if (v.sealed) {
      return Err(absl::StrCat(op, " on a value that another value already holds (recursive or "
                              "shared structures are not supported)"));
    }
    return absl::OkStatus();
  }
  absl::Status Append(PyValue& list, PyRef item) {
    MXMACA_RETURN_IF_ERROR(Mutable(list, "APPEND"));
    if (list.kind != PyKind::kList && list.kind != PyKind::kSet) {
      return Err(absl::StrCat("APPEND to a ", KindName(list.kind)));
    }
    MXMACA_RETURN_IF_ERROR(Hold(list, item));
    list.items.push_back(std::move(item));
    return absl::OkStatus();
  }
  absl::Status SetItem(PyValue& dict, PyRef key, PyRef value) {
    MXMACA_RETURN_IF_ERROR(Mutable(dict, "SETITEM"));
    if (dict.kind != PyKind::kDict) return Err(absl::StrCat("SETITEM on a ", KindName(dict.kind)));
    MXMACA_RETURN_IF_ERROR(Hold(dict, key));
    MXMACA_RETURN_IF_ERROR(Hold(dict, value));
    if (key->kind == PyKind::kStr) {
      for (auto& [k, v] : dict.entries) {
        if (k->kind == PyKind::kStr && k->s == key->s) {
          v = std::move(value);
          return absl::OkStatus();
        }
      }
    }
    dict.entries.emplace_back(std::move(key), std::move(value));
    return absl::OkStatus();
  }

  absl::Status PushGlobal(const std::string& module, const std::string& name, size_t at) {
    if (!IsAllowedGlobal(module, name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what_, ": class ", module, ".", name, " (byte ", at,
          ") is not allowed in a Megatron checkpoint; this reader accepts only the classes "
          "torch.save of Megatron's state dict uses (actors/checkpoint/megatron/"
          "pickle_reader.h) and never runs code from a file"));
    }
    stack_.push_back(PyGlobal(absl::StrCat(module, ".", name)));
    return absl::OkStatus();
  }

  static const PyValue* Arg(const std::vector<PyRef>& a, size_t k) {
    return k < a.size() ? a[k].get() : nullptr;
  }
  absl::StatusOr<std::vector<int64_t>> IntTuple(const PyValue* v, const char* what, size_t at) {
    if (v == nullptr || (v->kind != PyKind::kTuple && v->kind != PyKind::kList)) {
      return Err(absl::StrCat("_rebuild_tensor_v2: ", what, " is not a tuple"), at);
    }
    std::vector<int64_t> out;
    for (const PyRef& i : v->items) {
      if (i->kind != PyKind::kInt || i->i < 0) {
        return Err(absl::StrCat("_rebuild_tensor_v2: ", what, " holds ", Describe(*i)), at);
      }
      out.push_back(i->i);
    }
    return out;
  }

  // Reduce: callable(*args) for an allowed callable, rebuilt without running anything.
  absl::StatusOr<PyRef> Reduce(const PyValue& f, const PyRef& args_ref, size_t at) {
    if (f.kind != PyKind::kGlobal) return Err(absl::StrCat("REDUCE of a ", KindName(f.kind)), at);
    if (args_ref->kind != PyKind::kTuple) return Err("REDUCE arguments are not a tuple", at);
    const std::vector<PyRef>& a = args_ref->items;
    const std::string& q = f.s;
    if (q == "collections.OrderedDict") {
      if (!a.empty()) return Err("OrderedDict with arguments", at);
      PyRef d = PyDict();
      d->cls = "collections.OrderedDict";
      return d;
    }
    if (q == "torch._utils._rebuild_tensor_v2") {
      if (a.size() < 6 || a.size() > 7 || a[0]->kind != PyKind::kStorage ||
          a[1]->kind != PyKind::kInt || a[4]->kind != PyKind::kBool) {
        return Err("_rebuild_tensor_v2 with unexpected arguments", at);
      }
      auto t = std::make_shared<TorchTensor>();
      t->storage = a[0]->storage;
      t->storage_offset = a[1]->i;
      MXMACA_ASSIGN_OR_RETURN(t->size, IntTuple(a[2].get(), "size", at));
      MXMACA_ASSIGN_OR_RETURN(t->stride, IntTuple(a[3].get(), "stride", at));
      t->requires_grad = a[4]->b;
      if (t->size.size() != t->stride.size() || t->storage_offset < 0) {
        return Err("_rebuild_tensor_v2: size and stride differ in rank", at);
      }
      // Every element must lie inside the storage.
      __int128 last = t->storage_offset;
      bool empty = false;
      for (size_t k = 0; k < t->size.size(); ++k) {
        if (t->size[k] == 0) empty = true;
        last += static_cast<__int128>(t->size[k] > 0 ? t->size[k] - 1 : 0) * t->stride[k];
      }
      if (!empty && last >= t->storage->numel) {
        return Err(absl::StrCat("tensor of size [", absl::StrJoin(t->size, ", "), "] at offset ",
                                t->storage_offset, " reaches past its storage '", t->storage->key,
                                "' of ", t->storage->numel, " elements"),
                   at);
      }
      return PyTensorValue(std::move(t));
    }
    if (q == "torch._utils._rebuild_parameter") {
      if (a.empty() || a[0]->kind != PyKind::kTensor) return Err("_rebuild_parameter without a tensor", at);
      return PyTensorValue(a[0]->tensor);
    }
    if (q == "torch.Size") {
      if (a.size() != 1 || a[0]->kind != PyKind::kTuple) return Err("torch.Size without a tuple", at);
      return MakeTuple(a[0]->items);
    }
    if (q == "builtins.set" || q == "builtins.frozenset" || q == "__builtin__.set" ||
        q == "__builtin__.frozenset") {
      PyRef s = PyList({});
      s->kind = PyKind::kSet;
      if (!a.empty()) {
        if (a[0]->kind != PyKind::kList && a[0]->kind != PyKind::kTuple) return Err("set of a non-list", at);
        for (const PyRef& i : a[0]->items) MXMACA_RETURN_IF_ERROR(Append(*s, i));
      }
      return s;
    }
    if (q == "_codecs.encode") {
      if (a.empty() || a[0]->kind != PyKind::kStr) return Err("_codecs.encode of a non-str", at);
      // Protocol 2 writes bytes as the latin-1 decoding of their values: undo it.
      std::string out;
      const std::string& s = a[0]->s;
      for (size_t k = 0; k < s.size(); ++k) {
        const uint8_t c = static_cast<uint8_t>(s[k]);
        if (c < 0x80) {
          out.push_back(static_cast<char>(c));
        } else if ((c & 0xE0) == 0xC0 && k + 1 < s.size() && c <= 0xC3) {
          out.push_back(static_cast<char>(((c & 0x1F) << 6) | (static_cast<uint8_t>(s[k + 1]) & 0x3F)));
          ++k;
        } else {
          return Err("_codecs.encode: a character outside latin-1", at);
        }
      }
      return PyBytes(std::move(out));
    }
    if (q == "builtins.getattr" || q == "__builtin__.getattr") {
      // Python >= 3.11 pickles an enum member by name: getattr(EnumClass, 'member').
      if (a.size() != 2 || a[0]->kind != PyKind::kGlobal || !IsObjectClass(a[0]->s) ||
          a[1]->kind != PyKind::kStr) {
        return Err("getattr other than of an allowed enum class and a member name", at);
      }
      PyRef o = PyObject(a[0]->s);
      o->s = a[1]->s;
      return o;
    }
    if (q == "copyreg._reconstructor" || q == "copy_reg._reconstructor") {
      if (a.empty() || a[0]->kind != PyKind::kGlobal || !IsObjectClass(a[0]->s)) {
        return Err("copyreg._reconstructor of a class that is not allowed", at);
      }
      return PyObject(a[0]->s);
    }
    if (q == "numpy.core.multiarray._reconstruct" || q == "numpy._core.multiarray._reconstruct") {
      if (a.empty() || a[0]->kind != PyKind::kGlobal || a[0]->s != "numpy.ndarray") {
        return Err("numpy _reconstruct of something other than numpy.ndarray", at);
      }
      return PyObject("numpy.ndarray");
    }
    if (IsObjectClass(q)) {
      PyRef o = PyObject(q);
      for (const PyRef& i : a) MXMACA_RETURN_IF_ERROR(Hold(*o, i));
      o->items = a;
      return o;
    }
    return Err(absl::StrCat("REDUCE of ", q, ", which is not a callable this reader rebuilds"), at);
  }

  absl::StatusOr<PyRef> PersistentLoad(const PyValue& pid, size_t at) {
    if (pid.kind != PyKind::kTuple || pid.items.size() != 5 || pid.items[0]->kind != PyKind::kStr ||
        pid.items[0]->s != "storage") {
      return Err("persistent id is not ('storage', type, key, location, numel)", at);
    }
    const PyValue& type = *pid.items[1];
    auto st = std::make_shared<TorchStorage>();
    if (type.kind != PyKind::kGlobal || type.s.rfind("torch.", 0) != 0 ||
        !ScalarTypeFromStorageClass(absl::string_view(type.s).substr(6), &st->dtype)) {
      return Err(absl::StrCat("persistent id with storage type ", Describe(type)), at);
    }
    if (pid.items[2]->kind != PyKind::kStr || pid.items[3]->kind != PyKind::kStr ||
        pid.items[4]->kind != PyKind::kInt || pid.items[4]->i < 0) {
      return Err("persistent id fields (key, location, numel) have the wrong types", at);
    }
    st->key = pid.items[2]->s;
    st->location = pid.items[3]->s;
    st->numel = pid.items[4]->i;
    // One storage object per key, as torch.load shares it between views.
    auto it = storages_.find(st->key);
    if (it != storages_.end()) {
      if (it->second->dtype != st->dtype || it->second->numel != st->numel) {
        return Err(absl::StrCat("storage '", st->key, "' referenced with two types or sizes"), at);
      }
      st = it->second;
    } else {
      storages_[st->key] = st;
    }
    auto v = std::make_shared<PyValue>();
    v->kind = PyKind::kStorage;
    v->storage = std::move(st);
    return v;
  }

  absl::Status Build(PyValue& target, PyRef state, size_t at) {
    MXMACA_RETURN_IF_ERROR(Mutable(target, "BUILD"));
    MXMACA_RETURN_IF_ERROR(Hold(target, state));
    const PyValue* dict = nullptr;
    if (state->kind == PyKind::kDict) {
      dict = state.get();
    } else if (state->kind == PyKind::kTuple && state->items.size() == 2 &&
               state->items[0]->kind == PyKind::kDict) {
      dict = state->items[0].get();  // (dict, slots)
    }
    if (target.kind == PyKind::kObject) {
      if (dict != nullptr && (target.cls == "argparse.Namespace" || target.cls == "types.SimpleNamespace")) {
        for (const auto& [k, v] : dict->entries) target.entries.emplace_back(k, v);
      } else {
        target.state = std::move(state);
      }
      return absl::OkStatus();
    }
    if (target.kind == PyKind::kDict && dict != nullptr && dict->entries.empty()) return absl::OkStatus();
    if (target.kind == PyKind::kTensor && state->kind == PyKind::kNone) return absl::OkStatus();
    return Err(absl::StrCat("BUILD on a ", KindName(target.kind)), at);
  }

  absl::Status Step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        MXMACA_RETURN_IF_ERROR(Need(1));
        const int p = static_cast<uint8_t>(d_[pos_++]);
        if (p < 2 || p > 5) return Err(absl::StrCat("pickle protocol ", p, " (expected 2 to 5)"), at);
        return absl::OkStatus();
      }
      case 0x95:  // FRAME: a length hint only
        MXMACA_RETURN_IF_ERROR(Need(8));
        pos_ += 8;
        return absl::OkStatus();
      case '.':
        stopped_ = true;
        return absl::OkStatus();
      case '(':
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case '0': return Pop().status();
      case '1': return PopMark().status();
      case '2': {
        MXMACA_ASSIGN_OR_RETURN(PyRef * t, Top());
        stack_.push_back(*t);
        return absl::OkStatus();
      }
      case 'N': stack_.push_back(PyNone()); return absl::OkStatus();
      case 0x88: stack_.push_back(PyBool(true)); return absl::OkStatus();
      case 0x89: stack_.push_back(PyBool(false)); return absl::OkStatus();
      case 'K':
        MXMACA_RETURN_IF_ERROR(Need(1));
        stack_.push_back(PyInt(static_cast<int64_t>(ReadLe(1))));
        return absl::OkStatus();
      case 'M':
        MXMACA_RETURN_IF_ERROR(Need(2));
        stack_.push_back(PyInt(static_cast<int64_t>(ReadLe(2))));
        return absl::OkStatus();
      case 'J':
        MXMACA_RETURN_IF_ERROR(Need(4));
        stack_.push_back(PyInt(static_cast<int32_t>(ReadLe(4))));
        return absl::OkStatus();
      case 0x8a:
      case 0x8b: {  // LONG1 / LONG4: little-endian two's complement
        MXMACA_RETURN_IF_ERROR(Need(op == 0x8a ? 1 : 4));
        const uint64_t n = ReadLe(op == 0x8a ? 1 : 4);
        if (n > 8) return Err(absl::StrCat("integer of ", n, " bytes (wider than 64 bits)"), at);
        MXMACA_RETURN_IF_ERROR(Need(n));
        uint64_t v = ReadLe(static_cast<int>(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        stack_.push_back(PyInt(static_cast<int64_t>(v)));
        return absl::OkStatus();
      }
      case 'G': {
        MXMACA_RETURN_IF_ERROR(Need(8));
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(d_[pos_ + k]);
        pos_ += 8;
        double f;
        std::memcpy(&f, &bits, 8);
        stack_.push_back(PyFloat(f));
        return absl::OkStatus();
      }
      case 'X':
      case 0x8c:
      case 0x8d:  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
      case 'T':
      case 'U':  // BINSTRING, SHORT_BINSTRING (Python 2 str)
      case 'B':
      case 'C':
      case 0x8e: {  // BINBYTES, SHORT_BINBYTES, BINBYTES8
        const int w = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d || op == 0x8e) ? 8 : 4;
        MXMACA_RETURN_IF_ERROR(Need(w));
        const uint64_t n = ReadLe(w);
        MXMACA_ASSIGN_OR_RETURN(std::string s, ReadBytes(n));
        const bool bytes = op == 'B' || op == 'C' || op == 0x8e;
        stack_.push_back(bytes ? PyBytes(std::move(s)) : PyStr(std::move(s)));
        return absl::OkStatus();
      }
      case ')': stack_.push_back(PyTuple({})); return absl::OkStatus();
      case ']': stack_.push_back(PyList({})); return absl::OkStatus();
      case '}': stack_.push_back(PyDict()); return absl::OkStatus();
      case 0x8f: {
        PyRef s = PyList({});
        s->kind = PyKind::kSet;
        stack_.push_back(s);
        return absl::OkStatus();
      }
      case 't': {
        MXMACA_ASSIGN_OR_RETURN(std::vector<PyRef> items, PopMark());
        MXMACA_ASSIGN_OR_RETURN(PyRef t, MakeTuple(std::move(items)));
        stack_.push_back(std::move(t));
        return absl::OkStatus();
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84;
        std::vector<PyRef> items(n);
        for (size_t k = n; k-- > 0;) {
          MXMACA_ASSIGN_OR_RETURN(items[k], Pop());
        }
        MXMACA_ASSIGN_OR_RETURN(PyRef t, MakeTuple(std::move(items)));
        stack_.push_back(std::move(t));
        return absl::OkStatus();
      }
      case 'l': {
        MXMACA_ASSIGN_OR_RETURN(std::vector<PyRef> items, PopMark());
        PyRef l = PyList({});
        for (PyRef& i : items) MXMACA_RETURN_IF_ERROR(Append(*l, std::move(i)));
        stack_.push_back(std::move(l));
        return absl::OkStatus();
      }
      case 'd': {
        MXMACA_ASSIGN_OR_RETURN(std::vector<PyRef> items, PopMark());
        if (items.size() % 2 != 0) return Err("DICT with an odd number of items", at);
        PyRef d = PyDict();
        for (size_t k = 0; k < items.size(); k += 2) {
          MXMACA_RETURN_IF_ERROR(SetItem(*d, items[k], items[k + 1]));
        }
        stack_.push_back(std::move(d));
        return absl::OkStatus();
      }
      case 0x91: {  // FROZENSET
        MXMACA_ASSIGN_OR_RETURN(std::vector<PyRef> items, PopMark());
        PyRef s = PyList({});
        s->kind = PyKind::kSet;
        for (PyRef& i : items) MXMACA_RETURN_IF_ERROR(Append(*s, std::move(i)));
        stack_.push_back(std::move(s));
        return absl::OkStatus();
      }
      case 'a': {
        MXMACA_ASSIGN_OR_RETURN(PyRef item, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef * l, Top());
        return Append(**l, std::move(item));
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        MXMACA_ASSIGN_OR_RETURN(std::vector<PyRef> items, PopMark());
        MXMACA_ASSIGN_OR_RETURN(PyRef * l, Top());
        for (PyRef& i : items) MXMACA_RETURN_IF_ERROR(Append(**l, std::move(i)));
        return absl::OkStatus();
      }
      case 's': {
        MXMACA_ASSIGN_OR_RETURN(PyRef value, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef key, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef * d, Top());
        return SetItem(**d, std::move(key), std::move(value));
      }
      case 'u': {
        MXMACA_ASSIGN_OR_RETURN(std::vector<PyRef> items, PopMark());
        if (items.size() % 2 != 0) return Err("SETITEMS with an odd number of items", at);
        MXMACA_ASSIGN_OR_RETURN(PyRef * d, Top());
        for (size_t k = 0; k < items.size(); k += 2) {
          MXMACA_RETURN_IF_ERROR(SetItem(**d, items[k], items[k + 1]));
        }
        return absl::OkStatus();
      }
      case 'q':
      case 'r':
      case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
        uint64_t idx = memo_.size();
        if (op != 0x94) {
          MXMACA_RETURN_IF_ERROR(Need(op == 'q' ? 1 : 4));
          idx = ReadLe(op == 'q' ? 1 : 4);
        }
        MXMACA_ASSIGN_OR_RETURN(PyRef * t, Top());
        memo_[idx] = *t;
        return absl::OkStatus();
      }
      case 'h':
      case 'j': {
        MXMACA_RETURN_IF_ERROR(Need(op == 'h' ? 1 : 4));
        const uint64_t idx = ReadLe(op == 'h' ? 1 : 4);
        auto it = memo_.find(idx);
        if (it == memo_.end()) return Err(absl::StrCat("memo entry ", idx, " does not exist"), at);
        stack_.push_back(it->second);
        return absl::OkStatus();
      }
      case 'c': {
        MXMACA_ASSIGN_OR_RETURN(std::string module, ReadLine());
        MXMACA_ASSIGN_OR_RETURN(std::string name, ReadLine());
        return PushGlobal(module, name, at);
      }
      case 0x93: {  // STACK_GLOBAL
        MXMACA_ASSIGN_OR_RETURN(PyRef name, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef module, Pop());
        if (!module->is_str() || !name->is_str()) return Err("STACK_GLOBAL of non-strings", at);
        return PushGlobal(module->s, name->s, at);
      }
      case 'R': {
        MXMACA_ASSIGN_OR_RETURN(PyRef args, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef f, Pop());
        args->sealed = true;
        MXMACA_ASSIGN_OR_RETURN(PyRef v, Reduce(*f, args, at));
        stack_.push_back(std::move(v));
        return absl::OkStatus();
      }
      case 0x81:
      case 0x92: {  // NEWOBJ, NEWOBJ_EX
        PyRef kwargs;
        if (op == 0x92) {
          MXMACA_ASSIGN_OR_RETURN(kwargs, Pop());
        }
        MXMACA_ASSIGN_OR_RETURN(PyRef args, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef cls, Pop());
        if (cls->kind != PyKind::kGlobal) return Err("NEWOBJ of a non-class", at);
        if (args->kind != PyKind::kTuple) return Err("NEWOBJ arguments are not a tuple", at);
        if (kwargs && (kwargs->kind != PyKind::kDict || !kwargs->entries.empty())) {
          return Err("NEWOBJ_EX with keyword arguments", at);
        }
        if (cls->s == "collections.OrderedDict") {
          stack_.push_back(PyDict());
          stack_.back()->cls = cls->s;
          return absl::OkStatus();
        }
        if (!IsObjectClass(cls->s)) {
          return Err(absl::StrCat("NEWOBJ of ", cls->s, ", which this reader does not build"), at);
        }
        PyRef o = PyObject(cls->s);
        for (const PyRef& i : args->items) MXMACA_RETURN_IF_ERROR(Hold(*o, i));
        o->items = args->items;
        stack_.push_back(std::move(o));
        return absl::OkStatus();
      }
      case 'b': {
        MXMACA_ASSIGN_OR_RETURN(PyRef state, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef * t, Top());
        return Build(**t, std::move(state), at);
      }
      case 'Q': {
        MXMACA_ASSIGN_OR_RETURN(PyRef pid, Pop());
        MXMACA_ASSIGN_OR_RETURN(PyRef v, PersistentLoad(*pid, at));
        stack_.push_back(std::move(v));
        return absl::OkStatus();
      }
      default:
        return Err(absl::StrCat("unsupported pickle opcode 0x", absl::Hex(op, absl::kZeroPad2)), at);
    }
  }

  absl::string_view d_;
  const std::string& what_;
  size_t pos_ = 0;
  bool stopped_ = false;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, PyRef> memo_;
  std::map<std::string, std::shared_ptr<TorchStorage>> storages_;
};

}  // namespace

bool IsAllowedGlobal(absl::string_view module, absl::string_view name) {
  const std::string q = absl::StrCat(module, ".", name);
  if (InList(q, kObjectClasses) || InList(q, kFunctions)) return true;
  if (module == "torch") {
    ScalarType t;
    if (ScalarTypeFromStorageClass(name, &t)) return true;
    if (InList(name, kDtypes)) return true;
  }
  return false;
}

absl::StatusOr<PyRef> Unpickle(absl::string_view data, const std::string& what) {
  Unpickler u(data, what);
  return u.Run();
}

}  // namespace mxmaca::actors::checkpoint::megatron
