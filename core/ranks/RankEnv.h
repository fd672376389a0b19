#pragma once
// Where this process stands in a run over ranks, read from torchrun's environment conventions
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK), so torchrun, Slurm's srun (with those
// exported) and `splitseg-cli launch` can all start the ranks.
#include <string>

namespace splitseg::ranks {

struct RankEnv {
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  // The ranks on this host (torchrun's LOCAL_WORLD_SIZE): they share its cores. 0: not known, taken
  // to be every rank (all on one host, as `launch` starts them).
  int localWorldSize = 0;

  bool distributed() const { return worldSize > 1; }
  int ranksOnThisHost() const { return localWorldSize > 0 ? localWorldSize : worldSize; }
  // Throws InvalidArgument naming the variable ("RANK=3 is not below WORLD_SIZE=2").
  static RankEnv fromEnvironment();
  std::string describe() const;  // "rank 1 of 3 (rendezvous 127.0.0.1:29500)"
};

// A free TCP port on 127.0.0.1 (bound and released, so another process can take it in the short
// window before the ranks bind it) for ranks that all run on this machine; 0 when there is none.
int freeLocalPort();

} // namespace splitseg::ranks
