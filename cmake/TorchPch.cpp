// The translation unit that makes the build's one precompiled <torch/torch.h> (cmake/SplitSeg.cmake).
namespace splitseg { int torchPchUnit() { return 0; } }
