#include "core/placement/ShardLayout.h"
#include "core/base/Error.h"

namespace splitseg::placement {

std::string toString(ShardAxis a) {
  switch (a) {
    case ShardAxis::Depth: return "depth";
    case ShardAxis::Height: return "height";
    case ShardAxis::Width: return "width";
  }
  return "depth";
}

ShardAxis shardAxisFromString(const std::string& s) {
  if (s == "depth" || s == "d" || s == "z") return ShardAxis::Depth;
  if (s == "height" || s == "h" || s == "y") return ShardAxis::Height;
  if (s == "width" || s == "w" || s == "x") return ShardAxis::Width;
  throw InvalidArgument("unknown shard axis '" + s + "' (depth, height, width)");
}

ShardLayout ShardLayout::even(ShardAxis axis, std::int64_t extent, int count, std::int64_t multiple) {
  if (count < 1) throw InvalidArgument("a sharded stage needs at least one device");
  if (multiple < 1) multiple = 1;
  const std::int64_t units = extent / multiple;
  if (units < count)
    throw InvalidArgument("the volume's " + toString(axis) + " of " + std::to_string(extent) + " planes cannot be cut into " +
                          std::to_string(count) + " slabs on multiples of " + std::to_string(multiple) +
                          " planes (the pooling factor): a slab would be empty; use fewer shards or a larger patch");
  ShardLayout l;
  l.axis = axis;
  for (int i = 0; i < count; ++i) l.sizes.push_back((units / count + (i < units % count ? 1 : 0)) * multiple);
  l.sizes.back() += extent - units * multiple;  // planes past the last whole unit (the check refuses them)
  return l;
}

void ShardLayout::check(std::int64_t extent, std::int64_t multiple, int maxLevel, const std::string& stage) const {
  const std::string who = "stage " + stage + ": ";
  if (sizes.size() < 2) throw InvalidArgument(who + "a sharded stage needs at least two slabs");
  std::int64_t sum = 0, boundary = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::int64_t s = sizes[i];
    if (s < 0) throw InvalidArgument(who + "slab " + std::to_string(i + 1) + " has a negative size");
    sum += s;
    boundary += s;
    if (i + 1 < sizes.size() && boundary % multiple != 0)
      throw InvalidArgument(who + "the boundary after slab " + std::to_string(i + 1) + " lies at plane " +
                            std::to_string(boundary) + ", not on a multiple of " + std::to_string(multiple) +
                            " (the pooling factor of the sharded stages); slabs must start where pooling windows start");
    for (int level = 0; level <= maxLevel; ++level)
      if ((s >> level) < kHaloPlanes)
        throw InvalidArgument(who + "slab " + std::to_string(i + 1) + " holds " + std::to_string(s >> level) +
                              " planes at level " + std::to_string(level) + ", thinner than the halo of " +
                              std::to_string(kHaloPlanes) + " plane; use fewer shards or a larger patch");
  }
  if (sum != extent)
    throw InvalidArgument(who + "the slabs hold " + std::to_string(sum) + " planes but the volume's " + toString(axis) +
                          " has " + std::to_string(extent));
}

std::vector<std::int64_t> ShardLayout::sizesAt(int level) const {
  std::vector<std::int64_t> out;
  for (const auto s : sizes) out.push_back(s >> level);
  return out;
}

std::int64_t ShardLayout::extent() const {
  std::int64_t e = 0;
  for (const auto s : sizes) e += s;
  return e;
}

} // namespace splitseg::placement
