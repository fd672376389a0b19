#pragma once
// A walk over a checkpoint's pickle before LibTorch's unpickler sees it. That unpickler trusts
// the sizes a pickle states: a LONG_BINPUT index of 2^32 - 1 makes it resize its memo to four
// billion entries (a 15.6 GB allocation from a 1.6 KB file, found by tests/fuzz
// fuzz_checkpoint). Every opcode must be one the pickle protocol defines, every argument must lie
// inside the pickle, and memo indices may not exceed what a pickle of this size can create.
#include <cstddef>
#include <string>

namespace splitseg::checkpoint {

// Throws FormatError naming path and the first offending opcode.
void checkPickle(const char* data, std::size_t size, const std::string& path);

} // namespace splitseg::checkpoint
