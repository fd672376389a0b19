#pragma once
// Tensors between ranks, sealed with AES-256-GCM under a key per direction of each pair of ranks
// (from the run secret and a salt rank 0 draws per run). Gloo's own TCP_TLS transport in the torch
// 2.11 wheel was seen sending tensors in clear and admitting peers without a certificate
// (docs/user-guide.md), so the ranks seal what they send themselves. The nonce is the tag and a
// count of the messages with that tag between the two ranks, which the receiver checks: a
// replayed, reordered, forged or damaged tensor is refused.
#include "core/ranks/RunSecret.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace splitseg::ranks {

class TensorSeal {
public:
  TensorSeal(std::string secret, std::string salt, int rank) : secret_(std::move(secret)), salt_(std::move(salt)), rank_(rank) {}

  // The count the next message to `peer` with `tag` carries (the header carries it in clear;
  // it is authenticated with the rest of the header).
  std::int64_t nextSend(int peer, int tag) {
    std::lock_guard<std::mutex> lock(mutex_);
    return sent_[{peer, tag}]++;
  }
  void seal(int peer, int tag, std::int64_t count, const std::uint8_t* header, std::size_t headerLen,
            const std::uint8_t* in, std::size_t n, std::uint8_t* out, std::uint8_t* mac);
  // "" when the message is genuine and in order, else why not.
  std::string open(int peer, int tag, std::int64_t count, const std::uint8_t* header, std::size_t headerLen,
                   const std::uint8_t* in, std::size_t n, std::uint8_t* out, const std::uint8_t* mac);

private:
  const Digest& key(int from, int to);

  std::mutex mutex_;  // ranks send from more than one thread
  std::string secret_, salt_;
  int rank_;
  std::map<std::pair<int, int>, Digest> keys_;
  std::map<std::pair<int, int>, std::int64_t> sent_, received_;
};

} // namespace splitseg::ranks
