// info and import-invesalius: looking at volumes and creating the demo case.
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/base/Printable.h"
#include "core/io/DicomSeries.h"
#include "core/io/InVesalius.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/volume/Orientation.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

namespace fs = std::filesystem;

namespace splitseg::cli {

namespace {

std::string defaultDemoFolder() {
  if (const char* d = std::getenv("SPLITSEG_DATA_DIR")) return (fs::path(d) / "cranium").string();
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return (fs::path(x) / "splitseg" / "demo" / "cranium").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home ? home : ".") / ".local" / "share" / "splitseg" / "demo" / "cranium").string();
}

void addInfo(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "print size, spacing, orientation, pixel type and intensity range of a volume");
  auto path = std::make_shared<std::string>();
  auto series = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("file", *path, "image file (.nii, .nii.gz, .nrrd, .nhdr, .mha, .mhd) or DICOM folder")->required();
  cmd->add_option("--series", *series, "DICOM series to read when the folder holds several");
  cmd->add_flag("--json", *json, "print JSON");
  cmd->callback([=] {
    std::error_code ec;
    nlohmann::json out;
    if (fs::is_directory(*path, ec)) {
      const auto list = io::listDicomSeries(*path);
      nlohmann::json js = nlohmann::json::array();
      for (const auto& s : list)
        js.push_back({{"uid", printable(s.uid)}, {"description", printable(s.description)}, {"modality", printable(s.modality)},
                      {"slices", s.sliceCount}});
      out["series"] = js;
      if (list.size() > 1 && series->empty()) {
        if (*json) std::cout << out.dump(2) << "\n";
        else {
          std::printf("%s holds %zu DICOM series (choose one with --series UID):\n", printable(*path).c_str(), list.size());
          for (const auto& s : list)
            std::printf("  %s  %s %s (%zu slices)\n", printable(s.uid).c_str(), printable(s.modality).c_str(),
                        printable(s.description).c_str(), s.sliceCount);
        }
        return;
      }
    }
    io::ReadOptions ro;
    ro.dicomSeriesUid = *series;
    // The header and a streamed range: info never holds the volume (VolumeSummary).
    const io::VolumeSummary v = io::summarizeVolume(*path, ro);
    const auto& g = v.header.geometry;
    const float lo = v.min, hi = v.max;
    const std::int64_t nonFinite = v.nonFinite;
    const std::string nonFiniteNote = v.nonFiniteNote.empty() ? "" : printable(*path) + ": " + v.nonFiniteNote;
    out["file"] = printable(*path);
    out["format"] = v.header.format;
    out["size"] = g.size;
    out["spacing"] = g.spacing;
    out["origin"] = g.origin;
    out["direction"] = g.direction;
    out["orientation"] = orientationCode(g);
    out["oblique"] = isOblique(g);
    out["pixelType"] = v.header.pixelType;
    out["range"] = {lo, hi};
    out["nonFinite"] = nonFinite;
    if (!nonFiniteNote.empty()) out["warning"] = nonFiniteNote;
    if (*json) {
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::printf("file:        %s\n", printable(*path).c_str());
    std::printf("format:      %s\n", out["format"].get<std::string>().c_str());
    std::printf("size:        %lld x %lld x %lld\n", (long long)g.size[0], (long long)g.size[1], (long long)g.size[2]);
    std::printf("spacing:     %.6g x %.6g x %.6g mm\n", g.spacing[0], g.spacing[1], g.spacing[2]);
    std::printf("origin:      %.6g, %.6g, %.6g mm (LPS)\n", g.origin[0], g.origin[1], g.origin[2]);
    std::printf("orientation: %s%s\n", orientationCode(g).c_str(), isOblique(g) ? " (oblique)" : "");
    std::printf("direction:  ");
    for (int i = 0; i < 9; ++i) std::printf("%s%.4g%s", i % 3 ? " " : " [", g.direction[i] + 0.0, i % 3 == 2 ? "]" : "");
    std::printf("\n");
    std::printf("pixel type:  %s\n", v.header.pixelType.c_str());
    std::printf("range:       %g .. %g\n", lo, hi);
    if (nonFinite) std::printf("non-finite:  %lld voxels are NaN or infinite\n", (long long)nonFinite);
    if (!nonFiniteNote.empty()) std::printf("warning:     %s\n", nonFiniteNote.c_str());
  });
}

void addImport(CLI::App& app) {
  auto* cmd = app.add_subcommand("import-invesalius",
                                 "convert InVesalius' Cranium.inv3 head CT into image.nii.gz + bone.nii.gz (the demo case)");
  auto source = std::make_shared<std::string>(io::findInVesaliusSample());
  auto out = std::make_shared<std::string>(defaultDemoFolder());
  cmd->add_option("--source", *source, ".inv3 project (default: Debian's invesalius-examples)")->capture_default_str();
  cmd->add_option("--out", *out, "output folder")->capture_default_str();
  cmd->callback([=] {
    if (source->empty())
      throw IoError("Cranium.inv3", "not found; install Debian's invesalius-examples or pass --source");
    const auto project = io::readInVesalius(*source);
    if (project.masks.empty()) throw FormatError(*source, "the project has no masks");
    // Bone is the mask thresholded highest (InVesalius' bone preset starts at 226 HU).
    const io::InVesaliusMask* bone = &project.masks.front();
    for (const auto& m : project.masks)
      if (m.thresholdLow > bone->thresholdLow) bone = &m;
    fs::create_directories(*out);
    const std::string image = (fs::path(*out) / "image.nii.gz").string();
    const std::string label = (fs::path(*out) / "bone.nii.gz").string();
    io::writeVolume(project.image, image);
    io::writeSegmentation(bone->mask, project.image.geometry(), label);
    const auto& g = project.image.geometry();
    nlohmann::json j{{"image", image}, {"label", label}, {"size", g.size}, {"spacing", g.spacing},
                     {"range", {project.image.range().first, project.image.range().second}},
                     {"boneThreshold", {bone->thresholdLow, bone->thresholdHigh}}};
    std::cout << j.dump() << "\n";
  });
}

} // namespace

void addVolumeCommands(CLI::App& app) {
  addInfo(app);
  addImport(app);
}

} // namespace splitseg::cli
