#pragma once
// The MetaImage (.mha/.mhd) header read by hand, before ITK's MetaIO: MetaIO reads NDims and
// then as many numbers per array field as NDims says, so a header claiming NDims = 5e13 keeps it
// reading for hours (found by tests/fuzz). Internal to core/io.
#include <string>

namespace splitseg::io {

// Nothing for other files. For .mha/.mhd: the header (up to ElementDataFile, within 64 KiB) is
// "Key = Value" lines; NDims is a whole number 1..8 given before any array; DimSize, spacing,
// origin and centre hold NDims numbers, the direction NDims x NDims, all finite; sizes are
// positive whole numbers; counts and header sizes are whole numbers. Throws FormatError naming
// path and the field.
void checkMetaImageHeader(const std::string& path);

} // namespace splitseg::io
