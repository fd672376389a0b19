#pragma once
// For suites that run several ranks as threads of one process, each with its own c10d group.
#include <cstdlib>

namespace splitseg::checks {

// Turns off c10d's flight recorder (a process-wide debugging trace) before the first group is made.
// In torch 2.11 its recordWithResetEnabled inserts into a map of group states outside its mutex, so
// two groups of one process starting collectives at once on two threads can corrupt it: SIGSEGV
// at address 0x10 in SpatialTrainingTest on CI (2026-12-03), reproduced here in 1 of 8 runs with a
// second copy running beside it. splitseg-cli runs one group per process and keeps the recorder.
inline void allowRanksAsThreads() { ::setenv("TORCH_FR_BUFFER_SIZE", "0", 1); }

} // namespace splitseg::checks
