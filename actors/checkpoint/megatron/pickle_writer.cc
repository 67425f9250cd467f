// actors/checkpoint/megatron/pickle_writer.cc: see pickle_writer.h.
#include "actors/checkpoint/megatron/pickle_writer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

class Pickler {
 public:
  absl::Status Write(const PyValue& v, int depth) {
    if (depth > 256) return absl::InvalidArgumentError("pickle: values nest deeper than 256");
    switch (v.kind) {
      case PyKind::kNone: out_ += 'N'; return absl::OkStatus();
      case PyKind::kBool: out_ += v.b ? '\x88' : '\x89'; return absl::OkStatus();
      case PyKind::kInt: Int(v.i); return absl::OkStatus();
      case PyKind::kFloat: {
        uint64_t bits;
        std::memcpy(&bits, &v.f, 8);
        out_ += 'G';
        for (int k = 7; k >= 0; --k) out_ += static_cast<char>((bits >> (8 * k)) & 0xFF);
        return absl::OkStatus();
      }
      case PyKind::kStr: Str(v.s); return absl::OkStatus();
      case PyKind::kBytes: {
        // Protocol 2: _codecs.encode(<the bytes as latin-1 text>, 'latin1').
        Global("_codecs", "encode");
        std::string text;
        for (unsigned char c : v.s) {
          if (c < 0x80) {
            text += static_cast<char>(c);
          } else {
            text += static_cast<char>(0xC0 | (c >> 6));
            text += static_cast<char>(0x80 | (c & 0x3F));
          }
        }
        Str(text);
        Str("latin1");
        out_ += '\x86';  // TUPLE2
        out_ += 'R';
        return absl::OkStatus();
      }
      case PyKind::kTuple: {
        if (v.items.empty()) {
          out_ += ')';
          return absl::OkStatus();
        }
        if (v.items.size() > 3) out_ += '(';
        for (const PyRef& i : v.items) MXMACA_RETURN_IF_ERROR(Child(i, depth));
        out_ += v.items.size() == 1 ? '\x85' : v.items.size() == 2 ? '\x86' : v.items.size() == 3 ? '\x87' : 't';
        return absl::OkStatus();
      }
      case PyKind::kList:
        out_ += ']';
        if (!v.items.empty()) {
          out_ += '(';
          for (const PyRef& i : v.items) MXMACA_RETURN_IF_ERROR(Child(i, depth));
          out_ += 'e';
        }
        return absl::OkStatus();
      case PyKind::kSet:
        Global("__builtin__", "set");
        out_ += ']';
        if (!v.items.empty()) {
          out_ += '(';
          for (const PyRef& i : v.items) MXMACA_RETURN_IF_ERROR(Child(i, depth));
          out_ += 'e';
        }
        out_ += "\x85R";
        return absl::OkStatus();
      case PyKind::kDict:
        if (v.cls == "collections.OrderedDict") {
          Global("collections", "OrderedDict");
          out_ += ")R";
        } else {
          out_ += '}';
        }
        return Items(v, depth);
      case PyKind::kGlobal: {
        const size_t dot = v.s.rfind('.');
        if (dot == std::string::npos) return absl::InvalidArgumentError("pickle: global without a module");
        Global(v.s.substr(0, dot), v.s.substr(dot + 1));
        return absl::OkStatus();
      }
      case PyKind::kObject: {
        const size_t dot = v.cls.rfind('.');
        if (dot == std::string::npos) return absl::InvalidArgumentError("pickle: object without a class");
        if (v.items.empty() && !v.s.empty()) {  // an enum member by name: getattr(cls, name)
          Global("__builtin__", "getattr");
          Global(v.cls.substr(0, dot), v.cls.substr(dot + 1));
          Str(v.s);
          out_ += "\x86R";
          return absl::OkStatus();
        }
        Global(v.cls.substr(0, dot), v.cls.substr(dot + 1));
        if (v.cls == "argparse.Namespace" || v.cls == "types.SimpleNamespace") {
          out_ += ")\x81}";  // EMPTY_TUPLE NEWOBJ EMPTY_DICT
          MXMACA_RETURN_IF_ERROR(Items(v, depth));
          out_ += 'b';
          return absl::OkStatus();
        }
        PyValue args;
        args.kind = PyKind::kTuple;
        args.items = v.items;
        MXMACA_RETURN_IF_ERROR(Write(args, depth + 1));
        out_ += 'R';
        if (v.state) {
          MXMACA_RETURN_IF_ERROR(Child(v.state, depth));
          out_ += 'b';
        }
        return absl::OkStatus();
      }
      case PyKind::kTensor: {
        const TorchTensor& t = *v.tensor;
        if (!t.storage) return absl::InvalidArgumentError("pickle: tensor without a storage");
        Global("torch._utils", "_rebuild_tensor_v2");
        out_ += "((";
        Str("storage");
        Global("torch", StorageClassName(t.storage->dtype));
        Str(t.storage->key);
        Str(t.storage->location);
        Int(t.storage->numel);
        out_ += "tQ";  // TUPLE BINPERSID
        Int(t.storage_offset);
        IntTuple(t.size);
        IntTuple(t.stride);
        out_ += t.requires_grad ? '\x88' : '\x89';
        Global("collections", "OrderedDict");
        out_ += ")R";
        out_ += "tR";
        return absl::OkStatus();
      }
      case PyKind::kStorage:
        return absl::InvalidArgumentError("pickle: a bare storage cannot be written");
    }
    return absl::InvalidArgumentError("pickle: unknown value kind");
  }

  std::string Take() { return std::move(out_); }

 private:
  absl::Status Child(const PyRef& c, int depth) {
    if (!c) return absl::InvalidArgumentError("pickle: null value");
    return Write(*c, depth + 1);
  }
  absl::Status Items(const PyValue& v, int depth) {
    if (v.entries.empty()) return absl::OkStatus();
    out_ += '(';
    for (const auto& [k, val] : v.entries) {
      MXMACA_RETURN_IF_ERROR(Child(k, depth));
      MXMACA_RETURN_IF_ERROR(Child(val, depth));
    }
    out_ += 'u';
    return absl::OkStatus();
  }
  void Int(int64_t i) {
    if (i >= 0 && i < 256) {
      out_ += 'K';
      out_ += static_cast<char>(i);
    } else if (i >= 0 && i < 65536) {
      out_ += 'M';
      out_ += static_cast<char>(i & 0xFF);
      out_ += static_cast<char>(i >> 8);
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
      out_ += 'J';
      const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(i));
      for (int k = 0; k < 4; ++k) out_ += static_cast<char>((u >> (8 * k)) & 0xFF);
    } else {
      // LONG1 with the fewest two's-complement bytes (as pickle.encode_long).
      const uint64_t u = static_cast<uint64_t>(i);
      int n = 8;
      while (n > 1) {
        const int64_t shifted = i >> (8 * (n - 1) - 1);
        if (shifted == 0 || shifted == -1) {
          --n;
        } else {
          break;
        }
      }
      out_ += '\x8a';
      out_ += static_cast<char>(n);
      for (int k = 0; k < n; ++k) out_ += static_cast<char>((u >> (8 * k)) & 0xFF);
    }
  }
  void IntTuple(const std::vector<int64_t>& v) {
    PyValue t;
    t.kind = PyKind::kTuple;
    for (int64_t x : v) t.items.push_back(PyInt(x));
    (void)Write(t, 0);
  }
  void Str(const std::string& s) {
    out_ += 'X';
    const uint32_t n = static_cast<uint32_t>(s.size());
    for (int k = 0; k < 4; ++k) out_ += static_cast<char>((n >> (8 * k)) & 0xFF);
    out_ += s;
  }
  void Global(const std::string& module, const std::string& name) {
    out_ += 'c';
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
  }

  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> Pickle(const PyValue& root) {
  Pickler p;
  std::string out = "\x80\x02";
  MXMACA_RETURN_IF_ERROR(p.Write(root, 0));
  out += p.Take();
  out += '.';
  return out;
}

}  // namespace mxmaca::actors::checkpoint::megatron
