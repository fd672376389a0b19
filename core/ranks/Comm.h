#pragma once
// The transport between ranks, on LibTorch's c10d: a TCPStore for the rendezvous (rank 0 serves it
// on 127.0.0.1; the other ranks reach it through its RankGate at MASTER_ADDR:MASTER_PORT, proving
// the run secret) and ProcessGroupGloo for tensors (point-to-point, CPU). Every
// failure of another rank (it died, hangs past the timeout, cannot be reached) surfaces as one
// RankError line naming that rank and what this rank was waiting for.
#include "core/base/CancelToken.h"
#include "core/base/JsonText.h"
#include "core/base/Error.h"
#include "core/ranks/RankEnv.h"
#include "core/ranks/RankError.h"

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace splitseg::ranks {

// What a message from another rank may be: the run description and small tables.
inline const JsonLimits kRankMessageLimits{std::size_t{16} << 20, 64};

class Comm {
public:
  // Joins the rendezvous and checks that every rank has the same world size and `identity`
  // (SplitSeg and LibTorch versions): a mismatch, a port in use or a rank that does not join
  // within `timeout` is refused here, on every rank, with one line. `cancel` (optional): rank 0
  // stops waiting for the others when it is cancelled (throws Cancelled), so a Stop pressed while
  // workers have not joined yet is honoured at once instead of after the timeout.
  Comm(const RankEnv& env, const std::string& identity, std::chrono::milliseconds timeout,
       const CancelToken* cancel = nullptr);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.worldSize; }
  const RankEnv& env() const { return env_; }

  // Every rank reports "" (ready) or its problem for `phase`; rank 0 decides for all. Throws
  // RankError("rank 2: <problem>") on every rank when one reported a problem.
  void agree(const std::string& phase, const std::string& problem);
  // Rank 0 publishes a text (the run description); the others wait for it.
  void publish(const std::string& key, const std::string& value);
  std::string fetch(const std::string& key);

  // Starts the tensor transport; `timeout` bounds every later wait for another rank. Tensors are
  // sealed (TensorSeal) when rank 0's RankEnv::tensorSealing says so; every rank follows rank 0.
  void startGroup(std::chrono::milliseconds timeout);
  bool sealed() const;
  // On rank 0 of a run whose ranks span hosts: the bytes per second of a tensor to each rank and
  // back, measured at startGroup (8 MiB each way, sealed as the run's tensors are); index = rank,
  // 0 where not measured. "" / "links measured at the join: rank 1 0.94 Gbit/s" for messages.
  const std::vector<double>& linkSpeeds() const { return linkSpeeds_; }
  std::string linkSummary() const;
  // Sends a tensor (any dtype and device; it travels through host memory) without waiting;
  // flush() waits for every send. `what` names the tensor in error messages.
  void send(const torch::Tensor& tensor, int dst, int tag, const std::string& what);
  // Receives a tensor sent with the same tag (on the CPU), waiting at most the timeout.
  torch::Tensor recv(int src, int tag, const std::string& what);
  void flush();
  // Every rank waits for all the others (end of a run: rank 0 serves the store until then); on
  // return every rank has left the transport's barrier, so any of them may tear it down.
  void barrier(const std::string& what);

  // The connections rank 0's gate refused, one line each (empty on other ranks).
  std::vector<std::string> refusals() const;

  struct Counters {
    std::int64_t bytesSent = 0;
    std::int64_t bytesReceived = 0;
    double waitSeconds = 0;  // blocked in recv
  };
  Counters& counters() { return counters_; }

private:
  void measureLinks();
  void openStoreAsRankZero();
  void openStoreThroughGate();
  void awaitReaders(const std::string& phase);
  [[noreturn]] void fail(int peer, const std::string& what, const std::exception& e) const;

  struct Impl;
  RankEnv env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
  Counters counters_;
  std::vector<double> linkSpeeds_;
};

} // namespace splitseg::ranks
