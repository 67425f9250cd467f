// api/preprocess/python_glob.h: Python's glob.glob(pattern) (recursive=False,
// include_hidden=False), which Megatron's preprocess_data.py runs on --input when
// --partitions > 1.
//
// Rules, as Lib/glob.py and Lib/fnmatch.py on POSIX: the pattern is split at its last
// '/'; a part without magic characters (*, ? or [) is taken literally (a pattern with no
// magic at all matches itself if the path exists, broken symlinks included); a part
// with magic is matched, with fnmatch's rules, against the names of its directory in
// the order the directory lists them (readdir, as os.scandir: no sorting); names that
// start with '.' match only a pattern part that starts with '.'; '**' is '*'. fnmatch:
// '*' any run of characters, '?' one character, '[seq]' one character in seq (ranges
// a-z), '[!seq]' one not in seq, an unclosed '[' is literal, no backslash escapes;
// characters are UTF-8 code points (bytes that are not UTF-8 stand for themselves).
// Differences, for patterns no corpus path needs: Python drops empty ranges such as
// [z-a] from a set; here they match nothing, which is the same for the set as a whole
// except that Python then turns "[z-a]" alone into "never matches" too.
#ifndef MXMACA_API_PREPROCESS_PYTHON_GLOB_H_
#define MXMACA_API_PREPROCESS_PYTHON_GLOB_H_

#include <string>
#include <vector>

namespace mxmaca::api {

// PythonGlob: the paths glob.glob(`pattern`) returns, in its order (directory order,
// not sorted). Unreadable or missing directories contribute nothing, as in Python; an
// empty result is not an error here (the caller decides).
std::vector<std::string> PythonGlob(const std::string& pattern);

// FnmatchPython: whether `name` matches `pattern` under fnmatch.fnmatchcase's rules
// (above).
bool FnmatchPython(const std::string& name, const std::string& pattern);

// HasGlobMagic: whether `s` contains '*', '?' or '[' (glob.has_magic).
bool HasGlobMagic(const std::string& s);

}  // namespace mxmaca::api

#endif  // MXMACA_API_PREPROCESS_PYTHON_GLOB_H_
