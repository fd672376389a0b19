#pragma once
// Text from someone else's file (a path inside a session, a key, a label name) shown in a
// message: valid UTF-8 stays as it is; control characters and bytes that are not UTF-8 become
// \xNN, so a message stays one line and a terminal never receives raw bytes.
#include <string>
#include <string_view>

namespace splitseg {

std::string printable(std::string_view text);

// Whether `text` is well-formed UTF-8 (what JSON can hold as a string).
bool isUtf8(std::string_view text);

} // namespace splitseg
