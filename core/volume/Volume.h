#pragma once
// A 3D scalar image: voxels (float, x fastest) plus the geometry that places them in
// patient space (LPS, as ITK): spacing in mm, origin, and a direction cosine matrix.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg {

struct Geometry {
  std::array<std::int64_t, 3> size{0, 0, 0};        // x, y, z voxel counts
  std::array<double, 3> spacing{1.0, 1.0, 1.0};      // mm
  std::array<double, 3> origin{0.0, 0.0, 0.0};       // mm, centre of voxel (0,0,0)
  std::array<double, 9> direction{1, 0, 0, 0, 1, 0, 0, 0, 1};  // row-major, columns are axes

  // Product of the sizes; throws InvalidArgument when a size is negative or the product
  // overflows (never wraps). Untrusted geometry goes through GeometryCheck.h first.
  std::int64_t voxelCount() const;
  bool sameGrid(const Geometry& other, double tolerance = 1e-4) const;
  // Human-readable difference ("size 64x64x32 vs 64x64x33"), empty when same grid. A NaN on
  // either side is a difference (it never compares equal).
  std::string differenceTo(const Geometry& other, double tolerance = 1e-4) const;
};

class Volume {
public:
  Volume() = default;
  Volume(const Geometry& geometry, float fill = 0.0f);
  // Adopts voxels (geometry.voxelCount() of them, x fastest; InvalidArgument otherwise).
  Volume(const Geometry& geometry, std::vector<float>&& voxels);

  const Geometry& geometry() const { return geometry_; }
  Geometry& geometry() { return geometry_; }
  const std::array<std::int64_t, 3>& size() const { return geometry_.size; }
  std::int64_t voxelCount() const { return geometry_.voxelCount(); }
  bool empty() const { return voxels_.empty(); }

  std::vector<float>& voxels() { return voxels_; }
  const std::vector<float>& voxels() const { return voxels_; }
  float* data() { return voxels_.data(); }
  const float* data() const { return voxels_.data(); }

  std::size_t index(std::int64_t x, std::int64_t y, std::int64_t z) const {
    return static_cast<std::size_t>((z * geometry_.size[1] + y) * geometry_.size[0] + x);
  }
  float& at(std::int64_t x, std::int64_t y, std::int64_t z) { return voxels_[index(x, y, z)]; }
  float at(std::int64_t x, std::int64_t y, std::int64_t z) const { return voxels_[index(x, y, z)]; }

  // Pixel type of the file it came from ("int16", "uint8", "float32", ...), kept for writing back.
  const std::string& pixelType() const { return pixelType_; }
  void setPixelType(std::string t) { pixelType_ = std::move(t); }

  std::pair<float, float> range() const;

private:
  Geometry geometry_;
  std::vector<float> voxels_;
  std::string pixelType_ = "float32";
};

} // namespace splitseg
