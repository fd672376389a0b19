#include "core/ranks/RunSecret.h"
#include "core/base/Error.h"
#include "core/base/Printable.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <sys/stat.h>

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
} // namespace

std::string makeRunSecret() {
  std::uint8_t bytes[32];
  randomBytes(bytes, sizeof bytes);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
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

std::vector<std::uint8_t> SealedStream::seal(const std::uint8_t* data, std::size_t n) {
  std::vector<std::uint8_t> frame(4 + n + 16);
  for (int i = 0; i < 4; ++i) frame[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (24 - 8 * i));
  const auto nonce = nonceOf(counter_++);
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, frame.data(), 4) != 1 ||  // the length is authenticated too
      EVP_EncryptUpdate(ctx.get(), frame.data() + 4, &len, data, static_cast<int>(n)) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), frame.data() + 4 + n, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, 16, frame.data() + 4 + n) != 1)
    throw Error("AES-256-GCM failed in OpenSSL");
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
    CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
    int outLen = 0;
    std::uint8_t* tag = pending_.data() + at + 4 + len;
    if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce.data()) != 1 ||
        EVP_DecryptUpdate(ctx.get(), nullptr, &outLen, pending_.data() + at, 4) != 1 ||
        EVP_DecryptUpdate(ctx.get(), out.data() + start, &outLen, pending_.data() + at + 4, static_cast<int>(len)) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, 16, tag) != 1 ||
        EVP_DecryptFinal_ex(ctx.get(), out.data() + start + len, &outLen) != 1)
      return false;
    at += 4 + len + 16;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(at));
  return true;
}

} // namespace splitseg::ranks
