#include "runtime/support/TextScanner.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace hgp {

namespace {
bool isWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '/';
}
} // namespace

void TextScanner::skipSpace() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '\n') {
      ++line_;
      lineStart_ = ++pos_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

bool TextScanner::atEnd() {
  skipSpace();
  return pos_ >= text_.size();
}

char TextScanner::peek() {
  skipSpace();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool TextScanner::consume(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

bool TextScanner::consumeWord(std::string_view w) {
  skipSpace();
  if (text_.substr(pos_, w.size()) != w) return false;
  size_t end = pos_ + w.size();
  if (end < text_.size() && isWordChar(text_[end])) return false;
  pos_ = end;
  return true;
}

Status TextScanner::expect(char c) {
  if (consume(c)) return Status::ok();
  return error(std::string("expected '") + c + "'");
}

Status TextScanner::expectWord(std::string_view w) {
  if (consumeWord(w)) return Status::ok();
  return error("expected '" + std::string(w) + "'");
}

Expected<std::string> TextScanner::word() {
  skipSpace();
  size_t start = pos_;
  while (pos_ < text_.size() && isWordChar(text_[pos_])) ++pos_;
  if (pos_ == start) return error("expected a word");
  return std::string(text_.substr(start, pos_ - start));
}

Expected<std::string> TextScanner::percentName() {
  HGP_TRY(expect('%'));
  if (pos_ < text_.size() && text_[pos_] == '"') return quoted();
  size_t start = pos_;
  while (pos_ < text_.size() && isWordChar(text_[pos_])) ++pos_;
  if (pos_ == start) return error("expected a name after '%'");
  return std::string(text_.substr(start, pos_ - start));
}

Expected<std::string> TextScanner::quoted() {
  skipSpace();
  if (pos_ >= text_.size() || text_[pos_] != '"') return error("expected a quoted string");
  ++pos_;
  std::string out;
  while (pos_ < text_.size() && text_[pos_] != '"') {
    char c = text_[pos_++];
    if (c == '\n') return error("newline inside a quoted string");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= text_.size()) break;
    char e = text_[pos_++];
    switch (e) {
    case 'n': out += '\n'; break;
    case 't': out += '\t'; break;
    case '"': out += '"'; break;
    case '\\': out += '\\'; break;
    case 'x': {
      if (pos_ + 2 > text_.size()) return error("bad \\x escape");
      unsigned v = 0;
      auto r = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 2, v, 16);
      if (r.ptr != text_.data() + pos_ + 2) return error("bad \\x escape");
      out += char(v);
      pos_ += 2;
      break;
    }
    default: return error(std::string("unknown escape \\") + e);
    }
  }
  if (pos_ >= text_.size()) return error("unterminated string");
  ++pos_;
  return out;
}

Expected<int64_t> TextScanner::integer() {
  skipSpace();
  int64_t v = 0;
  auto r = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), v);
  if (r.ec != std::errc()) return error("expected an integer");
  pos_ = size_t(r.ptr - text_.data());
  if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e'))
    return error("expected an integer, found a float");
  return v;
}

Expected<double> TextScanner::number(bool* isFloat) {
  skipSpace();
  size_t start = pos_;
  bool neg = pos_ < text_.size() && text_[pos_] == '-';
  size_t p = pos_ + (neg ? 1 : 0);
  for (const char* special : {"inf", "nan"}) {
    if (text_.substr(p, 3) == special) {
      pos_ = p + 3;
      if (isFloat) *isFloat = true;
      double v = special[0] == 'i' ? INFINITY : NAN;
      return neg ? -v : v;
    }
  }
  double v = 0;
  auto r = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), v);
  if (r.ec != std::errc()) return error("expected a number");
  pos_ = size_t(r.ptr - text_.data());
  if (isFloat) {
    std::string_view tok = text_.substr(start, pos_ - start);
    *isFloat = tok.find_first_of(".eE") != std::string_view::npos;
  }
  return v;
}

Expected<std::variant<int64_t, double>> TextScanner::numeric() {
  skipSpace();
  size_t start = pos_, startLine = lineStart_;
  bool isF = false;
  HGP_ASSIGN_OR_RETURN(double d, number(&isF));
  if (isF) return std::variant<int64_t, double>(d);
  pos_ = start;
  lineStart_ = startLine;
  HGP_ASSIGN_OR_RETURN(int64_t i, integer());
  return std::variant<int64_t, double>(i);
}

Status TextScanner::error(const std::string& what, ErrorCode code) const {
  return Status(code, source_ + ":" + std::to_string(line_) + ":" +
                          std::to_string(pos_ - lineStart_ + 1) + ": " + what);
}

bool isBareWord(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!isWordChar(c)) return false;
  return true;
}

void appendQuoted(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  out += '"';
}

void appendName(std::string& out, std::string_view s) {
  if (isBareWord(s)) out += s;
  else appendQuoted(out, s);
}

std::string formatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

} // namespace hgp
