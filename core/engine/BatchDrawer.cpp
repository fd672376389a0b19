#include "core/engine/BatchDrawer.h"

#include "core/base/Error.h"
#include "core/engine/Tensors.h"

#include <sstream>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace splitseg::engine {

void checkLabels(const torch::Tensor& target, std::int64_t outChannels) {
  const std::int64_t classes = outChannels == 1 ? 2 : outChannels;  // one channel: background + 1
  const auto lo = target.min().item<std::int64_t>(), hi = target.max().item<std::int64_t>();
  if (lo < 0 || hi >= classes)
    throw InvalidArgument("a training label is " + std::to_string(lo < 0 ? lo : hi) + ", but the network predicts labels 0.." +
                          std::to_string(classes - 1) + " (out_channels " + std::to_string(outChannels) +
                          "): the data has more classes than the network");
}

BatchDrawer::BatchDrawer(std::shared_ptr<data::SampleSource> source, const run::RunSpec& run, std::int64_t outChannels)
    : source_(std::move(source)), batch_(run.batch), patch_(run.patch), outChannels_(outChannels), rng_(run.seed) {}

void BatchDrawer::draw(torch::Tensor& input, torch::Tensor& target) {
  std::vector<torch::Tensor> images, labels;
  for (int b = 0; b < batch_; ++b) {
    data::Sample s = source_->next(patch_, rng_);
    images.push_back(toTensor(s.channels));
    labels.push_back(toTensor(s.label).round().to(torch::kLong));
  }
  input = torch::stack(images);
  target = torch::stack(labels);
  checkLabels(target, outChannels_);
}

BatchDrawer::~BatchDrawer() { settle(); }

void BatchDrawer::settle() {
  if (pending_.valid()) pending_.wait();
}

void BatchDrawer::next(torch::Tensor& input, torch::Tensor& target) {
  if (!pending_.valid()) return draw(input, target);
  Pending p = pending_.get();
  pending_ = {};
  if (p.error) std::rethrow_exception(p.error);
  input = std::move(p.input);
  target = std::move(p.target);
}

void BatchDrawer::drawAhead(bool pinned) {
  if (pending_.valid()) return;  // one batch ahead at most
  rngBefore_ = rng_;
  // A thread of its own, so that drawing overlaps the whole step on the GPU, not only its tail.
  // Grad mode is per thread: off there, as the batch needs no graph.
  pending_ = std::async(std::launch::async, [this, pinned] {
               Pending p;
               try {
                 torch::NoGradGuard noGrad;
                 draw(p.input, p.target);
                 if (pinned) {
                   p.input = p.input.pin_memory();
                   p.target = p.target.pin_memory();
                 }
               } catch (...) {
                 p.error = std::current_exception();
               }
               return p;
             });
}

std::string BatchDrawer::state() const {
  std::ostringstream out;
  out << (pending_.valid() ? rngBefore_ : rng_);
  return out.str();
}

void BatchDrawer::restore(const std::string& state, const std::string& path) {
  settle();
  pending_ = {};
  if (state.empty()) return;
  std::istringstream in(state);
  std::mt19937_64 rng;
  in >> rng;
  if (in.fail()) throw FormatError(path, "checkpoint sample_rng is not a generator state");
  rng_ = rng;
}

} // namespace splitseg::engine
