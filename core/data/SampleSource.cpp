#include "core/data/SampleSource.h"
#include "core/data/Phantom.h"

namespace splitseg::data {

Sample PhantomSource::next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) {
  PhantomOptions o;
  o.size = patchSize;
  o.foregroundClasses = classes_;
  o.noise = noise_;
  o.seed = rng();
  Phantom p = makePhantom(o);
  return Sample{{std::move(p.image)}, std::move(p.label)};
}

std::vector<Sample> PhantomSource::validation(const std::array<std::int64_t, 3>& patchSize) {
  std::mt19937_64 rng(0xC0FFEE);  // fixed validation set, independent of training draws
  std::vector<Sample> v;
  for (int i = 0; i < 2; ++i) v.push_back(next(patchSize, rng));
  return v;
}

} // namespace splitseg::data
