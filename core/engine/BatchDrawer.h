#pragma once
// The training batches of a run, in one place for the Trainer and the trainers over ranks: drawn
// from the run's sample source with its seeded generator (the sampler state checkpoints record),
// labels checked, and on request the next one drawn ahead on a worker thread while the devices
// run a step.
#include "core/data/SampleSource.h"
#include "core/run/RunSpec.h"

#include <array>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <torch/types.h>

namespace splitseg::engine {

// Whether a run that has done `stepsDone` steps has another one to draw a batch for.
inline bool anotherStepFollows(const run::RunSpec& run, std::int64_t stepsDone) {
  return run.totalSteps() <= 0 || stepsDone < run.totalSteps();
}

class BatchDrawer {
public:
  // `run`'s batch, patch and seed; `outChannels`: the network's, for the label check.
  BatchDrawer(std::shared_ptr<data::SampleSource> source, const run::RunSpec& run, std::int64_t outChannels);

  // The next batch, (batch, channels, D, H, W) and (batch, D, H, W) labels: the one drawn ahead if
  // there is one (a failure to draw it is thrown now), else drawn now. Labels checked either way.
  void next(torch::Tensor& input, torch::Tensor& target);
  // Starts drawing the next batch on a worker thread, for next() to return (in pinned memory with
  // `pinned`: copies to a GPU then run asynchronously). What goes wrong is kept for next() to throw.
  // Until next(), restore() or settle(), only that thread uses the source and the generator.
  void drawAhead(bool pinned);
  bool hasDrawnAhead() const { return pending_.valid(); }
  // Waits for a batch being drawn ahead (kept for next()).
  void settle();
  // The source's validation samples at the run's patch, after any draw in flight: the source is
  // never used on two threads at once.
  std::vector<data::Sample> validationSamples();
  ~BatchDrawer();
  BatchDrawer(const BatchDrawer&) = delete;
  BatchDrawer& operator=(const BatchDrawer&) = delete;

  // The sampler state as a checkpoint records it: from before a batch drawn ahead, so that a
  // resumed run draws that batch again.
  std::string state() const;
  // Restores a state() (empty: the generator stays as it is); throws FormatError naming `path`
  // when it is not a generator state. Forgets a batch drawn ahead.
  void restore(const std::string& state, const std::string& path);

private:
  void draw(torch::Tensor& input, torch::Tensor& target, bool pinned);

  std::shared_ptr<data::SampleSource> source_;
  int batch_;
  std::array<std::int64_t, 3> patch_;
  std::int64_t outChannels_;
  std::mt19937_64 rng_;
  struct Pending {
    torch::Tensor input, target;
    std::exception_ptr error;
  };
  struct Worker;  // one thread for the drawer's life
  std::unique_ptr<Worker> worker_;
  std::future<Pending> pending_;  // valid while a batch is drawn ahead
  std::mt19937_64 rngBefore_;     // the generator before that batch (checkpoints record it)
};

} // namespace splitseg::engine
