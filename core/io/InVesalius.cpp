#include "core/io/InVesalius.h"

#include "core/base/Error.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {

// Every member of a .tar.gz, by base name (the project sits in a temporary folder name).
std::map<std::string, std::string> readTarGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw IoError(path, "cannot open for reading");
  std::map<std::string, std::string> files;
  char header[512];
  auto readExact = [&](char* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const int r = gzread(f, dst + got, static_cast<unsigned>(std::min<std::size_t>(n - got, 1 << 30)));
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  };
  try {
    while (true) {
      if (!readExact(header, 512)) {
        if (files.empty()) throw FormatError(path, "not an InVesalius project (not a gzip'd tar archive)");
        break;  // archives may end without the two zero blocks
      }
      if (std::all_of(header, header + 512, [](char c) { return c == 0; })) break;
      if (std::memcmp(header + 257, "ustar", 5) != 0 && files.empty())
        throw FormatError(path, "not an InVesalius project (not a tar archive)");
      std::string name(header, strnlen(header, 100));
      const std::size_t size = std::strtoull(std::string(header + 124, 12).c_str(), nullptr, 8);
      const char type = header[156];
      std::string data(size, '\0');
      if (size && !readExact(data.data(), size)) throw FormatError(path, "truncated archive inside " + name);
      const std::size_t pad = (512 - size % 512) % 512;
      char skip[512];
      if (pad && !readExact(skip, pad)) throw FormatError(path, "truncated archive after " + name);
      if (type == '0' || type == '\0') files[fs::path(name).filename().string()] = std::move(data);
    }
  } catch (...) {
    gzclose(f);
    throw;
  }
  gzclose(f);
  return files;
}

// The element following <key>k</key> in a plist (nested <dict>/<array> included), as text.
std::string plistValue(const std::string& plist, const std::string& key) {
  const std::string k = "<key>" + key + "</key>";
  const auto p = plist.find(k);
  if (p == std::string::npos) return "";
  const auto open = plist.find('<', p + k.size());
  if (open == std::string::npos) return "";
  const auto nameEnd = plist.find_first_of(" />", open + 1);
  const std::string tagName = plist.substr(open + 1, nameEnd - open - 1);
  if (plist.compare(open, tagName.size() + 3, "<" + tagName + "/>") == 0) return plist.substr(open, tagName.size() + 3);
  // Walk to the matching close tag, counting nested elements of the same name.
  int depth = 0;
  std::size_t pos = open;
  while (pos != std::string::npos) {
    const auto nextOpen = plist.find("<" + tagName + ">", pos);
    const auto nextClose = plist.find("</" + tagName + ">", pos);
    if (nextClose == std::string::npos) return plist.substr(open);
    if (nextOpen != std::string::npos && nextOpen < nextClose) {
      ++depth;
      pos = nextOpen + tagName.size() + 2;
    } else {
      if (--depth == 0) return plist.substr(open, nextClose + tagName.size() + 3 - open);
      pos = nextClose + tagName.size() + 3;
    }
  }
  return "";
}

std::vector<double> numbers(const std::string& text) {
  static const std::regex re("<(?:real|integer)>([^<]*)</(?:real|integer)>");
  std::vector<double> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::strtod((*it)[1].str().c_str(), nullptr));
  return out;
}

std::string stringValue(const std::string& text) {
  static const std::regex re("<string>([^<]*)</string>");
  std::smatch m;
  return std::regex_search(text, m, re) ? m[1].str() : "";
}

const std::string& member(const std::map<std::string, std::string>& files, const std::string& name,
                          const std::string& path) {
  auto it = files.find(name);
  if (it == files.end()) throw FormatError(path, "InVesalius project lacks " + name);
  return it->second;
}

} // namespace

InVesaliusProject readInVesalius(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw IoError(path, "no such file");
  const auto files = readTarGz(path);
  const std::string& main = member(files, "main.plist", path);
  const std::string matrix = plistValue(main, "matrix");
  const auto shape = numbers(plistValue(matrix, "shape"));  // z, y, x
  const auto spacing = numbers(plistValue(main, "spacing"));  // x, y, z
  const std::string dtype = stringValue(plistValue(matrix, "dtype"));
  if (shape.size() != 3 || spacing.size() != 3) throw FormatError(path, "main.plist lacks a 3D shape or spacing");
  if (dtype != "int16") throw FormatError(path, "unsupported matrix dtype '" + dtype + "' (int16 expected)");

  InVesaliusProject p;
  p.name = stringValue(plistValue(main, "name"));
  p.modality = stringValue(plistValue(main, "modality"));
  Geometry g;
  g.size = {static_cast<std::int64_t>(shape[2]), static_cast<std::int64_t>(shape[1]), static_cast<std::int64_t>(shape[0])};
  g.spacing = {spacing[0], spacing[1], spacing[2]};
  // InVesalius keeps slices bottom-up as VTK does: row index grows towards anterior (seen
  // on Cranium: the face sits at high y), so the y axis points to A in ITK's LPS space.
  g.direction = {1, 0, 0, 0, -1, 0, 0, 0, 1};
  const std::string matrixFile = stringValue(plistValue(matrix, "filename"));
  const std::string& raw = member(files, matrixFile.empty() ? "matrix.dat" : matrixFile, path);
  if (static_cast<std::int64_t>(raw.size()) != g.voxelCount() * 2)
    throw FormatError(path, "matrix.dat holds " + std::to_string(raw.size()) + " bytes; the plist's shape needs " +
                                std::to_string(g.voxelCount() * 2));
  p.image = Volume(g);
  p.image.setPixelType("int16");
  const auto* b = reinterpret_cast<const unsigned char*>(raw.data());
  for (std::int64_t i = 0; i < g.voxelCount(); ++i)
    p.image.data()[i] = static_cast<float>(static_cast<std::int16_t>(b[2 * i] | (b[2 * i + 1] << 8)));

  for (int m = 0;; ++m) {
    const auto plist = files.find("mask_" + std::to_string(m) + ".plist");
    if (plist == files.end()) break;
    InVesaliusMask mask;
    mask.name = stringValue(plistValue(plist->second, "name"));
    const auto range = numbers(plistValue(plist->second, "threshold_range"));
    if (range.size() == 2) { mask.thresholdLow = range[0]; mask.thresholdHigh = range[1]; }
    const auto mshape = numbers(plistValue(plist->second, "mask_shape"));
    std::string dat = stringValue(plistValue(plist->second, "mask_file"));
    const std::string& data = member(files, dat.empty() ? "mask_" + std::to_string(m) + ".dat" : dat, path);
    // The mask carries one extra leading plane on each axis (InVesalius' edit flags).
    const std::int64_t mx = g.size[0] + 1, my = g.size[1] + 1, mz = g.size[2] + 1;
    if (mshape.size() == 3 && (mshape[0] != mz || mshape[1] != my || mshape[2] != mx))
      throw FormatError(path, "mask_" + std::to_string(m) + " shape does not match the image plus its border");
    if (static_cast<std::int64_t>(data.size()) != mx * my * mz)
      throw FormatError(path, "mask_" + std::to_string(m) + ".dat holds " + std::to_string(data.size()) + " bytes, expected " +
                                  std::to_string(mx * my * mz));
    mask.mask = Volume(g);
    mask.mask.setPixelType("uint8");
    const auto* d = reinterpret_cast<const unsigned char*>(data.data());
    for (std::int64_t z = 0; z < g.size[2]; ++z)
      for (std::int64_t y = 0; y < g.size[1]; ++y)
        for (std::int64_t x = 0; x < g.size[0]; ++x)
          mask.mask.at(x, y, z) = d[((z + 1) * my + (y + 1)) * mx + (x + 1)] > 127 ? 1.0f : 0.0f;
    p.masks.push_back(std::move(mask));
  }
  return p;
}

std::string findInVesaliusSample() {
  for (const char* c : {"/usr/share/doc/invesalius-examples/examples/Cranium.inv3",
                        "/usr/share/invesalius/samples/Cranium.inv3", "/usr/share/invesalius-examples/Cranium.inv3"}) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c;
  }
  return "";
}

} // namespace splitseg::io
