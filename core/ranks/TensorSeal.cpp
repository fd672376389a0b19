#include "core/ranks/TensorSeal.h"

#include <array>

namespace splitseg::ranks {

namespace {
std::array<std::uint8_t, 12> nonceFor(int tag, std::int64_t count) {
  std::array<std::uint8_t, 12> n{};
  const auto t = static_cast<std::uint32_t>(tag);
  const auto c = static_cast<std::uint64_t>(count);
  for (int i = 0; i < 4; ++i) n[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(t >> (24 - 8 * i));
  for (int i = 0; i < 8; ++i) n[static_cast<std::size_t>(4 + i)] = static_cast<std::uint8_t>(c >> (56 - 8 * i));
  return n;
}
} // namespace

const Digest& TensorSeal::key(int from, int to) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = keys_.find({from, to});
  if (it != keys_.end()) return it->second;
  const std::string label = salt_ + " " + std::to_string(from) + ">" + std::to_string(to);
  return keys_[{from, to}] = hmacSha256(secret_, "splitseg tensors", std::vector<std::uint8_t>(label.begin(), label.end()));
}

void TensorSeal::seal(int peer, int tag, std::int64_t count, const std::uint8_t* header, std::size_t headerLen,
                      const std::uint8_t* in, std::size_t n, std::uint8_t* out, std::uint8_t* mac) {
  const auto nonce = nonceFor(tag, count);
  aeadSeal(key(rank_, peer), nonce.data(), header, headerLen, in, n, out, mac);
}

std::string TensorSeal::open(int peer, int tag, std::int64_t count, const std::uint8_t* header, std::size_t headerLen,
                             const std::uint8_t* in, std::size_t n, std::uint8_t* out, const std::uint8_t* mac) {
  const auto nonce = nonceFor(tag, count);
  if (!aeadOpen(key(peer, rank_), nonce.data(), header, headerLen, in, n, out, mac))
    return "it fails authentication (forged or damaged on the way)";
  std::lock_guard<std::mutex> lock(mutex_);
  auto& expected = received_[{peer, tag}];
  if (count != expected)
    return "it is message " + std::to_string(count) + " where " + std::to_string(expected) + " was due (replayed or reordered)";
  ++expected;
  return {};
}

} // namespace splitseg::ranks
