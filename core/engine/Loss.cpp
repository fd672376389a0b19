#include "core/engine/Loss.h"
#include "core/metrics/SegmentationMetrics.h"

#include <torch/nn/functional/loss.h>
#include <torch/torch.h>

namespace splitseg::engine {

namespace F = torch::nn::functional;

namespace {
constexpr double kSmooth = 1e-5;

// Soft Dice per sample and class, averaged: 1 - mean(2|P.T| / (|P| + |T|)).
torch::Tensor softDiceLoss(const torch::Tensor& probs, const torch::Tensor& onehot) {
  const std::vector<int64_t> spatial{2, 3, 4};
  auto inter = (probs * onehot).sum(spatial);
  auto denom = probs.sum(spatial) + onehot.sum(spatial);
  return 1.0 - ((2.0 * inter + kSmooth) / (denom + kSmooth)).mean();
}
} // namespace

LossResult segmentationLoss(const torch::Tensor& logitsIn, const torch::Tensor& target) {
  // The loss is always computed in fp32, whatever precision the forward ran in.
  const torch::Tensor logits = logitsIn.to(torch::kFloat);
  const auto classes = logits.size(1);
  LossResult r;
  if (classes == 1) {
    auto t = (target == 1).to(torch::kFloat).unsqueeze(1);
    auto probs = torch::sigmoid(logits);
    r.loss = softDiceLoss(probs, t) + F::binary_cross_entropy_with_logits(logits, t);
  } else {
    auto onehot = F::one_hot(target.to(torch::kLong), classes).permute({0, 4, 1, 2, 3}).to(torch::kFloat);
    auto probs = torch::softmax(logits, 1);
    using torch::indexing::Slice;
    r.loss = softDiceLoss(probs.index({Slice(), Slice(1)}), onehot.index({Slice(), Slice(1)})) +
             F::cross_entropy(logits, target.to(torch::kLong));
  }
  torch::NoGradGuard noGrad;
  r.dice = dicePerClass(labelsFromLogits(logits), target, classes == 1 ? 1 : static_cast<int>(classes - 1));
  return r;
}

torch::Tensor labelsFromLogits(const torch::Tensor& logits) {
  if (logits.size(1) == 1) return (logits.select(1, 0) > 0).to(torch::kLong);
  return logits.argmax(1);
}

torch::Tensor probabilitiesFromLogits(const torch::Tensor& logits) {
  return logits.size(1) == 1 ? torch::sigmoid(logits) : torch::softmax(logits, 1);
}

std::vector<double> dicePerClass(const torch::Tensor& predicted, const torch::Tensor& target, int classes) {
  // Counted where the labels are (a GPU's label map is not copied to the host every step); the
  // 3 counts per class come back in one transfer.
  const auto& p = predicted;
  const auto t = target.to(predicted.device());
  std::vector<torch::Tensor> counts;
  for (int c = 1; c <= classes; ++c) {
    auto pc = p == c, tc = t == c;
    counts.push_back((pc & tc).sum());
    counts.push_back(pc.sum());
    counts.push_back(tc.sum());
  }
  std::vector<double> dice;
  if (counts.empty()) return dice;
  const auto host = torch::stack(counts).to(torch::kCPU);
  const auto* n = host.data_ptr<std::int64_t>();
  for (int c = 0; c < classes; ++c) dice.push_back(metrics::dice(n[3 * c], n[3 * c + 1], n[3 * c + 2]));
  return dice;
}

} // namespace splitseg::engine
