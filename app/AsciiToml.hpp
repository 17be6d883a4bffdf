#pragma once
// The deck's text as toml++ is given it: pure ASCII, the same TOML. Every
// character beyond ASCII inside a string becomes a \u or \U escape (literal
// strings become basic strings, their backslashes and quotes escaped), and
// in a comment a '?'. toml++ 3.3 (Debian's) reaches undefined behaviour on
// some characters beyond ASCII where it looks for whitespace (even in a
// string after a malformed value), and fails an assertion on a backslash in
// a table header (both found by fuzzing): outside strings and comments, only
// printable ASCII, tabs and line ends pass, and text that is not UTF-8 is
// refused. InputError names `where`, the line and column.
#include <string>

namespace cvest::app {

// `text` (the deck at `where`) as toml++ is to be given it.
std::string ascii_toml(const std::string& text, const std::string& where);

}  // namespace cvest::app
