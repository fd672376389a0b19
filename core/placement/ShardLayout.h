#pragma once
// How a sharded stage's volume is cut into slabs: along one axis, at boundaries on multiples of
// the pooling factor, so max-pooling and transposed convolutions stay inside a slab and only the
// 3x3x3 convolutions need a halo (one plane from each neighbour). Sizes only: no LibTorch.
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::placement {

// The axis slabs are cut along, as the tensor dimension after N and C: depth (D), height (H),
// width (W) of an N,C,D,H,W volume.
enum class ShardAxis { Depth = 0, Height = 1, Width = 2 };
std::string toString(ShardAxis a);
ShardAxis shardAxisFromString(const std::string& s);  // "depth"/"d", "height"/"h", "width"/"w"

// Planes of the halo each 3x3x3 convolution needs from each neighbouring slab.
constexpr std::int64_t kHaloPlanes = 1;

struct ShardLayout {
  ShardAxis axis = ShardAxis::Depth;
  std::vector<std::int64_t> sizes;  // planes of each slab at full resolution (level 0), shard order

  // `extent` planes cut into `count` slabs in units of `multiple` planes, as even as the units
  // allow (the first slabs take the remainder). Throws InvalidArgument when a slab would be empty.
  static ShardLayout even(ShardAxis axis, std::int64_t extent, int count, std::int64_t multiple);
  // Throws InvalidArgument naming `stage` and the slab when the sizes do not add up to extent,
  // a boundary is not on a multiple of `multiple`, or a slab holds fewer planes than the halo at
  // some level up to maxLevel (a sharded stage's deepest resolution).
  void check(std::int64_t extent, std::int64_t multiple, int maxLevel, const std::string& stage) const;
  // Slab sizes at a resolution level (sizes / 2^level).
  std::vector<std::int64_t> sizesAt(int level) const;
  std::int64_t extent() const;
};

} // namespace splitseg::placement
