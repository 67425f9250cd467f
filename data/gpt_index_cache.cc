// data/gpt_index_cache.cc: see gpt_index_cache.h.
#include "data/gpt_index_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mxmaca::data {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

int ItemSize(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kInt16:
      return 2;
    case NpyDtype::kInt32:
      return 4;
    case NpyDtype::kUint32:
      return 4;
    case NpyDtype::kInt64:
      return 8;
  }
  return 8;
}

bool FitsDtype(NpyDtype dtype, int64_t v) {
  switch (dtype) {
    case NpyDtype::kInt16:
      return v >= INT16_MIN && v <= INT16_MAX;
    case NpyDtype::kInt32:
      return v >= INT32_MIN && v <= INT32_MAX;
    case NpyDtype::kUint32:
      return v >= 0 && v <= UINT32_MAX;
    case NpyDtype::kInt64:
      return true;
  }
  return false;
}

std::string OsError(const std::string& what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

absl::Status WriteAtomic(const std::string& path, const std::string& head,
                         const std::string& body) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::PermissionDeniedError(OsError("cannot create", tmp));
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size() &&
            std::fwrite(body.data(), 1, body.size(), f) == body.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::DataLossError(OsError("cannot write", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(OsError("cannot rename onto", path));
  }
  return absl::OkStatus();
}

}  // namespace

const char* NpyDescr(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kInt16:
      return "<i2";
    case NpyDtype::kInt32:
      return "<i4";
    case NpyDtype::kUint32:
      return "<u4";
    case NpyDtype::kInt64:
      return "<i8";
  }
  return "?";
}

absl::Status WriteNpyAtomic(const std::string& path, NpyDtype dtype,
                            const std::vector<int64_t>& shape, absl::Span<const int64_t> values) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (shape.empty() || count != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("npy ", path, ": ", values.size(), " values do not fill the shape"));
  }
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    absl::StrAppend(&shape_text, i ? ", " : "", shape[i]);
  }
  absl::StrAppend(&shape_text, shape.size() == 1 ? ",)" : ")");
  std::string header = absl::StrCat("{'descr': '", NpyDescr(dtype),
                                    "', 'fortran_order': False, 'shape': ", shape_text, ", }");
  // Pad with spaces so magic(6) + version(2) + length(2) + header ends on 64 bytes,
  // the last byte a newline.
  const size_t total = ((10 + header.size() + 1 + 63) / 64) * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header.push_back('\n');
  std::string head(kMagic, 6);
  head.push_back('\x01');
  head.push_back('\x00');
  head.push_back(static_cast<char>(header.size() & 0xff));
  head.push_back(static_cast<char>(header.size() >> 8));
  head += header;

  const int item = ItemSize(dtype);
  std::string body(values.size() * item, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t v = values[i];
    if (!FitsDtype(dtype, v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("npy ", path, ": value ", v, " at ", i, " does not fit ", NpyDescr(dtype)));
    }
    const uint64_t u = static_cast<uint64_t>(v);
    for (int b = 0; b < item; ++b) body[i * item + b] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  return WriteAtomic(path, head, body);
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  auto contents = ReadWholeFile(path);
  if (!contents.ok()) return contents.status();
  const std::string& s = *contents;
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("npy ", path, ": ", why));
  };
  if (s.size() < 10 || s.compare(0, 6, std::string(kMagic, 6)) != 0) {
    return bad("bad magic (expected \\x93NUMPY)");
  }
  if (s[6] != '\x01') return bad(absl::StrCat("format version ", int(s[6]), " (expected 1)"));
  const size_t header_len = static_cast<uint8_t>(s[8]) | (static_cast<uint8_t>(s[9]) << 8);
  if (s.size() < 10 + header_len) return bad("truncated header");
  const std::string header = s.substr(10, header_len);
  NpyArray array;
  // descr
  const size_t d = header.find("'descr': '");
  if (d == std::string::npos) return bad("no descr in header");
  const std::string descr = header.substr(d + 10, 3);
  bool known = false;
  for (NpyDtype t : {NpyDtype::kInt16, NpyDtype::kInt32, NpyDtype::kUint32, NpyDtype::kInt64}) {
    if (descr == NpyDescr(t)) {
      array.dtype = t;
      known = true;
    }
  }
  if (!known) return bad(absl::StrCat("unsupported dtype '", descr, "'"));
  if (header.find("'fortran_order': False") == std::string::npos) {
    return bad("fortran_order is not False");
  }
  const size_t sh = header.find("'shape': (");
  const size_t she = header.find(')', sh);
  if (sh == std::string::npos || she == std::string::npos) return bad("no shape in header");
  const std::string dims = header.substr(sh + 10, she - sh - 10);
  int64_t count = 1;
  for (absl::string_view part : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v) || v < 0) {
      return bad(absl::StrCat("bad shape '", dims, "'"));
    }
    array.shape.push_back(v);
    count *= v;
  }
  if (array.shape.empty()) return bad("scalar array (expected 1 or 2 dimensions)");
  const int item = ItemSize(array.dtype);
  const size_t data_begin = 10 + header_len;
  if (s.size() - data_begin != static_cast<size_t>(count) * item) {
    return bad(absl::StrCat("holds ", s.size() - data_begin, " data bytes, the header says ", count,
                            " x ", item));
  }
  array.values.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    uint64_t u = 0;
    for (int b = 0; b < item; ++b) {
      u |= static_cast<uint64_t>(static_cast<uint8_t>(s[data_begin + i * item + b])) << (8 * b);
    }
    int64_t v;
    switch (array.dtype) {
      case NpyDtype::kInt16:
        v = static_cast<int16_t>(u);
        break;
      case NpyDtype::kInt32:
        v = static_cast<int32_t>(u);
        break;
      case NpyDtype::kUint32:
        v = static_cast<uint32_t>(u);
        break;
      default:
        v = static_cast<int64_t>(u);
        break;
    }
    array.values[i] = v;
  }
  return array;
}

absl::Status WriteFileAtomic(const std::string& path, const std::string& contents) {
  return WriteAtomic(path, contents, "");
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(OsError("cannot open", path));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const bool err = std::ferror(f);
  std::fclose(f);
  if (err) return absl::DataLossError(OsError("cannot read", path));
  return out;
}

absl::Status MakeDirs(const std::string& path) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    prefix += std::string(part);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(OsError("cannot create directory", prefix));
    }
    prefix += "/";
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
  }
  return absl::OkStatus();
}

std::string Fnv1a64Hex(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return absl::StrFormat("%016x", h);
}

}  // namespace mxmaca::data
