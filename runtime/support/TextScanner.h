// TextScanner.h - a small tokenizer shared by the textual IR parser and the plan parser.
//
// Both text forms are line-oriented and use the same lexical pieces: bare words, %names,
// "quoted strings" with C escapes, integers, floats and single-character punctuation. The
// scanner tracks line and column so that parse errors point at the offending spot.
#pragma once

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace hgp {

class TextScanner {
public:
  explicit TextScanner(std::string_view text, std::string sourceName = "<text>")
      : text_(text), source_(std::move(sourceName)) {}

  /// Skips spaces, tabs, newlines and '#' comments.
  void skipSpace();
  bool atEnd();
  /// The next non-space character, or '\0' at the end.
  char peek();
  /// Consumes `c` if it is next.
  bool consume(char c);
  /// Consumes the word `w` if it is next (followed by a non-word character).
  bool consumeWord(std::string_view w);
  Status expect(char c);
  Status expectWord(std::string_view w);

  /// A bare word: letters, digits and any of "_.-/".
  Expected<std::string> word();
  /// A name after '%': a bare word or a quoted string.
  Expected<std::string> percentName();
  /// A double-quoted string with \" \\ \n \t and \xHH escapes.
  Expected<std::string> quoted();
  Expected<int64_t> integer();
  /// A number; sets isFloat when it has a '.', an exponent, or is inf/nan.
  Expected<double> number(bool* isFloat = nullptr);
  /// A number that keeps full integer precision: an int64 when written without '.', exponent,
  /// inf or nan, a double otherwise.
  Expected<std::variant<int64_t, double>> numeric();

  /// An InvalidModel-coded error (override the code with `code`) naming the current position.
  Status error(const std::string& what, ErrorCode code = ErrorCode::InvalidModel) const;
  int line() const { return line_; }

private:
  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t lineStart_ = 0;
};

/// Whether `s` can be printed as a bare word (otherwise it is printed quoted).
bool isBareWord(std::string_view s);
/// Appends `s` quoted with escapes.
void appendQuoted(std::string& out, std::string_view s);
/// Appends `s` bare when possible, quoted otherwise.
void appendName(std::string& out, std::string_view s);
/// Shortest decimal form that reads back as the same double; always has '.', 'e', "inf" or "nan".
std::string formatDouble(double v);

} // namespace hgp
