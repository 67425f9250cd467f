// data/jsonl_reader.cc: streaming JSONL lines and extraction of --json-keys.
#include "data/jsonl_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/json_line_parser.h"

namespace mxmaca::data {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

absl::Status ErrnoStatus(const std::string& what, const std::string& path) {
  const int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

const char* JsonTypeName(const nlohmann::json& value) {
  // nlohmann's type_name(): "null", "object", "array", "string", "boolean", "number".
  return value.type_name();
}

bool IsJsonWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The checks both parsers share: a blank line and a byte-order mark get their own
// messages.
absl::Status CheckBlankOrBom(std::string_view line, const std::string& where) {
  bool blank = true;
  for (char c : line) {
    if (!IsJsonWhitespace(c)) {
      blank = false;
      break;
    }
  }
  if (blank) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "blank line, expected a JSON object (Megatron's json.loads rejects it too)"));
  }
  if (line.size() >= 3 && std::memcmp(line.data(), "\xEF\xBB\xBF", 3) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "UTF-8 byte-order mark, expected a JSON object (save the file without BOM)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JsonlLineReader>> JsonlLineReader::Open(
    const std::string& path) {
  std::unique_ptr<JsonlLineReader> reader(new JsonlLineReader());
  reader->path_ = path;
  reader->file_ = std::fopen(path.c_str(), "rb");
  if (reader->file_ == nullptr) return ErrnoStatus("cannot open", path);
  // Half the file, between 64 bytes and 1 MiB: small files still cross a buffer
  // boundary (so tests and fuzzing exercise Refill), large ones read 1 MiB at a time.
  struct stat st;
  size_t buffer_bytes = kBufferBytes;
  if (::fstat(::fileno(reader->file_), &st) == 0 && S_ISREG(st.st_mode)) {
    buffer_bytes = std::clamp<size_t>(static_cast<size_t>(st.st_size) / 2, 64, kBufferBytes);
  }
  reader->buffer_.resize(buffer_bytes);
  return reader;
}

JsonlLineReader::~JsonlLineReader() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status JsonlLineReader::Refill() {
  // Keep the unread tail at the front, then fill the rest.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);  // a very long line
  const size_t got = std::fread(buffer_.data() + end_, 1, buffer_.size() - end_, file_);
  if (got == 0) {
    if (std::ferror(file_)) return ErrnoStatus("cannot read", path_);
    eof_ = true;
  }
  end_ += got;
  return absl::OkStatus();
}

absl::StatusOr<bool> JsonlLineReader::Next(std::string* line) {
  size_t scanned = begin_;  // bytes before `scanned` hold no '\n'
  while (true) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (nl != nullptr) {
      const size_t pos = static_cast<const char*>(nl) - buffer_.data();
      size_t stop = pos;
      if (stop > begin_ && buffer_[stop - 1] == '\r') --stop;
      line->assign(buffer_.data() + begin_, stop - begin_);
      bytes_consumed_ += static_cast<int64_t>(pos + 1 - begin_);
      begin_ = pos + 1;
      ++line_number_;
      return true;
    }
    if (eof_) break;
    const size_t unread_scanned = end_ - begin_;
    MXMACA_RETURN_IF_ERROR(Refill());
    scanned = begin_ + unread_scanned;
  }
  if (begin_ == end_) {
    if (line_number_ == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": file is empty (expected JSON lines)"));
    }
    return false;
  }
  // The last line without a final newline.
  size_t stop = end_;
  if (buffer_[stop - 1] == '\r') --stop;
  line->assign(buffer_.data() + begin_, stop - begin_);
  bytes_consumed_ += static_cast<int64_t>(end_ - begin_);
  begin_ = end_;
  ++line_number_;
  return true;
}

absl::Status ParseJsonlLine(std::string_view line, const std::vector<std::string>& keys,
                            const std::string& file, int64_t line_number,
                            JsonlDocument* doc) {
  doc->fields.clear();
  const std::string where = absl::StrCat(file, ":", line_number, ": ");
  MXMACA_RETURN_IF_ERROR(CheckBlankOrBom(line, where));
  std::vector<JsonField> fields;
  absl::Status status = ParseJsonObjectFields(line, keys, &fields);
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat(where, status.message()));
  doc->fields.resize(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    JsonField& field = fields[k];
    if (!field.present) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "missing key \"", keys[k], "\" (--json-keys)"));
    }
    const bool is_string = std::strcmp(field.type, "string") == 0;
    const bool is_array = std::strcmp(field.type, "array") == 0;
    if (!is_string && !is_array) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "key \"", keys[k], "\" is ", field.type,
          ", expected a string (or an array of sentence strings)"));
    }
    if (field.first_non_string >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "element ", field.first_non_string, " of key \"", keys[k], "\" is ",
          field.non_string_type, ", expected a string"));
    }
    doc->fields[k] = std::move(field.strings);
  }
  return absl::OkStatus();
}

absl::Status ParseJsonlLineReference(std::string_view line, const std::vector<std::string>& keys,
                            const std::string& file, int64_t line_number,
                            JsonlDocument* doc) {
  doc->fields.clear();
  const std::string where = absl::StrCat(file, ":", line_number, ": ");
  MXMACA_RETURN_IF_ERROR(CheckBlankOrBom(line, where));
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "invalid JSON at byte ", e.byte, " of the line: ", e.what()));
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number beyond double range (Python would read it as inf).
    return absl::InvalidArgumentError(absl::StrCat(where, "invalid JSON: ", e.what()));
  }
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "expected a JSON object, got ", JsonTypeName(value)));
  }
  doc->fields.resize(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    auto it = value.find(keys[k]);
    if (it == value.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "missing key \"", keys[k], "\" (--json-keys)"));
    }
    std::vector<std::string>& sentences = doc->fields[k];
    if (it->is_string()) {
      sentences.push_back(std::move(it->get_ref<std::string&>()));
    } else if (it->is_array()) {
      sentences.reserve(it->size());
      for (size_t i = 0; i < it->size(); ++i) {
        nlohmann::json& element = (*it)[i];
        if (!element.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, "element ", i, " of key \"", keys[k], "\" is ", JsonTypeName(element),
              ", expected a string"));
        }
        sentences.push_back(std::move(element.get_ref<std::string&>()));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "key \"", keys[k], "\" is ", JsonTypeName(*it),
          ", expected a string (or an array of sentence strings)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JsonlDocument>> ReadJsonlFile(
    const std::string& path, const std::vector<std::string>& keys) {
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<JsonlLineReader> reader,
                          JsonlLineReader::Open(path));
  std::vector<JsonlDocument> docs;
  std::string line;
  while (true) {
    MXMACA_ASSIGN_OR_RETURN(bool more, reader->Next(&line));
    if (!more) break;
    JsonlDocument doc;
    MXMACA_RETURN_IF_ERROR(ParseJsonlLine(line, keys, path, reader->line_number(), &doc));
    docs.push_back(std::move(doc));
  }
  return docs;
}

}  // namespace mxmaca::data
