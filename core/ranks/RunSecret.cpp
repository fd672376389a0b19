#include "core/ranks/RunSecret.h"
#include "core/base/Error.h"
#include "core/base/Printable.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>

namespace splitseg::ranks {

namespace {
std::string checkedSecret(std::string s, const std::string& from) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() < kMinSecretLength)
    throw InvalidArgument(from + " holds " + std::to_string(s.size()) + " characters; a run secret needs at least " +
                          std::to_string(kMinSecretLength) + " (splitseg-cli secret makes one)");
  return s;
}

std::array<std::uint8_t, 12> nonceOf(std::uint64_t counter) {
  std::array<std::uint8_t, 12> n{};
  for (int i = 0; i < 8; ++i) n[4 + i] = static_cast<std::uint8_t>(counter >> (56 - 8 * i));
  return n;
}

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;
constexpr std::size_t kPiece = std::size_t{1} << 30;
} // namespace

std::string hexOf(const std::uint8_t* bytes, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

std::string makeRunSecret() {
  std::uint8_t bytes[32];
  randomBytes(bytes, sizeof bytes);
  return hexOf(bytes, sizeof bytes);
}

void randomBytes(std::uint8_t* out, std::size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) throw Error("no random bytes from OpenSSL for the run secret");
}

std::string runSecretFromEnvironment() {
  if (const char* s = std::getenv("SPLITSEG_RUN_SECRET"); s && *s) return checkedSecret(s, "SPLITSEG_RUN_SECRET");
  const char* path = std::getenv("SPLITSEG_RUN_SECRET_FILE");
  if (!path || !*path) return {};
  const std::string from = "SPLITSEG_RUN_SECRET_FILE=" + printable(path);
  struct stat st {};
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) throw InvalidArgument(from + " is not a readable file");
  // As ssh does for keys: a secret others can read is no secret.
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    throw InvalidArgument(from + " can be read by other users (chmod 600 it)");
  if (st.st_size > 4096) throw InvalidArgument(from + " is larger than 4 KiB; a run secret is one line");
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return checkedSecret(line, from);
}

std::string missingSecretMessage(int rank) {
  return "rank " + std::to_string(rank) +
         ": no run secret: set SPLITSEG_RUN_SECRET to the same value on every rank (splitseg-cli secret makes one), "
         "or SPLITSEG_RUN_SECRET_FILE to a file only you can read";
}

Digest hmacSha256(std::string_view key, std::string_view label, const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> message(label.begin(), label.end());
  message.push_back(0);
  message.insert(message.end(), data.begin(), data.end());
  Digest out{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(), out.data(), &len) ||
      len != out.size())
    throw Error("HMAC-SHA256 failed in OpenSSL");
  return out;
}

bool sameDigest(const std::uint8_t* a, const std::uint8_t* b) { return CRYPTO_memcmp(a, b, sizeof(Digest)) == 0; }

void aeadSeal(const Digest& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aadLen,
              const std::uint8_t* in, std::size_t n, std::uint8_t* out, std::uint8_t* tag) {
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  // EVP takes int lengths: longer inputs go in pieces.
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce) == 1 &&
            (aadLen == 0 || EVP_EncryptUpdate(ctx.get(), nullptr, &len, aad, static_cast<int>(aadLen)) == 1);
  for (std::size_t at = 0; ok && at < n; at += kPiece)
    ok = EVP_EncryptUpdate(ctx.get(), out + at, &len, in + at, static_cast<int>(std::min(kPiece, n - at))) == 1;
  if (!ok || EVP_EncryptFinal_ex(ctx.get(), out + n, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
    throw Error("AES-256-GCM failed in OpenSSL");
}

bool aeadOpen(const Digest& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aadLen,
              const std::uint8_t* in, std::size_t n, std::uint8_t* out, const std::uint8_t* tag) {
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce) == 1 &&
            (aadLen == 0 || EVP_DecryptUpdate(ctx.get(), nullptr, &len, aad, static_cast<int>(aadLen)) == 1);
  for (std::size_t at = 0; ok && at < n; at += kPiece)
    ok = EVP_DecryptUpdate(ctx.get(), out + at, &len, in + at, static_cast<int>(std::min(kPiece, n - at))) == 1;
  return ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, 16, const_cast<std::uint8_t*>(tag)) == 1 &&
         EVP_DecryptFinal_ex(ctx.get(), out + n, &len) == 1;
}

std::vector<std::uint8_t> SealedStream::seal(const std::uint8_t* data, std::size_t n) {
  std::vector<std::uint8_t> frame(4 + n + 16);
  for (int i = 0; i < 4; ++i) frame[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (24 - 8 * i));
  const auto nonce = nonceOf(counter_++);
  // The length is authenticated too.
  aeadSeal(key_, nonce.data(), frame.data(), 4, data, n, frame.data() + 4, frame.data() + 4 + n);
  return frame;
}

bool SealedStream::open(const std::uint8_t* data, std::size_t n, std::vector<std::uint8_t>& out) {
  pending_.insert(pending_.end(), data, data + n);
  std::size_t at = 0;
  while (pending_.size() - at >= 4) {
    std::size_t len = 0;
    for (int i = 0; i < 4; ++i) len = (len << 8) | pending_[at + static_cast<std::size_t>(i)];
    if (len > kMaxFrame) return false;
    if (pending_.size() - at < 4 + len + 16) break;
    const auto nonce = nonceOf(counter_++);
    const std::size_t start = out.size();
    out.resize(start + len);
    const std::uint8_t* frame = pending_.data() + at;
    if (!aeadOpen(key_, nonce.data(), frame, 4, frame + 4, len, out.data() + start, frame + 4 + len)) {
      out.resize(start);  // nothing of a forged frame is handed on
      return false;
    }
    at += 4 + len + 16;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(at));
  return true;
}

} // namespace splitseg::ranks
