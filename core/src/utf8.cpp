#include "loom/utf8.h"

#include <fmt/format.h>

namespace loom {

namespace {
// The length of the valid UTF-8 sequence at s[i], or 0.
size_t sequence_at(const unsigned char* s, size_t n, size_t i) {
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  // The length, and the range the second byte may take (the others: 0x80..0xBF).
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;   // overlong
    if (c == 0xED) high = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;   // overlong
    if (c == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > n || s[i + 1] < low || s[i + 1] > high) return 0;
  for (size_t k = 2; k < length; ++k)
    if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
  return length;
}
}  // namespace

size_t invalid_utf8_at(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const size_t length = sequence_at(s, text.size(), i);
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string printable_utf8(std::string_view text) {
  if (invalid_utf8_at(text) == std::string_view::npos) return std::string(text);
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t length = sequence_at(s, text.size(), i);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", s[i]);
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace loom
