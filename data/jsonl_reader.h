// data/jsonl_reader.h: JSON Lines input of `preprocess` (Megatron tools/preprocess_data.py
// reads one JSON object per line and takes the strings under `--json-keys`).
//
// Line rules, matching what Megatron's `for line in open(path, encoding='utf-8')` +
// `json.loads(line)` accept:
//   - lines end at '\n'; a '\r' just before it (CRLF files) is dropped; the last line
//     may lack its newline;
//   - a blank (or all-whitespace) line is an error: json.loads fails on it as well;
//   - an empty file is an error (nothing to preprocess);
//   - a UTF-8 byte-order mark is an error (Python's 'utf-8' codec keeps it and
//     json.loads rejects it); ill-formed UTF-8 inside strings is an error.
// Value rules (Encoder.encode): a string is one sentence; an array of strings is a
// document already split into sentences (Megatron's --split-sentences output), each
// sentence becoming one sequence; any other type, or a missing key, is an error.
// JSON itself is parsed by data/json_line_parser.h, which accepts what json.loads
// accepts (NaN, Infinity, numbers of any size included). Differences from Python, on
// inputs no real corpus should hold: a lone '\r' (not before '\n') does not end a line
// here (Python's universal newlines would split there; JSON treats it as whitespace);
// a \u escape of a lone surrogate is an error (Megatron's tokenizer would fail on it);
// nesting deeper than 900 levels is an error (Python gives up near 1000).
#ifndef MXMACA_DATA_JSONL_READER_H_
#define MXMACA_DATA_JSONL_READER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::data {

// JsonlLineReader: streams the lines of a file through a buffer of at most 1 MiB (no
// whole-file read; the buffer grows only for a longer line). Not thread-safe.
class JsonlLineReader {
 public:
  // Open: opens `path`. Errors: NotFound / the OS error, naming the path.
  static absl::StatusOr<std::unique_ptr<JsonlLineReader>> Open(const std::string& path);
  ~JsonlLineReader();
  JsonlLineReader(const JsonlLineReader&) = delete;
  JsonlLineReader& operator=(const JsonlLineReader&) = delete;

  // Next: sets *line to the next line without its "\n" / "\r\n"; returns false at the
  // end of the file. Errors: InvalidArgument "file is empty" when the file has no
  // bytes at all; the OS error of a failed read.
  absl::StatusOr<bool> Next(std::string* line);

  // line_number: 1-based number of the line Next() returned last (0 before).
  int64_t line_number() const { return line_number_; }
  // bytes_consumed: bytes of the file consumed so far, newlines included.
  int64_t bytes_consumed() const { return bytes_consumed_; }
  const std::string& path() const { return path_; }

 private:
  JsonlLineReader() = default;
  absl::Status Refill();

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<char> buffer_;
  size_t begin_ = 0;  // unread bytes are buffer_[begin_, end_)
  size_t end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t bytes_consumed_ = 0;
};

// JsonlDocument: the extracted fields of one JSON line.
struct JsonlDocument {
  // fields[k]: the sentences under keys[k] (one for a string value, one per element for
  // an array of strings; possibly empty strings).
  std::vector<std::vector<std::string>> fields;
};

// ParseJsonlLine: parses `line` (line `line_number` of `file`, used in messages) as a
// JSON object and extracts `keys` into *doc (cleared first). Thread-safe. Errors
// (InvalidArgument, "FILE:LINE: ..."): blank line, invalid JSON (with the byte offset
// in the line), not an object, a missing key, a value that is not a string or an array of
// strings, a byte-order mark.
absl::Status ParseJsonlLine(std::string_view line, const std::vector<std::string>& keys,
                            const std::string& file, int64_t line_number,
                            JsonlDocument* doc);

// ParseJsonlLineReference: ParseJsonlLine through nlohmann/json's DOM parser, kept as
// the independent reference for tests and fuzzing. Same messages except for invalid
// JSON (nlohmann's wording), and nlohmann rejects NaN, Infinity and numbers beyond the
// double range, which ParseJsonlLine accepts as Python does; and nlohmann stops at a
// NUL byte outside strings, accepting whatever follows it.
absl::Status ParseJsonlLineReference(std::string_view line, const std::vector<std::string>& keys,
                                     const std::string& file, int64_t line_number,
                                     JsonlDocument* doc);

// ReadJsonlFile: every line of `path` through ParseJsonlLine (for small files and
// tests; preprocess streams instead). Errors: those of JsonlLineReader and
// ParseJsonlLine.
absl::StatusOr<std::vector<JsonlDocument>> ReadJsonlFile(const std::string& path,
                                                         const std::vector<std::string>& keys);

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_JSONL_READER_H_
