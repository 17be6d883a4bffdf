#include "app/AsciiToml.hpp"

#include "core/Errors.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cvest::app {

namespace {

class AsciiToml {
 public:
  AsciiToml(const std::string& text, const std::string& where) : text_(text), where_(where) {}

  std::string convert() {
    out_.reserve(text_.size() + 16);
    for (std::size_t i = 0; i < text_.size(); ++i) {
      switch (state_) {
        case plain: in_plain(i); break;
        case basic:
        case multi_basic: in_basic(i); break;
        case literal:
        case multi_literal: in_literal(i); break;
        case comment:
          out_ += static_cast<unsigned char>(text_[i]) >= 0x80 ? '?' : text_[i];
          if (text_[i] == '\n') state_ = plain;
          break;
      }
    }
    return out_;
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    const long line = 1 + long(std::count(text_.begin(), text_.begin() + long(at), '\n'));
    const std::size_t line_start = at == 0 ? std::string::npos : text_.rfind('\n', at - 1);
    const std::size_t column = at - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
    throw InputError(where_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": TOML syntax error: " + what);
  }
  bool ahead(std::size_t i, const std::string& s) const { return text_.compare(i, s.size(), s) == 0; }

  // The UTF-8 character starting at i (a byte beyond ASCII), written as an
  // escape; i left on its last byte.
  void escape(std::size_t& i) {
    const auto lead = static_cast<unsigned char>(text_[i]);
    const int more = lead >= 0xC2 && lead <= 0xDF   ? 1
                     : lead >= 0xE0 && lead <= 0xEF ? 2
                     : lead >= 0xF0 && lead <= 0xF4 ? 3
                                                    : -1;
    if (more < 0) fail(i, "not UTF-8");
    std::uint32_t cp = lead & (0x3Fu >> more);
    for (int k = 1; k <= more; ++k) {
      if (i + std::size_t(k) >= text_.size() || (static_cast<unsigned char>(text_[i + std::size_t(k)]) & 0xC0) != 0x80)
        fail(i, "not UTF-8");
      cp = cp << 6 | (static_cast<unsigned char>(text_[i + std::size_t(k)]) & 0x3Fu);
    }
    if ((more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      fail(i, "not UTF-8");
    char escaped[16];
    std::snprintf(escaped, sizeof escaped, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", unsigned(cp));
    out_ += escaped;
    i += std::size_t(more);
  }

  void in_plain(std::size_t& i) {
    const char c = text_[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x7F || (u < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == '\\')
      fail(i, "a character TOML allows only in strings and comments (keys and syntax are printable ASCII; quote "
              "the value)");
    if (ahead(i, triple_double_) || ahead(i, triple_single_)) {
      state_ = c == '"' ? multi_basic : multi_literal;
      out_ += triple_double_;
      i += 2;
      return;
    }
    if (c == '#') state_ = comment;
    else if (c == '"') state_ = basic;
    else if (c == '\'') state_ = literal;
    out_ += c == '\'' ? '"' : c;
  }

  void in_basic(std::size_t& i) {
    const char c = text_[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      escape(i);
    } else if (c == '\\') {  // an escape sequence, as it is (TOML's are ASCII)
      out_ += c;
      if (i + 1 < text_.size()) {
        if (static_cast<unsigned char>(text_[i + 1]) >= 0x80) fail(i, "an escape sequence TOML does not have");
        out_ += text_[++i];
      }
    } else if (state_ == multi_basic && ahead(i, triple_double_)) {
      out_ += triple_double_;
      i += 2;
      state_ = plain;
    } else {
      out_ += c;
      if (state_ == basic && (c == '"' || c == '\n')) state_ = plain;
    }
  }

  // Literal strings become basic strings: their backslashes and quotes escaped.
  void in_literal(std::size_t& i) {
    const char c = text_[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      escape(i);
    } else if (state_ == multi_literal && ahead(i, triple_single_)) {
      out_ += triple_double_;
      i += 2;
      state_ = plain;
    } else if (state_ == literal && (c == '\'' || c == '\n')) {
      out_ += c == '\'' ? '"' : c;
      state_ = plain;
    } else {
      if (c == '\\' || c == '"') out_ += '\\';
      out_ += c;
    }
  }

  const std::string& text_;
  const std::string& where_;
  const std::string triple_double_ = std::string(3, '"'), triple_single_ = std::string(3, '\'');
  enum { plain, basic, literal, multi_basic, multi_literal, comment } state_ = plain;
  std::string out_;
};

}  // namespace

std::string ascii_toml(const std::string& text, const std::string& where) { return AsciiToml(text, where).convert(); }

}  // namespace cvest::app
