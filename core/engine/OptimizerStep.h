#pragma once
// Pieces that keep a training step all-or-nothing when memory runs out, and checkpoints exact on
// every device. Used by Trainer; kept apart so the step's body stays short.
#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <string>

namespace splitseg::engine {

class CpuMemoryCounter;

// Creates Adam's state (step 0, zero moments beside each parameter) for every parameter that has
// none, as Adam::step would on its first call: the optimizer's big allocations happen when it is
// built (or after a checkpoint load), not inside the first step.
void allocateAdamState(torch::optim::Adam& adam);

// Adam's update, numerically the same as torch::optim::Adam::step, but all-or-nothing under
// out-of-memory: the only allocation (one scratch buffer per device and dtype, as large as the
// largest parameter there, for the denominator) happens before any parameter or moment changes;
// everything after is in place. A c10::OutOfMemoryError thrown from it leaves parameters, moments
// and step counts untouched. Options it cannot do in place (weight decay, amsgrad) fall back to
// Adam::step.
void adamStep(torch::optim::Adam& adam);

// What the CPU keeps between steps that the run's CPU budget counts (as the planner does): the
// optimizer's parameters on the CPU and their Adam state. CpuMemoryCounter::setHeld takes it.
std::int64_t cpuBytesHeld(const torch::optim::Adam& adam);
// "the CPU budget of 2.0 GiB (the weights and Adam's moments hold 1.1 MiB of it)": out-of-memory
// messages of a step beyond `counter`'s budget.
std::string cpuBudgetText(const CpuMemoryCounter& counter);
// The run's CPU budget on a trainer's counter, what `adam` keeps on the CPU held against it.
void applyCpuBudget(CpuMemoryCounter& counter, std::int64_t budget, const torch::optim::Adam& adam);
// Without the host caching allocator (which refuses at allocation time) a budget passed is seen
// after the fact: OutOfMemoryError(device, stage) once `counter` went beyond it.
void checkCpuBudget(const CpuMemoryCounter& counter, const std::string& device, const std::string& stage);

// Sets every parameter group's rate (RunSpec::learningRateAt) before a step.
void setLearningRate(torch::optim::Adam& adam, double lr);

// Puts a module in eval mode and back in its previous mode on every exit (exceptions included).
class EvalModeGuard {
public:
  explicit EvalModeGuard(torch::nn::Module& module) : module_(module), training_(module.is_training()) {
    module_.eval();
  }
  ~EvalModeGuard() { module_.train(training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

private:
  torch::nn::Module& module_;
  bool training_;
};

} // namespace splitseg::engine
