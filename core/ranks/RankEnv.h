#pragma once
// Where this process stands in a run over ranks. Read from torchrun's variables (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; with TORCHELASTIC_USE_AGENT_STORE its
// agent serves the store), else from Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
// the master from SLURM_JOB_NODELIST), so torchrun, srun and `splitseg-cli launch` all start ranks.
#include <string>
#include <vector>

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
  std::string launcher = "environment";  // "torchrun", "slurm" or "environment"
  // The interfaces the ranks' transport uses (GLOO_SOCKET_IFNAME, a comma list; --rank-interface).
  std::vector<std::string> interfaces;
  // Shared by every rank of the run (SPLITSEG_RUN_SECRET or _FILE); see RunSecret.h.
  std::string secret;
  // torchrun's agent already serves a store at MASTER_ADDR:MASTER_PORT; rank 0's gate then tells
  // the others its own port through it.
  bool agentStore = false;
  // SPLITSEG_RANK_SEALING: "on", "off", or "auto" (sealed when the ranks span hosts).
  std::string tensorSealing = "auto";
  int restartCount = 0;  // TORCHELASTIC_RESTART_COUNT

  bool distributed() const { return worldSize > 1; }
  int ranksOnThisHost() const { return localWorldSize > 0 ? localWorldSize : worldSize; }
  // Throws InvalidArgument naming the variable ("RANK=3 is not below WORLD_SIZE=2").
  static RankEnv fromEnvironment();
  std::string describe() const;  // "rank 1 of 3 (rendezvous 127.0.0.1:29500)"
};

// GLOO_SOCKET_IFNAME as a list ("eth0,eth1"); empty when unset.
std::vector<std::string> interfacesFromEnvironment();

// Slurm's compact host list ("gpu[01-03,07],login1") written out in order; at most `limit` names.
// Throws InvalidArgument for a list it cannot read.
std::vector<std::string> expandSlurmHostList(const std::string& list, std::size_t limit = 4096);
// SLURM_TASKS_PER_NODE ("2(x3),1") for node `node`; 0 when it does not say.
int slurmTasksOnNode(const std::string& tasksPerNode, int node);

// A free TCP port on 127.0.0.1 (bound and released, so another process can take it in the short
// window before the ranks bind it) for ranks that all run on this machine; 0 when there is none.
int freeLocalPort();

} // namespace splitseg::ranks
