#pragma once
// The one checked geometry path. Every reader and every resampling builds a Geometry from
// untrusted numbers (file headers, JSON); it must pass geometryProblem() before any library
// (ITK, VNL, the resampler, an allocation) computes with it:
//   sizes positive, their product free of overflow and under a cap that depends on the memory
//   available now; spacing finite and within [1e-6, 1e6] mm; origin finite (|x| <= 1e9 mm);
//   direction finite and non-singular.
#include "core/volume/Volume.h"

#include <array>
#include <cstdint>
#include <string>

namespace splitseg {

// Bytes of memory available now (MemAvailable in /proc/meminfo; physical memory, then 16 GiB,
// when that cannot be read).
std::uint64_t availableMemoryBytes();

// What a read may take: availableMemoryBytes(), or SPLITSEG_READ_MEMORY bytes when that is lower
// (shared machines, tests).
std::uint64_t readMemoryBytes();

// Largest voxel count a volume may have when each voxel costs bytesPerVoxel bytes while it is
// built: available memory / bytesPerVoxel, never above 2^34, and never above the environment
// variable SPLITSEG_MAX_VOXELS when set (fuzzing, shared machines).
std::int64_t voxelCap(std::size_t bytesPerVoxel = 4);

// What loading a volume of `voxels` stored with bytesPerComponent bytes each costs against
// readMemoryBytes(): empty when it fits, else one line of figures ("decodes to 3.8 GiB; with its
// float copy this needs 19.1 GiB, more than the available memory (17.9 GiB)"). The decoded
// voxels and one float copy are what a load holds at its peak (core/io reads NIfTI and MetaImage
// in slabs, so there it holds less).
std::string loadCostProblem(std::int64_t voxels, std::size_t bytesPerComponent);

// x*y*z into out; false when a size is not positive or the product overflows int64.
bool checkedVoxelCount(const std::array<std::int64_t, 3>& size, std::int64_t& out);

// Empty when g is usable; otherwise the first problem in words ("spacing along y is nan").
std::string geometryProblem(const Geometry& g, std::size_t bytesPerVoxel = 4);

// Throws InvalidArgument("<context>: <problem>") when geometryProblem(g) is not empty.
void checkGeometry(const Geometry& g, const std::string& context, std::size_t bytesPerVoxel = 4);

// A double read from a file as a voxel count along one axis: finite, integral, in [1, 2^31).
// false otherwise (NaN, Inf, negative, fractional or huge values never reach a cast).
bool toAxisSize(double value, std::int64_t& out);

} // namespace splitseg
