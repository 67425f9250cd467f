// api/convert/hf_safetensors.cc: see hf_safetensors.h.
#include "api/convert/hf_safetensors.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace mxmaca::api::convert {
namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return s.str();
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float F16ToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

// ReadOneFile: the tensors of one safetensors file into `out`.
absl::Status ReadOneFile(const std::string& path, HfTensors* out) {
  MXMACA_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (bytes.size() < 8) {
    return absl::DataLossError(absl::StrCat(path, ": truncated (", bytes.size(),
                                            " bytes, shorter than the 8-byte header length)"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  if (n > kMaxHeaderBytes || 8 + n > bytes.size()) {
    return absl::DataLossError(absl::StrCat(path, ": truncated or corrupt: header length ", n,
                                            " but the file has ", bytes.size(), " bytes"));
  }
  nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + n, nullptr,
                                                /*allow_exceptions=*/false);
  if (!header.is_object()) {
    return absl::DataLossError(absl::StrCat(path, ": the header is not a JSON object"));
  }
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  for (const auto& [key, e] : header.items()) {
    if (key == "__metadata__") continue;
    try {
      const std::string dtype = e.at("dtype").get<std::string>();
      std::vector<int64_t> shape = e.at("shape").get<std::vector<int64_t>>();
      const std::vector<uint64_t> off = e.at("data_offsets").get<std::vector<uint64_t>>();
      int elem = 0;
      if (dtype == "F32") {
        elem = 4;
      } else if (dtype == "BF16" || dtype == "F16") {
        elem = 2;
      } else {
        return absl::UnimplementedError(absl::StrCat(path, ": tensor ", key, " has dtype ", dtype,
                                                     "; expected F32, BF16 or F16"));
      }
      uint64_t numel = 1;
      for (int64_t d : shape) {
        if (d < 0)
          return absl::DataLossError(absl::StrCat(path, ": tensor ", key, ": negative dim"));
        numel *= static_cast<uint64_t>(d);
      }
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size ||
          off[1] - off[0] != numel * elem) {
        return absl::DataLossError(absl::StrCat(path, ": tensor ", key, ": data_offsets ",
                                                e.at("data_offsets").dump(), " do not hold ", numel,
                                                " ", dtype, " values inside the ", data_size,
                                                "-byte data (truncated or corrupt file)"));
      }
      if (out->count(key) > 0) {
        return absl::DataLossError(absl::StrCat(path, ": tensor ", key, " is stored twice"));
      }
      HfTensor t;
      t.shape = std::move(shape);
      t.values.resize(numel);
      const char* p = data + off[0];
      if (elem == 4) {
        std::memcpy(t.values.data(), p, numel * 4);
      } else {
        for (uint64_t i = 0; i < numel; ++i) {
          uint16_t v;
          std::memcpy(&v, p + 2 * i, 2);
          t.values[i] = dtype == "BF16" ? Bf16ToFloat(v) : F16ToFloat(v);
        }
      }
      (*out)[key] = std::move(t);
    } catch (const nlohmann::json::exception& ex) {
      return absl::DataLossError(absl::StrCat(path, ": tensor ", key, ": ", ex.what()));
    }
  }
  return absl::OkStatus();
}

void AppendU64(uint64_t v, std::string* s) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// WriteOneFile: one safetensors file of `names`.
absl::Status WriteOneFile(const std::string& path, const HfTensors& tensors,
                          const std::vector<std::string>& names, HfDtype dtype) {
  const int elem = dtype == HfDtype::kF32 ? 4 : 2;
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const std::string& name : names) {
    const HfTensor& t = tensors.at(name);
    const uint64_t bytes = t.values.size() * elem;
    header[name] = {{"dtype", dtype == HfDtype::kF32 ? "F32" : "BF16"},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  AppendU64(h.size(), &out);
  out += h;
  for (const std::string& name : names) {
    const HfTensor& t = tensors.at(name);
    if (dtype == HfDtype::kF32) {
      out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
    } else {
      for (float v : t.values) {
        const uint16_t b = FloatToBf16(v);
        out.push_back(static_cast<char>(b & 0xff));
        out.push_back(static_cast<char>(b >> 8));
      }
    }
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  f.close();
  if (!f) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HfTensors> ReadHfSafetensors(const std::string& dir) {
  HfTensors out;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (FileExists(index_path)) {
    MXMACA_ASSIGN_OR_RETURN(std::string text, ReadFile(index_path));
    nlohmann::json index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      return absl::DataLossError(
          absl::StrCat(index_path, ": not a JSON object with a \"weight_map\" object"));
    }
    std::map<std::string, std::vector<std::string>> files;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) {
        return absl::DataLossError(
            absl::StrCat(index_path, ": weight_map.", name, " is not a string"));
      }
      files[file.get<std::string>()].push_back(name);
    }
    for (const auto& [file, names] : files) {
      const std::string path = dir + "/" + file;
      if (!FileExists(path)) {
        return absl::NotFoundError(absl::StrCat(path, " (named by ", index_path, " for ",
                                                names.front(), ") does not exist"));
      }
      MXMACA_RETURN_IF_ERROR(ReadOneFile(path, &out));
      for (const std::string& name : names) {
        if (out.count(name) == 0) {
          return absl::DataLossError(
              absl::StrCat(index_path, " puts ", name, " in ", path, ", which does not hold it"));
        }
      }
    }
    return out;
  }
  const std::string path = dir + "/model.safetensors";
  if (!FileExists(path)) {
    return absl::NotFoundError(absl::StrCat("neither ", path, " nor ", index_path, " exists (is ",
                                            dir, " a Hugging Face model?)"));
  }
  MXMACA_RETURN_IF_ERROR(ReadOneFile(path, &out));
  return out;
}

absl::Status WriteHfSafetensors(const std::string& dir, const HfTensors& tensors,
                                const std::vector<std::string>& names, HfDtype dtype,
                                int64_t max_shard_bytes) {
  if (dtype == HfDtype::kF16) return absl::InvalidArgumentError("writing F16 is not supported");
  const int elem = dtype == HfDtype::kF32 ? 4 : 2;
  uint64_t total = 0;
  for (const std::string& name : names) {
    auto it = tensors.find(name);
    if (it == tensors.end()) return absl::InvalidArgumentError(absl::StrCat("no tensor ", name));
    int64_t numel = 1;
    for (int64_t d : it->second.shape) numel *= d;
    if (numel != static_cast<int64_t>(it->second.values.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, ": ", it->second.values.size(), " values for ", numel, " elements"));
    }
    total += it->second.values.size() * elem;
  }
  if (max_shard_bytes <= 0 || total <= static_cast<uint64_t>(max_shard_bytes)) {
    return WriteOneFile(dir + "/model.safetensors", tensors, names, dtype);
  }
  std::vector<std::vector<std::string>> shards(1);
  uint64_t in_shard = 0;
  for (const std::string& name : names) {
    const uint64_t bytes = tensors.at(name).values.size() * elem;
    if (!shards.back().empty() && in_shard + bytes > static_cast<uint64_t>(max_shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(name);
    in_shard += bytes;
  }
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file =
        absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1, shards.size());
    MXMACA_RETURN_IF_ERROR(WriteOneFile(dir + "/" + file, tensors, shards[i], dtype));
    for (const std::string& name : shards[i]) map[name] = file;
  }
  index["weight_map"] = map;
  const std::string path = dir + "/model.safetensors.index.json";
  std::ofstream f(path, std::ios::trunc);
  f << index.dump(2) << "\n";
  f.close();
  if (!f) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace mxmaca::api::convert
