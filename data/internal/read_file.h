// data/internal/read_file.h: reads a whole file, with errors that name it.
#ifndef MXMACA_DATA_INTERNAL_READ_FILE_H_
#define MXMACA_DATA_INTERNAL_READ_FILE_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace mxmaca::data::internal {

// ReadWholeFile: the bytes of `path`. `what` describes the file in errors (e.g.
// "--tokenizer-model tokenizer.json"). Errors: NotFound (no such file),
// PermissionDenied, InvalidArgument (a directory, a read error), each naming `what`
// and `path`.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view what);

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_READ_FILE_H_
