#include "core/io/InVesalius.h"

#include "core/base/Error.h"
#include "core/io/SafePath.h"
#include "core/volume/GeometryCheck.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {

// Largest member kept: plists are small; a .dat is bounded by the memory available now.
constexpr std::uint64_t kMaxPlist = 4u << 20;

bool wanted(const std::string& base) {
  auto ends = [&](const char* e) {
    const std::size_t n = std::strlen(e);
    return base.size() >= n && base.compare(base.size() - n, n, e) == 0;
  };
  return ends(".plist") || ends(".dat");
}

// The tar size field: octal digits padded by spaces/NULs; nullopt for anything else
// (GNU base-256, signs, garbage).
std::optional<std::uint64_t> tarSize(const char* field) {
  std::uint64_t v = 0;
  bool digits = false, done = false;
  for (int i = 0; i < 12; ++i) {
    const char c = field[i];
    if (c >= '0' && c <= '7' && !done) {
      if (v > (UINT64_MAX >> 3)) return std::nullopt;
      v = v * 8 + static_cast<std::uint64_t>(c - '0');
      digits = true;
    } else if (c == ' ' || c == '\0') {
      done = digits || done;
    } else {
      return std::nullopt;
    }
  }
  return digits ? std::optional<std::uint64_t>(v) : std::nullopt;
}

// The members of a .tar.gz that the reader uses (*.plist, *.dat), by base name (the project
// sits in a temporary folder name). Memory grows with the bytes actually read, never with
// what a header claims.
std::map<std::string, std::string> readTarGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw IoError(path, "cannot open for reading");
  std::map<std::string, std::string> files;
  const std::uint64_t maxDat = availableMemoryBytes() / 2;
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
    std::vector<char> chunk(1 << 20);
    bool any = false;
    while (true) {
      if (!readExact(header, 512)) {
        if (!any) throw FormatError(path, "not an InVesalius project (not a gzip'd tar archive)");
        break;  // archives may end without the two zero blocks
      }
      if (std::all_of(header, header + 512, [](char c) { return c == 0; })) break;
      if (std::memcmp(header + 257, "ustar", 5) != 0 && !any)
        throw FormatError(path, "not an InVesalius project (not a tar archive)");
      any = true;
      const std::string name(header, strnlen(header, 100));
      const auto size = tarSize(header + 124);
      if (!size) throw FormatError(path, "archive member " + name + " has a malformed size field");
      const char type = header[156];
      const std::string base = fs::path(name).filename().string();
      const bool keep = (type == '0' || type == '\0') && wanted(base);
      const std::uint64_t limit = base.size() > 6 && base.compare(base.size() - 6, 6, ".plist") == 0 ? kMaxPlist : maxDat;
      if (keep && *size > limit)
        throw FormatError(path, "archive member " + name + " claims " + std::to_string(*size) +
                                    " bytes, more than the available memory allows");
      std::string data;
      // Padded to whole blocks; read in pieces so a false size costs only what is really there.
      const std::uint64_t padded = *size + (512 - *size % 512) % 512;
      for (std::uint64_t left = padded; left > 0;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, chunk.size()));
        if (!readExact(chunk.data(), n)) throw FormatError(path, "truncated archive inside " + name);
        const std::uint64_t used = padded - left;
        if (keep && used < *size) data.append(chunk.data(), static_cast<std::size_t>(std::min<std::uint64_t>(n, *size - used)));
        left -= n;
      }
      if (keep) files[base] = std::move(data);
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
  // Walk to the matching close tag, counting nested elements of the same name. Each search
  // only moves forward (linear time on hostile input).
  const std::string openTag = "<" + tagName + ">", closeTag = "</" + tagName + ">";
  int depth = 0;
  std::size_t nextOpen = plist.find(openTag, open), nextClose = plist.find(closeTag, open);
  while (true) {
    if (nextClose == std::string::npos) return plist.substr(open);
    if (nextOpen != std::string::npos && nextOpen < nextClose) {
      ++depth;
      nextOpen = plist.find(openTag, nextOpen + openTag.size());
    } else {
      if (--depth <= 0) return plist.substr(open, nextClose + closeTag.size() - open);
      nextClose = plist.find(closeTag, nextClose + closeTag.size());
    }
  }
}

std::vector<std::string> elements(const std::string& text, const std::string& tag) {
  std::vector<std::string> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  for (std::size_t p = text.find(open); p != std::string::npos; p = text.find(open, p)) {
    const std::size_t b = p + open.size(), e = text.find(close, b);
    if (e == std::string::npos) break;
    out.push_back(text.substr(b, e - b));
    p = e + close.size();
  }
  return out;
}

std::vector<double> numbers(const std::string& text) {
  // Element order matters (shape z,y,x): merge <real> and <integer> by position.
  std::vector<std::pair<std::size_t, double>> found;
  for (const char* tag : {"real", "integer"}) {
    const std::string open = std::string("<") + tag + ">";
    std::size_t p = 0;
    for (const auto& v : elements(text, tag)) {
      p = text.find(open, p);
      found.emplace_back(p, std::strtod(v.c_str(), nullptr));
      p += open.size();
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<double> out;
  for (const auto& f : found) out.push_back(f.second);
  return out;
}

std::string stringValue(const std::string& text) {
  const auto v = elements(text, "string");
  return v.empty() ? "" : v.front();
}

const std::string& member(const std::map<std::string, std::string>& files, const std::string& name,
                          const std::string& path) {
  auto it = files.find(name);
  if (it == files.end()) throw FormatError(path, "InVesalius project lacks " + name);
  return it->second;
}

InVesaliusProject readProject(const std::string& path) {
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
  for (int i = 0; i < 3; ++i)
    if (!toAxisSize(shape[static_cast<std::size_t>(2 - i)], g.size[i]))
      throw FormatError(path, "main.plist shape holds " + std::to_string(shape[static_cast<std::size_t>(2 - i)]) +
                                  " (a positive whole number is needed)");
  g.spacing = {spacing[0], spacing[1], spacing[2]};
  // InVesalius keeps slices bottom-up as VTK does: row index grows towards anterior (seen
  // on Cranium: the face sits at high y), so the y axis points to A in ITK's LPS space.
  g.direction = {1, 0, 0, 0, -1, 0, 0, 0, 1};
  // Image, its masks (one byte each) and the raw bytes held meanwhile.
  const std::string problem = geometryProblem(g, sizeof(float) + 2);
  if (!problem.empty()) throw FormatError(path, "main.plist: " + problem);
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
    const std::int64_t mx = g.size[0] + 1, my = g.size[1] + 1, mz = g.size[2] + 1;  // checked above: no overflow
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

} // namespace

InVesaliusProject readInVesalius(const std::string& path) {
  const std::string problem = regularFileProblem(path);
  if (problem == "does not exist") throw IoError(path, "no such file");
  if (!problem.empty()) throw IoError(path, problem);
  try {
    return readProject(path);
  } catch (const std::bad_alloc&) {
    throw FormatError(path, "not enough memory to read it (does the archive claim too much?)");
  } catch (const std::length_error&) {
    throw FormatError(path, "the archive claims a size this build cannot hold");
  }
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
