// actors/checkpoint/megatron/torch_file.cc: see torch_file.h.
#include "actors/checkpoint/megatron/torch_file.h"

#include <cmath>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/file_util.h"
#include "actors/checkpoint/megatron/pickle_reader.h"
#include "actors/checkpoint/megatron/pickle_writer.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

// Visit every tensor in a tree (no cycles: the unpickler forbids them).
void ForEachStorage(const PyValue& v, const std::function<void(const TorchStorage&)>& f, int depth = 0) {
  if (depth > 300) return;
  if (v.kind == PyKind::kTensor && v.tensor && v.tensor->storage) f(*v.tensor->storage);
  for (const PyRef& i : v.items) if (i) ForEachStorage(*i, f, depth + 1);
  for (const auto& [k, val] : v.entries) if (val) ForEachStorage(*val, f, depth + 1);
  if (v.state) ForEachStorage(*v.state, f, depth + 1);
}

}  // namespace

uint16_t BFloat16FromFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

TorchFile::TorchFile(TorchFile&&) noexcept = default;
TorchFile& TorchFile::operator=(TorchFile&&) noexcept = default;
TorchFile::~TorchFile() = default;

absl::StatusOr<TorchFile> TorchFile::Open(const std::string& path) {
  TorchFile t;
  t.path_ = path;
  MXMACA_ASSIGN_OR_RETURN(t.file_, MappedFile::Open(path));
  MXMACA_ASSIGN_OR_RETURN(ZipReader zip, ZipReader::Open(t.file_->data(), t.file_->size(), path));
  t.zip_ = std::make_unique<ZipReader>(std::move(zip));
  // The archive folder: the one holding data.pkl.
  const ZipEntry* pkl = nullptr;
  for (const ZipEntry& e : t.zip_->entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.substr(slash + 1) == "data.pkl") {
      pkl = &e;
      t.prefix_ = e.name.substr(0, slash + 1);
      break;
    }
  }
  if (pkl == nullptr) {
    return absl::DataLossError(absl::StrCat(path, ": no <archive>/data.pkl entry (not a torch.save file)"));
  }
  MXMACA_RETURN_IF_ERROR(t.zip_->VerifyCrc(*pkl));
  if (const ZipEntry* v = t.zip_->Find(t.prefix_ + "version")) {
    const std::string text(t.zip_->Data(*v));
    if (text != "1\n" && text != "2\n" && text != "3\n" && text != "1" && text != "2" && text != "3") {
      return absl::DataLossError(absl::StrCat(path, ": ", v->name, " is '", text,
                                              "'; this reader knows versions 1 to 3"));
    }
  } else {
    return absl::DataLossError(absl::StrCat(path, ": no ", t.prefix_, "version entry"));
  }
  if (const ZipEntry* b = t.zip_->Find(t.prefix_ + "byteorder")) {
    if (t.zip_->Data(*b) != "little") {
      return absl::UnimplementedError(absl::StrCat(path, ": byteorder '", t.zip_->Data(*b),
                                                   "'; only little-endian files are read"));
    }
  }
  MXMACA_ASSIGN_OR_RETURN(t.root_, Unpickle(t.zip_->Data(*pkl), absl::StrCat(path, ": ", pkl->name)));
  absl::Status status;
  ForEachStorage(*t.root_, [&](const TorchStorage& s) {
    if (!status.ok()) return;
    const ZipEntry* e = t.zip_->Find(absl::StrCat(t.prefix_, "data/", s.key));
    if (e == nullptr) {
      status = absl::DataLossError(absl::StrCat(path, ": storage '", s.key, "' has no entry ",
                                                t.prefix_, "data/", s.key));
      return;
    }
    const uint64_t need = static_cast<uint64_t>(s.numel) * ElementSize(s.dtype);
    if (e->size < need) {
      status = absl::DataLossError(absl::StrCat(path, ": storage '", s.key, "' too short: ",
                                                e->size, " bytes, ", s.numel, " ",
                                                StorageClassName(s.dtype), " elements need ", need));
    }
  });
  MXMACA_RETURN_IF_ERROR(status);
  return t;
}

absl::string_view TorchFile::StorageBytes(const TorchStorage& s) const {
  const ZipEntry* e = zip_->Find(absl::StrCat(prefix_, "data/", s.key));
  if (e == nullptr) return {};
  return zip_->Data(*e).substr(0, static_cast<size_t>(s.numel) * ElementSize(s.dtype));
}

absl::Status TorchFile::VerifyCrcs() const {
  for (const ZipEntry& e : zip_->entries()) MXMACA_RETURN_IF_ERROR(zip_->VerifyCrc(e));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> TorchFile::ReadFloat(const TorchTensor& t,
                                                        const std::string& what) const {
  const absl::string_view bytes = StorageBytes(*t.storage);
  const ScalarType dt = t.storage->dtype;
  const int es = ElementSize(dt);
  if (bytes.size() < static_cast<size_t>(t.storage->numel) * es) {
    return absl::DataLossError(absl::StrCat(path_, ": storage of ", what, " is missing or too short"));
  }
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  const char* base = bytes.data();
  auto at = [&](int64_t idx) -> float {
    const char* p = base + idx * es;
    switch (dt) {
      case ScalarType::kFloat: { float f; std::memcpy(&f, p, 4); return f; }
      case ScalarType::kDouble: { double d; std::memcpy(&d, p, 8); return static_cast<float>(d); }
      case ScalarType::kBFloat16: {
        uint16_t h; std::memcpy(&h, p, 2);
        uint32_t u = static_cast<uint32_t>(h) << 16; float f; std::memcpy(&f, &u, 4); return f;
      }
      case ScalarType::kHalf: { uint16_t h; std::memcpy(&h, p, 2); return HalfToFloat(h); }
      case ScalarType::kLong: { int64_t v; std::memcpy(&v, p, 8); return static_cast<float>(v); }
      case ScalarType::kInt: { int32_t v; std::memcpy(&v, p, 4); return static_cast<float>(v); }
      case ScalarType::kShort: { int16_t v; std::memcpy(&v, p, 2); return static_cast<float>(v); }
      case ScalarType::kChar: return static_cast<float>(static_cast<int8_t>(*p));
      case ScalarType::kByte:
      case ScalarType::kBool: return static_cast<float>(static_cast<uint8_t>(*p));
    }
    return 0;
  };
  if (n == 0) return out;
  if (t.IsContiguous() && dt == ScalarType::kFloat) {
    std::memcpy(out.data(), base + t.storage_offset * 4, static_cast<size_t>(n) * 4);
    return out;
  }
  // Strided walk in C order.
  const size_t rank = t.size.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = t.storage_offset;
    for (size_t d = 0; d < rank; ++d) off += idx[d] * t.stride[d];
    out[static_cast<size_t>(k)] = at(off);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < t.size[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

PyRef TorchFileWriter::AddTensor(ScalarType dtype, std::vector<int64_t> shape, const void* data) {
  auto st = std::make_shared<TorchStorage>();
  st->key = std::to_string(storages_.size());
  st->dtype = dtype;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  st->numel = n;
  auto t = std::make_shared<TorchTensor>();
  t->storage = st;
  t->size = shape;
  t->stride.assign(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) t->stride[k - 1] = t->stride[k] * shape[k];
  storages_.push_back({st->key, absl::string_view(static_cast<const char*>(data),
                                                  static_cast<size_t>(n) * ElementSize(dtype))});
  return PyTensorValue(std::move(t));
}

PyRef TorchFileWriter::AddOwnedTensor(ScalarType dtype, std::vector<int64_t> shape, std::string bytes) {
  owned_.push_back(std::make_unique<std::string>(std::move(bytes)));
  return AddTensor(dtype, std::move(shape), owned_.back()->data());
}

absl::Status TorchFileWriter::Write(const std::string& path, const PyValue& root) const {
  std::string archive = path;
  const size_t slash = archive.rfind('/');
  if (slash != std::string::npos) archive = archive.substr(slash + 1);
  const size_t dot = archive.rfind('.');
  if (dot != std::string::npos && dot > 0) archive = archive.substr(0, dot);
  if (archive.empty()) archive = "archive";
  MXMACA_ASSIGN_OR_RETURN(std::string pkl, Pickle(root));
  MXMACA_ASSIGN_OR_RETURN(ZipWriter zip, ZipWriter::Create(path));
  MXMACA_RETURN_IF_ERROR(zip.Add(archive + "/data.pkl", pkl));
  MXMACA_RETURN_IF_ERROR(zip.Add(archive + "/byteorder", "little"));
  for (const Storage& s : storages_) {
    MXMACA_RETURN_IF_ERROR(zip.Add(absl::StrCat(archive, "/data/", s.key), s.bytes));
  }
  MXMACA_RETURN_IF_ERROR(zip.Add(archive + "/version", "3\n"));
  return zip.Finish();
}

}  // namespace mxmaca::actors::checkpoint::megatron
