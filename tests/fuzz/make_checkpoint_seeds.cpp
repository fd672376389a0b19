// Writes fuzz_checkpoint's seeds: a checkpoint of the network the target loads into (Linear 3 -> 2,
// Adam after one step), whole (first byte even) and its pickle alone (first byte odd, stored by
// the target as CheckpointArchive.h does). Both must read back as checkpoints, or the fuzzer would
// start from refusals only. Apart from make_fuzz_seeds: linking LibTorch there made its
// std::filesystem calls bind to the copies libtorch.so exports, and remove_all crashed in the
// clang build. Usage: make_checkpoint_seeds <corpus-folder>
#include "CheckpointArchive.h"
#include "core/checkpoint/CheckpointFile.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

using namespace splitseg;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_checkpoint_seeds <corpus-folder>\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    torch::manual_seed(1);
    fuzz::CheckpointTarget t;
    t.net->forward(torch::ones({1, 3})).sum().backward();
    t.adam.step();
    const auto ckpt = checkpoint::CheckpointFile::capture(*t.net, t.adam, {run::RunSpec{}, 1, "1 2 3"}).serialize();
    std::istringstream in(std::string(ckpt.begin(), ckpt.end()));
    caffe2::serialize::PyTorchStreamReader reader(&in);
    const auto [pickle, size] = reader.getRecord("data.pkl");
    const auto* bytes = static_cast<const std::uint8_t*>(pickle.get());
    checkpoint::CheckpointFile::parse(ckpt, "seed_whole");
    checkpoint::CheckpointFile::parse(fuzz::archiveAround(bytes, size), "seed_pickle");
    std::ofstream(dir + "/seed_whole.bin", std::ios::binary) << '\0' << std::string(ckpt.begin(), ckpt.end());
    std::ofstream(dir + "/seed_pickle.bin", std::ios::binary)
        << '\1' << std::string(reinterpret_cast<const char*>(bytes), size);
  } catch (const std::exception& e) {
    std::cerr << "make_checkpoint_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
