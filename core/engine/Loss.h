#pragma once
// Soft Dice + BCE for one foreground class, soft Dice + cross-entropy for several.
// Logits in, fp32 loss out; Dice per foreground class as the metric.
#include <torch/types.h>

#include <vector>

namespace splitseg::engine {

struct LossResult {
  torch::Tensor loss;            // scalar, differentiable
  std::vector<double> dice;      // hard Dice per foreground class (metric, 1.0 when both empty)
};

// logits: (N, C, D, H, W); target: (N, D, H, W) integer labels. C == 1 means binary.
LossResult segmentationLoss(const torch::Tensor& logits, const torch::Tensor& target);

// Label map from logits: sigmoid > 0.5 for C == 1, argmax otherwise. (N, D, H, W) int64.
torch::Tensor labelsFromLogits(const torch::Tensor& logits);
// Probabilities from logits: sigmoid or softmax over channels.
torch::Tensor probabilitiesFromLogits(const torch::Tensor& logits);

// Hard Dice per foreground class between two label maps.
std::vector<double> dicePerClass(const torch::Tensor& predicted, const torch::Tensor& target, int classes);

} // namespace splitseg::engine
