// libFuzzer: any bytes as a corpus file, plain or gzip (zlib decides by the magic
// bytes). A loom::Error (corrupt gzip) is the only allowed failure.
#include "fuzz_input.h"
#include "loom/models.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const std::string& line : loom::models::read_lines(loom::fuzz::input_file(data, size)))
      if (line.find('\n') != std::string::npos) __builtin_trap();  // lines never hold their ending
  } catch (const loom::Error&) {
  }
  return 0;
}
