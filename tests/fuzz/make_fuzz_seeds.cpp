// Writes the seed corpora: small valid files of every format, made by the project's own
// writers (the same helpers the IO tests use). Usage: make_fuzz_seeds <corpus-root>
#include "core/io/DicomSeries.h"
#include "core/io/VolumeWriter.h"
#include "core/run/CheckpointInfo.h"
#include "core/session/Session.h"
#include "tests/core/io/TestVolumes.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace fs = std::filesystem;
using namespace splitseg;

namespace {
void text(const fs::path& p, const std::string& t) { std::ofstream(p, std::ios::binary) << t; }

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
                        "fuzz_checkpoint", "fuzz_summary_json"})
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
  fs::remove_all(scratch);
  return 0;
}
