#pragma once
// UTF-8 as RFC 3629 has it: what every command reads text by, and what every error
// message is made of (a message quoting a damaged file's bytes must still print).
#include <cstddef>
#include <string>
#include <string_view>

namespace loom {

// The offset of the first byte where `text` stops being UTF-8 (an overlong form, a
// surrogate, a code point past U+10FFFF, a cut or bad sequence), or npos when it is valid.
size_t invalid_utf8_at(std::string_view text);

// `text` with each byte that is not part of valid UTF-8 written as \xNN.
std::string printable_utf8(std::string_view text);

}  // namespace loom
