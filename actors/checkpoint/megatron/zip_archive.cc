// actors/checkpoint/megatron/zip_archive.cc: see zip_archive.h.
#include "actors/checkpoint/megatron/zip_archive.h"

#include <array>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "actors/checkpoint/file_util.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB", as PyTorchStreamWriter pads
constexpr uint64_t kAlignment = 64;
constexpr uint32_t k32Max = 0xFFFFFFFFu;

using Table = std::array<std::array<uint32_t, 256>, 8>;

const Table& CrcTable() {
  static const Table table = [] {
    Table t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
    return t;
  }();
  return table;
}

uint16_t Le16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8));
}
uint32_t Le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Le64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void Put16(std::string* s, uint16_t v) { s->append(reinterpret_cast<const char*>(&v), 2); }
void Put32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void Put64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

uint32_t Crc32(const void* data, size_t size, uint32_t crc) {
  const Table& t = CrcTable();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (size >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = t[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
  return ~c;
}

// ---- reader ----

absl::StatusOr<ZipReader> ZipReader::Open(const char* data, uint64_t size, std::string path) {
  auto loss = [&path](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": ", what));
  };
  if (size < 22 || Le32(data) != kLocalSig) {
    return loss(size < 4 ? "truncated: too short to be a zip archive (torch.save file)"
                         : "not a zip archive (torch.save files start with PK\\3\\4)");
  }
  // End of central directory: the last 22 + comment bytes.
  std::optional<uint64_t> end;
  const uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (uint64_t p = size - 22 + 1; p-- > lowest;) {
    if (Le32(data + p) == kEndSig && p + 22 + Le16(data + p + 20) == size) {
      end = p;
      break;
    }
  }
  if (!end) return loss("truncated: no end-of-central-directory record (an incomplete write?)");
  const char* e = data + *end;
  uint64_t count = Le16(e + 10);
  uint64_t cd_size = Le32(e + 12);
  uint64_t cd_offset = Le32(e + 16);
  if (Le16(e + 4) != 0 || Le16(e + 6) != 0) return loss("multi-disk archives are not supported");
  if (count == 0xFFFF || cd_size == k32Max || cd_offset == k32Max) {
    if (*end < 20 || Le32(data + *end - 20) != kZip64LocatorSig) {
      return loss("the end record asks for zip64 but there is no zip64 locator");
    }
    const uint64_t z = Le64(data + *end - 20 + 8);
    if (z > *end - 20 || *end - 20 - z < 56 || Le32(data + z) != kZip64EndSig) {
      return loss("zip64 end-of-central-directory record missing or out of place");
    }
    count = Le64(data + z + 32);
    cd_size = Le64(data + z + 40);
    cd_offset = Le64(data + z + 48);
  }
  if (cd_offset > *end || cd_size > *end - cd_offset) {
    return loss(absl::StrCat("truncated: the central directory (offset ", cd_offset, ", ",
                             cd_size, " bytes) lies outside the file of ", size, " bytes"));
  }
  ZipReader r;
  r.data_ = data;
  r.size_ = size;
  r.path_ = std::move(path);
  uint64_t p = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  if (count > cd_size / 46) return loss(absl::StrCat("central directory claims ", count, " entries in ", cd_size, " bytes"));
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_end - p < 46 || Le32(data + p) != kCentralSig) {
      return loss(absl::StrCat("central directory entry ", i, " is damaged"));
    }
    const char* c = data + p;
    const uint16_t flags = Le16(c + 8), method = Le16(c + 10);
    const uint16_t name_len = Le16(c + 28), extra_len = Le16(c + 30), comment_len = Le16(c + 32);
    if (cd_end - p - 46 < static_cast<uint64_t>(name_len) + extra_len + comment_len) {
      return loss(absl::StrCat("central directory entry ", i, " runs past the directory"));
    }
    ZipEntry entry;
    entry.name.assign(c + 46, name_len);
    entry.crc32 = Le32(c + 16);
    uint64_t csize = Le32(c + 20), usize = Le32(c + 24), local = Le32(c + 42);
    // zip64 extra: the fields that are 0xFFFFFFFF above, in this order.
    const char* x = c + 46 + name_len;
    for (uint64_t q = 0; q + 4 <= extra_len;) {
      const uint16_t id = Le16(x + q), len = Le16(x + q + 2);
      if (q + 4 + len > extra_len) return loss(absl::StrCat("entry ", entry.name, ": damaged extra field"));
      if (id == kZip64ExtraId) {
        uint64_t f = q + 4;
        auto take = [&](uint64_t* v) -> bool {
          if (f + 8 > q + 4 + len) return false;
          *v = Le64(x + f);
          f += 8;
          return true;
        };
        if ((usize == k32Max && !take(&usize)) || (csize == k32Max && !take(&csize)) ||
            (local == k32Max && !take(&local))) {
          return loss(absl::StrCat("entry ", entry.name, ": zip64 extra field too short"));
        }
      }
      q += 4 + len;
    }
    if (flags & 1) return loss(absl::StrCat("entry ", entry.name, " is encrypted"));
    if (method != 0) {
      return loss(absl::StrCat("entry ", entry.name, " is compressed (method ", method,
                               "); torch.save writes STORED entries only"));
    }
    if (csize != usize) {
      return loss(absl::StrCat("entry ", entry.name, ": stored sizes differ (", csize, " vs ", usize, ")"));
    }
    if (local > size || size - local < 30 || Le32(data + local) != kLocalSig) {
      return loss(absl::StrCat("entry ", entry.name, ": local header missing (truncated?)"));
    }
    const uint16_t lname = Le16(data + local + 26), lextra = Le16(data + local + 28);
    if (size - local - 30 < static_cast<uint64_t>(lname) + lextra ||
        absl::string_view(data + local + 30, lname) != entry.name) {
      return loss(absl::StrCat("entry ", entry.name, ": local header does not match the directory"));
    }
    entry.data_offset = local + 30 + lname + lextra;
    entry.size = usize;
    if (entry.data_offset > size || size - entry.data_offset < usize) {
      return loss(absl::StrCat("truncated: entry ", entry.name, " needs bytes [", entry.data_offset,
                               ", ", entry.data_offset + usize, ") of a ", size, "-byte file"));
    }
    if (!r.by_name_.emplace(entry.name, r.entries_.size()).second) {
      return loss(absl::StrCat("duplicate entry ", entry.name));
    }
    r.entries_.push_back(std::move(entry));
    p += 46 + name_len + extra_len + comment_len;
  }
  return r;
}

const ZipEntry* ZipReader::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

absl::Status ZipReader::VerifyCrc(const ZipEntry& e) const {
  const uint32_t crc = Crc32(data_ + e.data_offset, e.size);
  if (crc != e.crc32) {
    return absl::DataLossError(absl::StrCat(path_, ": entry ", e.name, " is corrupt (CRC-32 ",
                                            crc, ", recorded ", e.crc32, ")"));
  }
  return absl::OkStatus();
}

// ---- writer ----

struct ZipWriter::State {
  std::string path;
  std::optional<DurableFile> file;
  uint64_t offset = 0;
  std::string central;
  uint64_t count = 0;
  std::map<std::string, bool> names;
  bool finished = false;

  absl::Status Write(absl::string_view bytes) {
    MXMACA_RETURN_IF_ERROR(file->Append(bytes.data(), bytes.size()));
    offset += bytes.size();
    return absl::OkStatus();
  }
};

ZipWriter::ZipWriter(std::unique_ptr<State> s) : state_(std::move(s)) {}
ZipWriter::ZipWriter(ZipWriter&&) noexcept = default;
ZipWriter& ZipWriter::operator=(ZipWriter&&) noexcept = default;
ZipWriter::~ZipWriter() = default;

absl::StatusOr<ZipWriter> ZipWriter::Create(const std::string& path) {
  auto s = std::make_unique<State>();
  s->path = path;
  MXMACA_ASSIGN_OR_RETURN(DurableFile f, DurableFile::Create(path));
  s->file.emplace(std::move(f));
  return ZipWriter(std::move(s));
}

absl::Status ZipWriter::Add(const std::string& name, const std::vector<absl::string_view>& pieces) {
  State& s = *state_;
  if (s.finished) return absl::FailedPreconditionError(absl::StrCat(s.path, ": Add after Finish"));
  if (name.empty() || name.size() > 0xFFFF || !s.names.emplace(name, true).second) {
    return absl::InvalidArgumentError(absl::StrCat(s.path, ": bad or duplicate entry name '", name, "'"));
  }
  uint64_t size = 0;
  uint32_t crc = 0;
  for (absl::string_view p : pieces) {
    crc = Crc32(p.data(), p.size(), crc);
    size += p.size();
  }
  const bool big = size >= k32Max;
  const uint64_t local = s.offset;
  const uint16_t version = big || local >= k32Max ? 45 : 20;
  std::string h;
  Put32(&h, kLocalSig);
  Put16(&h, version);
  Put16(&h, 0);     // flags
  Put16(&h, 0);     // STORED
  Put16(&h, 0);     // time
  Put16(&h, 0x21);  // date 1980-01-01
  Put32(&h, crc);
  Put32(&h, big ? k32Max : static_cast<uint32_t>(size));
  Put32(&h, big ? k32Max : static_cast<uint32_t>(size));
  Put16(&h, static_cast<uint16_t>(name.size()));
  const uint64_t z64 = big ? 20 : 0;
  const uint64_t base = local + 30 + name.size() + z64 + 4;
  const uint64_t pad = (kAlignment - base % kAlignment) % kAlignment;
  Put16(&h, static_cast<uint16_t>(z64 + 4 + pad));
  h += name;
  if (big) {
    Put16(&h, kZip64ExtraId);
    Put16(&h, 16);
    Put64(&h, size);
    Put64(&h, size);
  }
  Put16(&h, kPaddingExtraId);
  Put16(&h, static_cast<uint16_t>(pad));
  h.append(pad, 'Z');
  MXMACA_RETURN_IF_ERROR(s.Write(h));
  for (absl::string_view p : pieces) MXMACA_RETURN_IF_ERROR(s.Write(p));

  // Central directory entry.
  const bool big_off = local >= k32Max;
  std::string extra;
  if (big || big_off) {
    std::string f;
    if (big) {
      Put64(&f, size);
      Put64(&f, size);
    }
    if (big_off) Put64(&f, local);
    Put16(&extra, kZip64ExtraId);
    Put16(&extra, static_cast<uint16_t>(f.size()));
    extra += f;
  }
  std::string& c = s.central;
  Put32(&c, kCentralSig);
  Put16(&c, version);  // made by (MS-DOS attributes)
  Put16(&c, version);
  Put16(&c, 0);
  Put16(&c, 0);
  Put16(&c, 0);
  Put16(&c, 0x21);
  Put32(&c, crc);
  Put32(&c, big ? k32Max : static_cast<uint32_t>(size));
  Put32(&c, big ? k32Max : static_cast<uint32_t>(size));
  Put16(&c, static_cast<uint16_t>(name.size()));
  Put16(&c, static_cast<uint16_t>(extra.size()));
  Put16(&c, 0);  // comment
  Put16(&c, 0);  // disk
  Put16(&c, 0);  // internal attributes
  Put32(&c, 0);  // external attributes
  Put32(&c, big_off ? k32Max : static_cast<uint32_t>(local));
  c += name;
  c += extra;
  ++s.count;
  return absl::OkStatus();
}

absl::Status ZipWriter::Finish() {
  State& s = *state_;
  if (s.finished) return absl::FailedPreconditionError(absl::StrCat(s.path, ": Finish twice"));
  s.finished = true;
  const uint64_t cd_offset = s.offset;
  const uint64_t cd_size = s.central.size();
  MXMACA_RETURN_IF_ERROR(s.Write(s.central));
  const bool z64 = s.count >= 0xFFFF || cd_offset >= k32Max || cd_size >= k32Max;
  std::string t;
  if (z64) {
    const uint64_t z = s.offset;
    Put32(&t, kZip64EndSig);
    Put64(&t, 44);
    Put16(&t, 45);
    Put16(&t, 45);
    Put32(&t, 0);
    Put32(&t, 0);
    Put64(&t, s.count);
    Put64(&t, s.count);
    Put64(&t, cd_size);
    Put64(&t, cd_offset);
    Put32(&t, kZip64LocatorSig);
    Put32(&t, 0);
    Put64(&t, z);
    Put32(&t, 1);
  }
  Put32(&t, kEndSig);
  Put16(&t, 0);
  Put16(&t, 0);
  Put16(&t, z64 ? 0xFFFF : static_cast<uint16_t>(s.count));
  Put16(&t, z64 ? 0xFFFF : static_cast<uint16_t>(s.count));
  Put32(&t, z64 ? k32Max : static_cast<uint32_t>(cd_size));
  Put32(&t, z64 ? k32Max : static_cast<uint32_t>(cd_offset));
  Put16(&t, 0);
  MXMACA_RETURN_IF_ERROR(s.Write(t));
  return s.file->Close();
}

}  // namespace mxmaca::actors::checkpoint::megatron
