#include "core/checkpoint/PickleCheck.h"
#include "core/base/Error.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace splitseg::checkpoint {

namespace {
// How an opcode's argument is laid out (Python's pickletools; LibTorch's PickleOpCode).
enum class Arg { None, Fixed, Line, TwoLines, Len1, Len4, Len8, MemoIndex4, MemoLine };

struct Op {
  Arg arg;
  std::size_t bytes;  // Fixed: argument bytes
};

bool opOf(unsigned char c, Op& op) {
  switch (c) {
    // No argument.
    case '(': case '.': case '0': case '1': case '2': case 'N': case 'Q': case 'R': case 'a': case 'b':
    case 'd': case '}': case 'e': case 'l': case ']': case 'o': case 's': case 't': case ')': case 'u':
    case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91:
    case 0x92: case 0x93: case 0x94:
      op = {Arg::None, 0}; return true;
    case 'K': case 'h': case 'q': case 0x80: case 0x82: op = {Arg::Fixed, 1}; return true;
    case 'M': case 0x83: op = {Arg::Fixed, 2}; return true;
    case 'J': case 'j': case 0x84: op = {Arg::Fixed, 4}; return true;
    case 'r': op = {Arg::MemoIndex4, 4}; return true;
    case 'G': case 0x95: op = {Arg::Fixed, 8}; return true;
    case 'I': case 'L': case 'F': case 'S': case 'V': case 'P': case 'g': op = {Arg::Line, 0}; return true;
    case 'p': op = {Arg::MemoLine, 0}; return true;
    case 'c': case 'i': op = {Arg::TwoLines, 0}; return true;
    case 'U': case 'C': case 0x8c: case 0x8a: op = {Arg::Len1, 0}; return true;
    case 'T': case 'X': case 'B': case 0x8b: op = {Arg::Len4, 0}; return true;
    case 0x8d: case 0x8e: op = {Arg::Len8, 0}; return true;
    default: return false;
  }
}

std::uint64_t littleEndian(const char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
} // namespace

void checkPickle(const char* data, std::size_t size, const std::string& path) {
  auto refuse = [&](std::size_t at, const std::string& why) {
    throw FormatError(path, "checkpoint pickle is damaged at byte " + std::to_string(at) + ": " + why);
  };
  std::size_t i = 0;
  bool stopped = false;
  while (i < size && !stopped) {
    const std::size_t at = i;
    const auto c = static_cast<unsigned char>(data[i++]);
    Op op{};
    if (!opOf(c, op)) refuse(at, "unknown opcode " + std::to_string(c));
    const std::size_t left = size - i;
    auto line = [&]() {
      const void* nl = std::memchr(data + i, '\n', size - i);
      if (!nl) refuse(at, "a text argument runs past the end");
      const std::size_t n = static_cast<const char*>(nl) - (data + i);
      i += n + 1;
      return std::string(data + i - n - 1, n);
    };
    switch (op.arg) {
      case Arg::None: break;
      case Arg::Fixed:
      case Arg::MemoIndex4:
        if (left < op.bytes) refuse(at, "an argument runs past the end");
        // Memo entries come from the opcodes before this one: fewer than the pickle has bytes.
        if (op.arg == Arg::MemoIndex4 && littleEndian(data + i, 4) >= size) refuse(at, "a memo index beyond the pickle");
        i += op.bytes;
        break;
      case Arg::Line: line(); break;
      case Arg::MemoLine: {
        const std::string text = line();
        if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos ||
            std::stoull(text) >= size)
          refuse(at, "a memo index beyond the pickle");
        break;
      }
      case Arg::TwoLines: line(); line(); break;
      case Arg::Len1:
      case Arg::Len4:
      case Arg::Len8: {
        const std::size_t width = op.arg == Arg::Len1 ? 1 : op.arg == Arg::Len4 ? 4 : 8;
        if (left < width) refuse(at, "a length runs past the end");
        const std::uint64_t n = littleEndian(data + i, width);
        i += width;
        if (n > size - i) refuse(at, "a value of " + std::to_string(n) + " bytes in a pickle of " + std::to_string(size));
        i += static_cast<std::size_t>(n);
        break;
      }
    }
    stopped = c == '.';
  }
  if (!stopped) refuse(i, "no STOP opcode");
}

} // namespace splitseg::checkpoint
