#include "core/engine/BatchDrawer.h"

#include "core/base/Error.h"

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace splitseg::engine {

namespace {
// Labels the network cannot predict (a label >= its classes; negative labels) are refused before
// they reach a loss: on CUDA they would trip a device-side assert that kills the context.
void checkLabelRange(std::int64_t lo, std::int64_t hi, std::int64_t outChannels) {
  const std::int64_t classes = outChannels == 1 ? 2 : outChannels;  // one channel: background + 1
  if (lo < 0 || hi >= classes)
    throw InvalidArgument("a training label is " + std::to_string(lo < 0 ? lo : hi) + ", but the network predicts labels 0.." +
                          std::to_string(classes - 1) + " (out_channels " + std::to_string(outChannels) +
                          "): the data has more classes than the network");
}

// Labels (floats holding integers) into `out` as int64, rounded as torch::round does (to even), in
// one serial pass (as the rest of the draw, see draw()) that also finds the smallest and largest.
std::pair<std::int64_t, std::int64_t> convertLabels(const float* src, std::int64_t* out, std::int64_t n) {
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = std::nearbyint(src[i]);
    // NaN or beyond int64: out of any label range (what matters is that the check refuses it).
    const std::int64_t l = std::isfinite(v) && std::fabs(v) < 9.0e18f ? static_cast<std::int64_t>(v) : -1;
    out[i] = l;
    lo = std::min(lo, l);
    hi = std::max(hi, l);
  }
  return {lo, hi};
}
} // namespace

BatchDrawer::BatchDrawer(std::shared_ptr<data::SampleSource> source, const run::RunSpec& run, std::int64_t outChannels)
    : source_(std::move(source)), batch_(run.batch), patch_(run.patch), outChannels_(outChannels), rng_(run.seed) {}

// Each sample goes straight into its slice of the batch (pinned memory when asked): one copy of
// the image and one pass over the labels, instead of a tensor per sample, a stack, a rounding, a
// conversion, two passes for the label check and a copy into pinned memory.
void BatchDrawer::draw(torch::Tensor& input, torch::Tensor& target, bool pinned) {
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
  for (int b = 0; b < batch_; ++b) {
    data::Sample s = source_->next(patch_, rng_);
    if (s.channels.empty()) throw InvalidArgument("a training sample has no input channels");
    const auto& xyz = s.label.size();
    const std::vector<std::int64_t> dhw{xyz[2], xyz[1], xyz[0]};
    if (b == 0) {
      const auto opts = torch::TensorOptions().pinned_memory(pinned);
      input = torch::empty({batch_, static_cast<std::int64_t>(s.channels.size()), dhw[0], dhw[1], dhw[2]},
                           opts.dtype(torch::kFloat));
      target = torch::empty({batch_, dhw[0], dhw[1], dhw[2]}, opts.dtype(torch::kLong));
    }
    if (static_cast<std::int64_t>(s.channels.size()) != input.size(1) || target[b].sizes().vec() != dhw)
      throw InvalidArgument("training samples of one batch differ in size or channels (sample " + std::to_string(b + 1) +
                            " of " + std::to_string(batch_) + ")");
    // memcpy, not Tensor::copy_: a copy over ATen's grain runs on the intra-op thread team, whose
    // threads then spin (GNU OpenMP's default wait policy) on the cores that launch the GPU's
    // kernels; on the worker thread it would also start a second team.
    const std::int64_t voxels = target[b].numel();
    for (std::size_t c = 0; c < s.channels.size(); ++c) {
      if (s.channels[c].size() != xyz) throw InvalidArgument("input channels differ in size from the label");
      float* slice = input.data_ptr<float>() + (b * input.size(1) + static_cast<std::int64_t>(c)) * voxels;
      std::memcpy(slice, s.channels[c].data(), static_cast<std::size_t>(voxels) * sizeof(float));
    }
    const auto [l, h] = convertLabels(s.label.data(), target[b].data_ptr<std::int64_t>(), voxels);
    lo = std::min(lo, l);
    hi = std::max(hi, h);
  }
  checkLabelRange(lo, hi, outChannels_);
}

// A thread that runs the draws posted to it, one at a time, for the drawer's whole life: no thread
// is started or torn down per batch, and the process keeps one thread count through a run.
struct BatchDrawer::Worker {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::packaged_task<Pending()>> tasks;
  bool stop = false;
  std::thread thread{[this] { run(); }};

  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    wake.notify_all();
    thread.join();
  }
  std::future<Pending> post(std::function<Pending()> f) {
    std::packaged_task<Pending()> task(std::move(f));
    auto done = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex);
      tasks.push_back(std::move(task));
    }
    wake.notify_one();
    return done;
  }
  void run() {
    for (;;) {
      std::packaged_task<Pending()> task;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [this] { return stop || !tasks.empty(); });
        if (tasks.empty()) return;
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      task();
    }
  }
};

BatchDrawer::~BatchDrawer() { settle(); }

void BatchDrawer::settle() {
  if (pending_.valid()) pending_.wait();
}

std::vector<data::Sample> BatchDrawer::validationSamples() {
  settle();
  return source_->validation(patch_);
}

void BatchDrawer::next(torch::Tensor& input, torch::Tensor& target) {
  if (!pending_.valid()) return draw(input, target, /*pinned=*/false);
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
  if (!worker_) worker_ = std::make_unique<Worker>();
  pending_ = worker_->post([this, pinned] {
               Pending p;
               try {
                 torch::NoGradGuard noGrad;
                 draw(p.input, p.target, pinned);
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
