#pragma once
// The secret every rank of one run shares. It proves a rank belongs (RankGate's handshake) and keys
// the encryption of the rendezvous traffic; it never crosses the network itself.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace splitseg::ranks {

// Shorter secrets are refused: 16 characters of a random hex string are 64 bits.
constexpr std::size_t kMinSecretLength = 16;

// 32 random bytes (OpenSSL's RAND_bytes) as 64 hex digits.
std::string makeRunSecret();

// SPLITSEG_RUN_SECRET, else the first line of SPLITSEG_RUN_SECRET_FILE; "" when neither is set.
// Throws InvalidArgument for a secret that is too short, or a file that others may read.
std::string runSecretFromEnvironment();

// The one line for a run over ranks without a secret.
std::string missingSecretMessage(int rank);

using Digest = std::array<std::uint8_t, 32>;
Digest hmacSha256(std::string_view key, std::string_view label, const std::vector<std::uint8_t>& data);
bool sameDigest(const std::uint8_t* a, const std::uint8_t* b);  // constant time
void randomBytes(std::uint8_t* out, std::size_t n);
std::string hexOf(const std::uint8_t* bytes, std::size_t n);

// AES-256-GCM with a 12-byte nonce that must never repeat under one key; `aad` is authenticated,
// not encrypted. seal writes n bytes to `out` and 16 to `tag`; open returns false when anything
// was changed (then `out` holds nothing usable).
void aeadSeal(const Digest& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aadLen,
              const std::uint8_t* in, std::size_t n, std::uint8_t* out, std::uint8_t* tag);
bool aeadOpen(const Digest& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aadLen,
              const std::uint8_t* in, std::size_t n, std::uint8_t* out, const std::uint8_t* tag);

// AES-256-GCM over a stream, one direction: frames of a 4-byte length, the ciphertext and a 16-byte
// tag; the nonce is a counter, so each key seals one direction of one connection only.
class SealedStream {
public:
  static constexpr std::size_t kMaxFrame = 64 * 1024;
  static constexpr std::size_t kOverhead = 4 + 16;
  explicit SealedStream(const Digest& key) : key_(key) {}
  std::vector<std::uint8_t> seal(const std::uint8_t* data, std::size_t n);
  // Takes what arrived; appends the plaintext of every whole frame to `out`. False when a frame
  // fails authentication (nothing of it is appended) or declares a length beyond kMaxFrame (the
  // connection must close).
  bool open(const std::uint8_t* data, std::size_t n, std::vector<std::uint8_t>& out);

private:
  Digest key_;
  std::uint64_t counter_ = 0;
  std::vector<std::uint8_t> pending_;
};

} // namespace splitseg::ranks
