#pragma once
// fuzz_checkpoint's second input kind: a pickle stored in a well-formed checkpoint archive beside
// eight fixed 8 KiB tensor records ("data/0".."data/7"), so that mutated pickles reach LibTorch's
// unpickler and SplitSeg's value checks instead of ending at the zip's CRC check. make_fuzz_seeds
// checks that its seed pickle, stored this way, reads as a checkpoint. CheckpointTarget is the
// network both load into, so the seeds' tensors match it.
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace splitseg::fuzz {

inline std::vector<char> archiveAround(const std::uint8_t* pickle, std::size_t size) {
  constexpr int kRecords = 8;
  constexpr std::int64_t kRecordBytes = 8192;  // above the CPU generator's 5056-byte state
  static const std::vector<at::Tensor> records = [] {
    std::vector<at::Tensor> r;
    for (int i = 0; i < kRecords; ++i)
      r.push_back(torch::arange(kRecordBytes, torch::kInt64).add(i).remainder(251).to(torch::kUInt8));
    return r;
  }();
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* b, size_t n) {
    out.insert(out.end(), static_cast<const char*>(b), static_cast<const char*>(b) + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", reinterpret_cast<const char*>(pickle), size, records, writer);
  writer.writeEndOfFile();
  return out;
}

// The network a checkpoint is checked against: small enough for many executions per second,
// with parameters, Adam moments and the CPU generator all in play.
struct CheckpointTarget {
  torch::nn::Linear net{torch::nn::LinearOptions(3, 2)};
  torch::optim::Adam adam{net->parameters(), torch::optim::AdamOptions(1e-3)};
};

} // namespace splitseg::fuzz
