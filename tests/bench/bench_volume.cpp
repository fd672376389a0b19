// splitseg-bench volume: the volume-loading benchmark (issue 3's goals: a 512x512x300 int16 CT
// as .nii.gz loads into a Volume in < 2 s, the demo CT in < 1 s). Built only with ITK.
//   volume --write F   writes the synthetic CT once (seeded; air, body, bone, noise)
//   volume --read F    times io::readVolume(F), median over --repeats, one JSON line
// The peer (peer_volume.py, SimpleITK) reads the same files in the same run.
#include "tests/bench/BenchSupport.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <random>

namespace splitseg::bench {

namespace {

// A head-sized CT in Hounsfield units: air outside, soft tissue ellipsoid, a bone shell, noise.
Volume syntheticCt(std::array<std::int64_t, 3> size) {
  Geometry g;
  g.size = size;
  g.spacing = {0.7, 0.7, 1.0};
  Volume v(g, -1000.0f);
  v.setPixelType("int16");
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 20.0f);
  const double cx = size[0] / 2.0, cy = size[1] / 2.0, cz = size[2] / 2.0;
  for (std::int64_t z = 0; z < size[2]; ++z)
    for (std::int64_t y = 0; y < size[1]; ++y)
      for (std::int64_t x = 0; x < size[0]; ++x) {
        const double r = std::sqrt(std::pow((x - cx) / (0.42 * size[0]), 2) + std::pow((y - cy) / (0.45 * size[1]), 2) +
                                   std::pow((z - cz) / (0.48 * size[2]), 2));
        float hu = -1000.0f;
        if (r < 0.92) hu = 40.0f;
        else if (r < 1.0) hu = 1200.0f;
        v.data()[v.index(x, y, z)] = std::round(hu + noise(rng));
      }
  return v;
}
} // namespace

void addVolumeCommand(CLI::App& app) {
  struct Args {
    std::string write, read, size = "512,512,300";
    int repeats = 5;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("volume", "volume loading: write the synthetic CT, or time reading a file");
  cmd->add_option("--write", a->write, "write the synthetic CT (.nii.gz) here");
  cmd->add_option("--size", a->size, "synthetic CT size X,Y,Z")->capture_default_str();
  cmd->add_option("--read", a->read, "time reading this image into a Volume");
  cmd->add_option("--repeats", a->repeats)->capture_default_str();
  cmd->callback([a] {
    if (!a->write.empty()) {
      const auto t0 = Clock::now();
      io::writeVolume(syntheticCt(parseSize(a->size)), a->write);
      std::cout << nlohmann::json{{"wrote", a->write}, {"seconds", seconds(t0)}}.dump() << "\n";
    }
    if (!a->read.empty()) {
      std::vector<double> times, cpu;
      Geometry g;
      for (int i = 0; i < a->repeats; ++i) {
        const auto t0 = Clock::now();
        const double c0 = cpuSeconds();
        const Volume v = io::readVolume(a->read);
        times.push_back(seconds(t0));
        cpu.push_back(cpuSeconds() - c0);
        g = v.geometry();
      }
      std::cout << nlohmann::json{{"file", a->read}, {"median_seconds", median(times)}, {"runs", times},
                                  {"cpu_runs", cpu}, {"size", g.size}}
                       .dump()
                << "\n";
    }
  });
}

} // namespace splitseg::bench
