// api/preprocess/python_glob.cc: glob.glob and fnmatch.fnmatchcase of Python, on POSIX.
#include "api/preprocess/python_glob.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <utility>

namespace mxmaca::api {
namespace {

// Code points of `s`; a byte that does not start a valid UTF-8 sequence stands for
// itself as 0xDC00 + byte (Python's surrogateescape for file names).
std::u32string Decode(const std::string& s) {
  std::u32string out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    int length = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = length == 1 ? c : length == 2 ? (c & 0x1F) : length == 3 ? (c & 0x0F) : (c & 7);
    bool ok = length > 0 && end - p >= length;
    for (int i = 1; ok && i < length; ++i) {
      if ((p[i] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (!ok) {
      out.push_back(0xDC00 + c);
      ++p;
    } else {
      out.push_back(cp);
      p += length;
    }
  }
  return out;
}

// One element of a compiled pattern.
struct Token {
  enum Kind { kChar, kAny, kStar, kSet } kind;
  char32_t c = 0;
  bool negate = false;
  std::vector<std::pair<char32_t, char32_t>> ranges;  // kSet: inclusive ranges
};

std::vector<Token> Compile(const std::u32string& pat) {
  std::vector<Token> tokens;
  const size_t n = pat.size();
  size_t i = 0;
  while (i < n) {
    const char32_t c = pat[i++];
    if (c == '*') {
      if (tokens.empty() || tokens.back().kind != Token::kStar) tokens.push_back({Token::kStar});
    } else if (c == '?') {
      tokens.push_back({Token::kAny});
    } else if (c == '[') {
      size_t j = i;
      if (j < n && pat[j] == '!') ++j;
      if (j < n && pat[j] == ']') ++j;
      while (j < n && pat[j] != ']') ++j;
      if (j >= n) {  // unclosed: a literal '['
        tokens.push_back({Token::kChar, '['});
        continue;
      }
      Token set{Token::kSet};
      size_t k = i;
      if (pat[k] == '!') {
        set.negate = true;
        ++k;
      }
      while (k < j) {
        if (k + 2 < j && pat[k + 1] == '-') {
          set.ranges.emplace_back(pat[k], pat[k + 2]);
          k += 3;
        } else {
          set.ranges.emplace_back(pat[k], pat[k]);
          ++k;
        }
      }
      tokens.push_back(std::move(set));
      i = j + 1;
    } else {
      tokens.push_back({Token::kChar, c});
    }
  }
  return tokens;
}

bool MatchOne(const Token& t, char32_t c) {
  switch (t.kind) {
    case Token::kChar:
      return t.c == c;
    case Token::kAny:
      return true;
    case Token::kSet: {
      bool in = false;
      for (const auto& [lo, hi] : t.ranges) in = in || (lo <= c && c <= hi);
      return in != t.negate;
    }
    case Token::kStar:
      break;
  }
  return false;
}

// Wildcard matching with one backtrack point (the last '*'), linear-ish in practice.
bool Match(const std::vector<Token>& tokens, const std::u32string& s) {
  size_t t = 0, i = 0;
  size_t star = SIZE_MAX, star_i = 0;
  while (i < s.size()) {
    if (t < tokens.size() && tokens[t].kind == Token::kStar) {
      star = t++;
      star_i = i;
    } else if (t < tokens.size() && MatchOne(tokens[t], s[i])) {
      ++t;
      ++i;
    } else if (star != SIZE_MAX) {
      t = star + 1;
      i = ++star_i;
    } else {
      return false;
    }
  }
  while (t < tokens.size() && tokens[t].kind == Token::kStar) ++t;
  return t == tokens.size();
}

bool LExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// os.path.split: (head, tail) at the last '/', head without trailing slashes unless
// it is all slashes.
std::pair<std::string, std::string> Split(const std::string& p) {
  const size_t i = p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1;
  std::string head = p.substr(0, i), tail = p.substr(i);
  if (!head.empty() && head.find_first_not_of('/') != std::string::npos) {
    while (!head.empty() && head.back() == '/') head.pop_back();
  }
  return {head, tail};
}

std::string Join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// glob._glob1: names of `dir` ("" = ".") matching `pattern`, directory order.
std::vector<std::string> Glob1(const std::string& dir, const std::string& pattern,
                               bool dironly) {
  std::vector<std::string> names;
  const std::string open_dir = dir.empty() ? "." : dir;
  DIR* d = ::opendir(open_dir.c_str());
  if (d == nullptr) return names;
  const std::vector<Token> tokens = Compile(Decode(pattern));
  const bool hidden_ok = !pattern.empty() && pattern[0] == '.';
  while (struct dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (!hidden_ok && name[0] == '.') continue;
    if (dironly && !IsDir(Join(open_dir, name))) continue;
    if (Match(tokens, Decode(name))) names.push_back(name);
  }
  ::closedir(d);
  return names;
}

std::vector<std::string> IGlob(const std::string& pathname, bool dironly) {
  auto [dirname, basename] = Split(pathname);
  if (!HasGlobMagic(pathname)) {
    if (!basename.empty() ? LExists(pathname) : IsDir(dirname)) return {pathname};
    return {};
  }
  if (dirname.empty()) return Glob1("", basename, dironly);
  std::vector<std::string> dirs;
  if (dirname != pathname && HasGlobMagic(dirname)) {
    dirs = IGlob(dirname, /*dironly=*/true);
  } else {
    dirs = {dirname};
  }
  std::vector<std::string> out;
  for (const std::string& dir : dirs) {
    if (HasGlobMagic(basename)) {
      for (const std::string& name : Glob1(dir, basename, dironly)) out.push_back(Join(dir, name));
    } else if (!basename.empty() ? LExists(Join(dir, basename)) : IsDir(dir)) {  // _glob0
      out.push_back(Join(dir, basename));
    }
  }
  return out;
}

}  // namespace

bool HasGlobMagic(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

bool FnmatchPython(const std::string& name, const std::string& pattern) {
  return Match(Compile(Decode(pattern)), Decode(name));
}

std::vector<std::string> PythonGlob(const std::string& pattern) {
  return IGlob(pattern, /*dironly=*/false);
}

}  // namespace mxmaca::api
