// Bytes from the network at the ranks' door (issue 52): what a stranger can send rank 0's gate
// before and after the handshake, and what a forged rank 0 can answer a worker. The input is
// split into a handshake part (one socket's stream) and a frame part (SealedStream, in pieces of
// the sizes the input chooses). Nothing but a refusal may come of it: no input proves a secret
// it does not know, no forged frame opens, and nothing crashes, hangs or grows without bound.
#include "core/ranks/GateProtocol.h"
#include "core/ranks/RunSecret.h"
#include "core/ranks/TensorSeal.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
const std::string kSecret = "the fuzzer's run secret, 32 chars";

// Runs `side` on one end of a socket pair after writing `bytes` into the other and closing it.
template <typename F>
std::string across(const std::uint8_t* bytes, std::size_t n, F side) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return "no socket";
  std::size_t at = 0;
  while (at < n) {
    const ssize_t k = send(fds[1], bytes + at, n - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k <= 0) break;
    at += static_cast<std::size_t>(k);
  }
  shutdown(fds[1], SHUT_WR);
  const std::string why = side(fds[0]);
  close(fds[0]);
  close(fds[1]);
  return why;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace splitseg::ranks;
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  const std::uint8_t* wire = data + (size ? 1 : 0);
  const std::size_t wireSize = size ? size - 1 : 0;
  const std::size_t head = std::min(cut, wireSize);
  gate::Keys keys;
  // A stranger at the gate, and a forged gate answering a rank: neither may be admitted.
  if (across(wire, head, [&](int fd) { return gate::answerAsGate(fd, kSecret, keys); }).empty()) std::abort();
  if (across(wire, head, [&](int fd) { return gate::proveToGate(fd, kSecret, keys); }).empty()) std::abort();
  // Forged frames after a handshake: the key is secret, so none may open.
  Digest key{};
  key[3] = 9;
  SealedStream in(key);
  std::vector<std::uint8_t> out;
  std::size_t at = head;
  bool ok = true;
  while (ok && at < wireSize) {
    const std::size_t piece = 1 + wire[at] % 97;
    const std::size_t n = std::min(piece, wireSize - at);
    ok = in.open(wire + at, n, out);
    at += n;
  }
  if (!out.empty()) std::abort();
  // A forged tensor: header, body and tag from the input.
  if (wireSize >= 72 + 16) {
    TensorSeal seal(kSecret, "salt", 1);
    std::vector<std::uint8_t> plain(wireSize - 72 - 16);
    if (seal.open(0, 5, 0, wire, 72, wire + 72, plain.size(), plain.data(), wire + wireSize - 16).empty()) std::abort();
  }
  return 0;
}
