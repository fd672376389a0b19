// Writes the seed corpora: small valid files of every format, made by the project's own
// writers (the same helpers the IO tests use). Usage: make_fuzz_seeds <corpus-root>
#include "core/io/DicomSeries.h"
#include "core/io/VolumeWriter.h"
#include "core/run/CheckpointInfo.h"
#include "core/session/Session.h"
#include "tests/core/io/TestVolumes.h"
#include "tests/fuzz/GzipRatioInput.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using namespace splitseg;

namespace {
void text(const fs::path& p, const std::string& t) { std::ofstream(p, std::ios::binary) << t; }

// n levels: open(i) and close(i) for level i, inner in the middle.
std::string nest(int n, const std::function<std::string(int)>& open, const std::function<std::string(int)>& close,
                 const std::string& inner = "0") {
  std::string t;
  for (int i = 0; i < n; ++i) t += open(i);
  t += inner;
  for (int i = n - 1; i >= 0; --i) t += close(i);
  return t;
}
std::string arrays(int n) { return nest(n, [](int) { return "["; }, [](int) { return "]"; }); }
std::string objects(int n) { return nest(n, [](int) { return "{\"\":"; }, [](int) { return "}"; }); }
// Arrays and objects in turn, with a sibling value at every level.
std::string mixed(int n) {
  return nest(n, [](int i) { return i % 2 ? std::string("{\"k\":1,\"v\":") : std::string("[1,"); },
              [](int i) { return i % 2 ? "}" : "]"; });
}

// fuzz_json_depth: a normal session and run description, then the depths around the limit (64
// levels accepted, 65 refused) and far past it, bare and inside a session.
void jsonDepthSeeds(const fs::path& dir, const fs::path& sessionFile, const std::string& runJson) {
  fs::copy_file(sessionFile, dir / "seed_session.splitseg", fs::copy_options::overwrite_existing);
  text(dir / "seed_run.json", runJson);
  for (int n : {63, 64, 65, 1000, 200000}) {
    text(dir / ("arrays_" + std::to_string(n) + ".json"), arrays(n));
    text(dir / ("objects_" + std::to_string(n) + ".json"), objects(n));
    text(dir / ("mixed_" + std::to_string(n) + ".json"), mixed(n));
  }
  text(dir / "unclosed_200000.json", std::string(200000, '['));
  // A session's view (opaque to core) nested 62 levels (63 with the session: accepted) and 64
  // (65: refused); a run description whose "options" nest 70 levels.
  std::ifstream in(sessionFile, std::ios::binary);
  const std::string session((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto withView = [&](const std::string& view) {
    auto j = nlohmann::json::parse(session);
    j["view"] = "@VIEW@";
    std::string t = j.dump();
    t.replace(t.find("\"@VIEW@\""), 8, view);
    return t;
  };
  text(dir / "session_view_62.splitseg", withView(objects(62)));
  text(dir / "session_view_64.splitseg", withView(mixed(64)));
  std::string deepRun = runJson;
  const auto brace = deepRun.rfind('}');
  deepRun.insert(brace, ",\"options\":" + objects(70));
  text(dir / "run_options_70.json", deepRun);
}

// fuzz_gzip_ratio: headers that honestly claim large volumes over a short zero body (the fill
// modes make their streams inflate to the claim, or to more), volumes near and over the 256 MiB
// read budget, small whole volumes, truncated streams and lying gzip trailers.
void gzipRatioSeeds(const fs::path& dir) {
  namespace gr = splitseg::fuzz::gzratio;
  struct Seed {
    const char* name;
    std::int16_t x, y, z, datatype, bitpix;
    std::uint8_t nrrdType;
    std::uint8_t flags;
    std::uint16_t cut = 0;
    std::uint32_t extraKiB = 0;
    std::uint8_t nrrdOptions = 0;
    std::size_t bodyBytes = 64;
  };
  const std::uint8_t claimed = gr::fill(gr::kFillClaimed);
  const Seed seeds[] = {
      {"bomb_1600cubed_uint8", 1600, 1600, 1600, 2, 8, 0, claimed},
      {"bomb_512x512x2000_int16", 512, 512, 2000, 4, 16, 2, claimed},
      {"short_1600cubed_uint8", 1600, 1600, 1600, 2, 8, 0, gr::fill(gr::kFillNone)},
      {"short_512x512x2000_int16", 512, 512, 2000, 4, 16, 2, gr::fill(gr::kFillNone), 0, 0, gr::kSpacings},
      {"fits_512x512x170_uint8", 512, 512, 170, 2, 8, 0, claimed},       // 44.6 Mi voxels: ~223 MiB of 256
      {"over_budget_512x512x240_uint8", 512, 512, 240, 2, 8, 0, claimed}, // under the voxel cap, over the budget
      {"whole_6x5x4_int16", 6, 5, 4, 4, 16, 2, gr::fill(gr::kFillNone), 0, 0, gr::kEndian, 240},
      {"whole_8x8x8_float32", 8, 8, 8, 16, 32, 8, claimed, 0, 0, gr::kSpacings, 0},
      {"whole_64cubed_float64", 64, 64, 64, 64, 64, 9, claimed},
      {"more_than_claimed_32cubed", 32, 32, 32, 2, 8, 0, gr::fill(gr::kFillClaimedPlusExtra), 0, 65536},
      {"truncated_64cubed_int16", 64, 64, 64, 4, 16, 2, static_cast<std::uint8_t>(claimed | gr::kTruncate), 200},
      {"truncated_trailer_16cubed", 16, 16, 16, 2, 8, 0, static_cast<std::uint8_t>(claimed | gr::kTruncate), 6},
      {"forged_isize_256cubed_int16", 256, 256, 256, 4, 16, 2, static_cast<std::uint8_t>(gr::fill(gr::kFillNone) | gr::kForgeSize)},
      {"bad_crc_second_member_16cubed", 16, 16, 16, 2, 8, 0, static_cast<std::uint8_t>(claimed | gr::kBadCrc | gr::kSecondMember)},
      {"stored_32cubed_uint16", 32, 32, 32, 512, 16, 3, static_cast<std::uint8_t>(claimed | gr::kStoredBody), 0, 0, gr::kByteSkip},
      {"zeros_1gib_tiny_header", 2, 2, 2, 2, 8, 0, gr::fill(gr::kFillExtra), 0, 1u << 20},
  };
  for (const Seed& s : seeds) {
    gr::Description d;
    d.niftiFlags = static_cast<std::uint8_t>(s.flags | gr::kRepair);
    d.nrrdFlags = s.flags;
    d.cut = s.cut;
    d.extraKiB = s.extraKiB;
    d.niftiHeader = gr::niftiHeader(s.x, s.y, s.z, s.datatype, s.bitpix);
    d.nrrdType = s.nrrdType;
    d.nrrdOptions = s.nrrdOptions;
    d.nrrdSkip = 16;
    d.nrrdSizes[0] = static_cast<std::uint32_t>(s.x);
    d.nrrdSizes[1] = static_cast<std::uint32_t>(s.y);
    d.nrrdSizes[2] = static_cast<std::uint32_t>(s.z);
    for (std::size_t i = 0; i < s.bodyBytes; ++i) d.body.push_back(static_cast<char>((i * 7) % 5));
    text(dir / (std::string("seed_") + s.name + ".bin"), d.bytes());
  }
}

void tarGz(const fs::path& path, const std::vector<std::pair<std::string, std::string>>& files) {
  gzFile f = gzopen(path.c_str(), "wb");
  for (const auto& [name, data] : files) {
    char h[512] = {};
    std::snprintf(h, 100, "tmpdir/%s", name.c_str());
    std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(data.size()));
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 5);
    gzwrite(f, h, 512);
    gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
    const std::string pad((512 - data.size() % 512) % 512, '\0');
    gzwrite(f, pad.data(), static_cast<unsigned>(pad.size()));
  }
  const std::string end(1024, '\0');
  gzwrite(f, end.data(), static_cast<unsigned>(end.size()));
  gzclose(f);
}
} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_fuzz_seeds <corpus-root>\n";
    return 2;
  }
  const fs::path root(argv[1]);
  for (const char* t : {"fuzz_nifti", "fuzz_nrrd", "fuzz_metaimage", "fuzz_dicom", "fuzz_inv3", "fuzz_dataset_json", "fuzz_run_json",
                        "fuzz_checkpoint", "fuzz_summary_json", "fuzz_json_depth", "fuzz_gzip_ratio", "fuzz_gate_wire"})
    fs::create_directories(root / t);
  const fs::path scratch = root / "scratch";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  int n = 0;
  for (bool integer : {true, false}) {
    const Volume v = test::makeTestVolume({6, 5, 4}, 1 + n, integer);
    const std::string tag = integer ? "int16" : "float32";
    io::writeVolume(v, (root / "fuzz_nifti" / ("seed_" + tag + ".nii")).string());
    io::writeVolume(v, (scratch / ("gz_" + tag + ".nii.gz")).string());
    fs::copy_file(scratch / ("gz_" + tag + ".nii.gz"), root / "fuzz_nifti" / ("seed_" + tag + "_gz.nii"), fs::copy_options::overwrite_existing);
    io::writeVolume(v, (root / "fuzz_nrrd" / ("seed_" + tag + ".nrrd")).string());
    io::writeVolume(v, (root / "fuzz_metaimage" / ("seed_" + tag + ".mha")).string());
    ++n;
  }
  io::writeDicomSeries(test::makeTestVolume({6, 5, 3}, 9, true), (scratch / "dicom").string());
  int k = 0;
  for (const auto& e : fs::directory_iterator(scratch / "dicom"))
    fs::copy_file(e.path(), root / "fuzz_dicom" / ("seed_" + std::to_string(k++) + ".dcm"), fs::copy_options::overwrite_existing);
  const std::string plist =
      "<plist><dict><key>matrix</key><dict><key>dtype</key><string>int16</string><key>filename</key>"
      "<string>matrix.dat</string><key>shape</key><array><integer>2</integer><integer>3</integer>"
      "<integer>4</integer></array></dict><key>modality</key><string>CT</string><key>name</key><string>toy</string>"
      "<key>spacing</key><array><real>0.5</real><real>0.75</real><real>2.5</real></array></dict></plist>";
  tarGz(root / "fuzz_inv3" / "seed_toy.inv3", {{"main.plist", plist}, {"matrix.dat", std::string(48, '\1')}});
  text(root / "fuzz_dataset_json" / "seed_msd.json",
       R"({"name":"Toy","modality":{"0":"CT"},"labels":{"0":"background","1":"blob"},"numTraining":1,)"
       R"("training":[{"image":"./imagesTr/case_0.nii.gz","label":"./labelsTr/case_0.nii.gz"}]})");
  text(root / "fuzz_dataset_json" / "seed_v2.json",
       R"({"channel_names":{"0":"CT"},"labels":{"background":0,"liver":1,"tumour":2},"numTraining":1,"file_ending":".nii.gz"})");
  // An evaluation summary as evaluateDataset writes it: a case scored (with its peaks), a case failed.
  text(root / "fuzz_summary_json" / "seed_summary.json",
       R"({"dataset":"Toy","cases":"validation","predicted":1,"seconds":1.5,"out":"/p","mean_dice":0.5,)"
       R"("failed":[{"case":"c1","error":"no such file"}],"labels":[{"label":1,"cases":1,"mean_dice":0.5,)"
       R"("mean_hd95_mm":"inf","infinite_hd95":1}],"metric_per_case":[{"case":"c0","image":"/d/i.nii.gz",)"
       R"("label":"/d/l.nii.gz","prediction":"/p/c0.nii.gz","seconds":1.0,"mean_dice":0.5,"metrics":[{"label":1,)"
       R"("dice":0.5,"hd95_mm":"inf","predicted":0,"truth":10,"false_positive":0,"false_negative":10}],)"
       R"("memory":{"measured":{"cpu":1048576,"r1:cuda:0":5368709120},"planned":{"cpu":1000000}}}]})");
  // A run description, a checkpoint's metadata (it holds the run) and a session holding both.
  splitseg::run::RunSpec run;
  run.placement = {{"enc0", "cpu"}, {"dec0", "cpu+cpu"}};
  run.recompute = {"dec0"};
  text(root / "fuzz_run_json" / "seed_run.json", run.toJson().dump());
  text(root / "fuzz_run_json" / "seed_meta.json", splitseg::run::CheckpointInfo{run, 3, "1 2 3"}.toMetaJson());
  splitseg::session::Session session;
  session.run = run;
  splitseg::session::saveSession(session, (root / "fuzz_run_json" / "seed_session.splitseg").string());
  jsonDepthSeeds(root / "fuzz_json_depth", root / "fuzz_run_json" / "seed_session.splitseg", run.toJson().dump());
  gzipRatioSeeds(root / "fuzz_gzip_ratio");
  fs::remove_all(scratch);
  return 0;
}
