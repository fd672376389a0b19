// Rank 0's gate in front of the rendezvous store: a rank that proves the run secret reaches the
// store through an encrypted relay; a process without it (silent, guessing, closing, a wrong
// secret) is refused with one line naming its address, reads nothing of what is behind the gate,
// and leaves the real ranks' connections working. A forged or damaged frame closes its connection.
// Tensors between ranks, sealed, arrive equal; forged, damaged, replayed or misdirected ones are
// refused.
#include "core/ranks/GateProtocol.h"
#include "core/ranks/GateTunnel.h"
#include "core/ranks/RankEnv.h"
#include "core/ranks/RankError.h"
#include "core/ranks/RankGate.h"
#include "core/ranks/RunSecret.h"
#include "core/ranks/TensorSeal.h"
#include "tests/support/RanksAsThreads.h"

#include <torch/torch.h>

#include <QtTest>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

using namespace splitseg;
using namespace splitseg::ranks;

namespace {
const std::string kSecret = "0123456789abcdef0123456789abcdef";

// Stands in for the store: echoes every byte back, and counts what reached it.
struct EchoServer {
  int fd = -1, port = 0;
  std::atomic<long> received{0};
  gate::ConnectionThreads threads;
  std::thread acceptor;
  EchoServer() {
    std::string error;
    fd = gate::listenOn("127.0.0.1", 0, error);
    port = gate::boundPort(fd);
    acceptor = std::thread([this] {
      for (;;) {
        pollfd p[2] = {{fd, POLLIN, 0}, {threads.stopFd(), POLLIN, 0}};
        if (poll(p, 2, -1) <= 0 || p[1].revents) return;
        const int c = accept(fd, nullptr, nullptr);
        if (c < 0) continue;
        threads.run(
            [this, c] {
              char b[4096];
              for (;;) {
                pollfd q[2] = {{c, POLLIN, 0}, {threads.stopFd(), POLLIN, 0}};
                if (poll(q, 2, -1) <= 0 || q[1].revents) break;
                const ssize_t k = recv(c, b, sizeof b, 0);
                if (k <= 0) break;
                received += k;
                if (send(c, b, static_cast<std::size_t>(k), MSG_NOSIGNAL) != k) break;
              }
              close(c);
            },
            16);
      }
    });
  }
  ~EchoServer() {
    threads.stop();
    acceptor.join();
    close(fd);
  }
};

int connectLocal(int port) {
  std::string error;
  return gate::connectTo("127.0.0.1", port, std::chrono::milliseconds(2000), error);
}

// Everything the peer sends until it closes (or 8 s pass).
std::string drain(int fd) {
  std::string out;
  char b[256];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 8000) <= 0) break;
    const ssize_t k = recv(fd, b, sizeof b, 0);
    if (k <= 0) break;
    out.append(b, static_cast<std::size_t>(k));
  }
  return out;
}

// A round trip through a tunnel to the gate: what comes back.
std::string roundTrip(GateTunnel& tunnel, const std::string& text) {
  const int fd = connectLocal(tunnel.localPort());
  if (fd < 0) return "<no connection>";
  (void)!send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  std::string back;
  char b[256];
  while (back.size() < text.size()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) break;
    const ssize_t k = recv(fd, b, sizeof b, 0);
    if (k <= 0) break;
    back.append(b, static_cast<std::size_t>(k));
  }
  close(fd);
  return back;
}

bool waitFor(const RankGate& g, std::size_t refusals) {
  for (int i = 0; i < 200 && g.refusals().size() < refusals; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return g.refusals().size() >= refusals;
}
} // namespace

class RankGateTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void sealedFramesRoundTrip_data() {
    QTest::addColumn<int>("bytes");
    QTest::addColumn<int>("chunk");  // how the frames arrive: in pieces of this size
    QTest::addColumn<int>("flip");   // a byte of the sealed stream to damage; -1: none
    QTest::newRow("one byte, whole") << 1 << 1000 << -1;
    QTest::newRow("64 KiB in 7-byte pieces") << 65536 << 7 << -1;
    QTest::newRow("two frames in one piece") << 70000 << 200000 << -1;
    QTest::newRow("damaged length") << 100 << 1000 << 1;
    QTest::newRow("damaged ciphertext") << 100 << 1000 << 50;
    QTest::newRow("damaged tag") << 100 << 1000 << 4 + 100 + 3;
  }
  void sealedFramesRoundTrip() {
    QFETCH(int, bytes);
    QFETCH(int, chunk);
    QFETCH(int, flip);
    Digest key{};
    key[0] = 7;
    SealedStream out(key), in(key);
    std::vector<std::uint8_t> plain(static_cast<std::size_t>(bytes));
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::uint8_t>(i * 31 + 5);
    std::vector<std::uint8_t> wire;
    for (std::size_t at = 0; at < plain.size(); at += SealedStream::kMaxFrame) {
      const auto n = std::min(SealedStream::kMaxFrame, plain.size() - at);
      const auto f = out.seal(plain.data() + at, n);
      wire.insert(wire.end(), f.begin(), f.end());
    }
    QCOMPARE(wire.size(), plain.size() + ((plain.size() + SealedStream::kMaxFrame - 1) / SealedStream::kMaxFrame) *
                                             SealedStream::kOverhead);
    QVERIFY(std::search(wire.begin(), wire.end(), plain.begin(), plain.begin() + std::min<int>(bytes, 16)) ==
                wire.end() ||
            bytes < 4);  // the plaintext does not appear on the wire
    if (flip >= 0) wire[static_cast<std::size_t>(flip)] ^= 0x40;
    std::vector<std::uint8_t> opened;
    bool ok = true;
    for (std::size_t at = 0; at < wire.size() && ok; at += static_cast<std::size_t>(chunk))
      ok = in.open(wire.data() + at, std::min(static_cast<std::size_t>(chunk), wire.size() - at), opened);
    if (flip >= 0) {
      QVERIFY(!ok);
      return;
    }
    QVERIFY(ok);
    QVERIFY(opened == plain);
  }

  void secretsDecideAdmission_data() {
    QTest::addColumn<QString>("workerSecret");
    QTest::addColumn<QString>("workerError");  // "" admitted
    QTest::addColumn<QString>("gateLine");     // rank 0's line; "" none
    QTest::newRow("same secret") << QString::fromStdString(kSecret) << "" << "";
    QTest::newRow("wrong secret") << "fedcba9876543210fedcba9876543210"
                                  << "refused this rank: the run secrets differ"
                                  << "rank 0: refused a connection from 127.0.0.1:";
  }
  void secretsDecideAdmission() {
    QFETCH(QString, workerSecret);
    QFETCH(QString, workerError);
    QFETCH(QString, gateLine);
    EchoServer store;
    RankGate gate(kSecret, "127.0.0.1", 0, store.port, {});
    QVERIFY(gate.listening());
    std::string error;
    try {
      GateTunnel tunnel(workerSecret.toStdString(), "127.0.0.1", gate.port(), std::chrono::seconds(5), 1);
      QCOMPARE(roundTrip(tunnel, "set run secret-bearing bytes"), std::string("set run secret-bearing bytes"));
    } catch (const RankError& e) {
      error = e.what();
    }
    if (workerError.isEmpty()) {
      QVERIFY2(error.empty(), error.c_str());
      QVERIFY(gate.refusals().empty());
      return;
    }
    QVERIFY2(error.find("rank 1: rank 0 at 127.0.0.1:" + std::to_string(gate.port())) == 0, error.c_str());
    QVERIFY2(error.find(workerError.toStdString()) != std::string::npos, error.c_str());
    QVERIFY(waitFor(gate, 1));
    const auto line = gate.refusals().front();
    QVERIFY2(line.find(gateLine.toStdString()) == 0, line.c_str());
    QVERIFY2(line.find("it did not prove the run's secret") != std::string::npos, line.c_str());
    QCOMPARE(store.received.load(), 0L);
  }

  void strangersAreRefusedAndLearnNothing_data() {
    QTest::addColumn<QByteArray>("sends");  // what the stranger writes after connecting
    QTest::addColumn<bool>("closes");       // then closes its side
    QTest::addColumn<QString>("why");
    QTest::newRow("silent") << QByteArray() << false << "it did not prove the run's secret within 5 s";
    QTest::newRow("guesses") << QByteArray(64, 'x') << false << "it did not prove the run's secret";
    QTest::newRow("a store client's request") << QByteArray("\x00\x03key\x00\x00\x00\x00", 10) << true
                                              << "it closed the connection without proving the run's secret";
    QTest::newRow("HTTP") << QByteArray("GET / HTTP/1.0\r\n\r\n" + QByteArray(64, ' ')) << false
                          << "it did not prove the run's secret";
  }
  void strangersAreRefusedAndLearnNothing() {
    QFETCH(QByteArray, sends);
    QFETCH(bool, closes);
    QFETCH(QString, why);
    EchoServer store;
    RankGate gate(kSecret, "127.0.0.1", 0, store.port, {});
    GateTunnel rank1(kSecret, "127.0.0.1", gate.port(), std::chrono::seconds(5), 1);
    const int stranger = connectLocal(gate.port());
    QVERIFY(stranger >= 0);
    if (!sends.isEmpty()) QCOMPARE(send(stranger, sends.data(), static_cast<std::size_t>(sends.size()), MSG_NOSIGNAL), sends.size());
    if (closes) shutdown(stranger, SHUT_WR);
    // While the stranger waits at the gate, the real rank's traffic passes.
    QCOMPARE(roundTrip(rank1, "rank 1's request"), std::string("rank 1's request"));
    const std::string heard = drain(stranger);
    close(stranger);
    QCOMPARE(heard.size(), std::size_t{40});  // the gate's greeting: 8 bytes of protocol, 32 random
    QCOMPARE(heard.substr(0, 8), std::string("SSGATE01"));
    QVERIFY(waitFor(gate, 1));
    const auto line = gate.refusals().front();
    QVERIFY2(line.find("rank 0: refused a connection from 127.0.0.1:") == 0, line.c_str());
    QVERIFY2(line.find(why.toStdString()) != std::string::npos, line.c_str());
    QCOMPARE(store.received.load(), static_cast<long>(std::string("rank 1's request").size()));
    QCOMPARE(roundTrip(rank1, "after"), std::string("after"));
  }

  void forgedFrameClosesItsConnection() {
    EchoServer store;
    RankGate gate(kSecret, "127.0.0.1", 0, store.port, {});
    const int fd = connectLocal(gate.port());
    gate::Keys keys;
    QCOMPARE(gate::proveToGate(fd, kSecret, keys), std::string());
    SealedStream out(keys.send);
    const std::string text = "a genuine frame";
    auto frame = out.seal(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    frame[6] ^= 1;  // one bit of the ciphertext
    QVERIFY(send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size()));
    QCOMPARE(drain(fd), std::string());  // closed without an answer
    close(fd);
    QCOMPARE(store.received.load(), 0L);
  }

  void aRankKnowsAnImpostor_data() {
    QTest::addColumn<bool>("speaksGate");  // the impostor runs a gate with another secret, else it is another server
    QTest::addColumn<QString>("error");
    QTest::newRow("a gate with another secret") << true << "refused this rank: the run secrets differ";
    QTest::newRow("another program") << false << "it does not answer as a SplitSeg rank 0";
  }
  void aRankKnowsAnImpostor() {
    QFETCH(bool, speaksGate);
    QFETCH(QString, error);
    EchoServer other;
    std::unique_ptr<RankGate> impostor;
    int port = other.port;
    if (speaksGate) {
      impostor = std::make_unique<RankGate>("another secret of 32 characters!", "127.0.0.1", 0, other.port, nullptr);
      port = impostor->port();
    }
    std::string what;
    try {
      GateTunnel tunnel(kSecret, "127.0.0.1", port, std::chrono::seconds(3), 2);
    } catch (const RankError& e) {
      what = e.what();
    }
    QVERIFY2(what.find("rank 2: rank 0 at 127.0.0.1:") == 0, what.c_str());
    QVERIFY2(what.find(error.toStdString()) != std::string::npos, what.c_str());
  }

  void tensorSeals_data() {
    QTest::addColumn<QString>("change");  // what happens to the message on the way
    QTest::addColumn<QString>("why");     // "" accepted
    QTest::newRow("untouched") << "" << "";
    QTest::newRow("body bit") << "body" << "fails authentication";
    QTest::newRow("header bit") << "header" << "fails authentication";
    QTest::newRow("mac bit") << "mac" << "fails authentication";
    QTest::newRow("replayed") << "replay" << "is message 0 where 1 was due";
    QTest::newRow("to another rank") << "misdirected" << "fails authentication";
    QTest::newRow("another run's salt") << "salt" << "fails authentication";
  }
  void tensorSeals() {
    QFETCH(QString, change);
    QFETCH(QString, why);
    TensorSeal zero(kSecret, "salt-1", 0), one(kSecret, "salt-1", 1), two(kSecret, "salt-1", 2),
        otherRun(kSecret, "salt-2", 1);
    std::vector<std::uint8_t> header(72, 3), plain(1000), sealed(1000), mac(16), opened(1000);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::uint8_t>(i);
    const auto count = zero.nextSend(1, 7);
    zero.seal(1, 7, count, header.data(), header.size(), plain.data(), plain.size(), sealed.data(), mac.data());
    QVERIFY(sealed != plain);
    TensorSeal* receiver = change == "misdirected" ? &two : change == "salt" ? &otherRun : &one;
    if (change == "body") sealed[500] ^= 1;
    if (change == "header") header[9] ^= 1;
    if (change == "mac") mac[0] ^= 1;
    if (change == "replay")
      QCOMPARE(one.open(0, 7, count, header.data(), header.size(), sealed.data(), sealed.size(), opened.data(), mac.data()),
               std::string());
    const std::string got =
        receiver->open(0, 7, count, header.data(), header.size(), sealed.data(), sealed.size(), opened.data(), mac.data());
    if (why.isEmpty()) {
      QCOMPARE(got, std::string());
      QVERIFY(opened == plain);
      return;
    }
    QVERIFY2(got.find(why.toStdString()) != std::string::npos, got.c_str());
  }

  // Two ranks as threads: with sealing on, a tensor arrives equal and each message costs 16 bytes
  // more; rank 0's choice reaches the other rank.
  void sealedTensorsCrossRanks_data() {
    QTest::addColumn<QString>("sealing");
    QTest::addColumn<bool>("sealed");
    QTest::newRow("on") << "on" << true;
    QTest::newRow("auto, one host") << "auto" << false;
    QTest::newRow("off") << "off" << false;
  }
  void sealedTensorsCrossRanks() {
    QFETCH(QString, sealing);
    QFETCH(bool, sealed);
    checks::allowRanksAsThreads();
    torch::manual_seed(1);
    const auto sent = torch::randn({3, 5, 7});
    torch::Tensor got;
    std::atomic<int> sealedRanks{0};
    std::int64_t bytes = 0;
    const auto failures = checks::runRanksAsThreads(
        2,
        [&](Comm& comm, int rank) {
          if (comm.sealed()) ++sealedRanks;
          if (rank == 0) {
            comm.send(sent, 1, 11, "a test tensor");
            comm.send(sent * 2, 1, 11, "a second test tensor");
            comm.flush();
            bytes = comm.counters().bytesSent;
          } else {
            got = comm.recv(0, 11, "a test tensor");
            got = got + comm.recv(0, 11, "a second test tensor");
          }
          comm.barrier("the end of the test");
        },
        std::chrono::seconds(30), sealing.toStdString());
    for (const auto& f : failures) QVERIFY2(f.empty(), f.c_str());
    QCOMPARE(sealedRanks.load(), sealed ? 2 : 0);
    QVERIFY(torch::equal(got, sent * 3));
    QCOMPARE(bytes, static_cast<std::int64_t>(2 * (sent.nbytes() + 9 * 8 + (sealed ? 16 : 0))));
  }

  void unreachableGateIsOneLine() {
    const int port = freeLocalPort();
    std::string what;
    try {
      GateTunnel tunnel(kSecret, "127.0.0.1", port, std::chrono::milliseconds(600), 1);
    } catch (const RankError& e) {
      what = e.what();
    }
    QVERIFY2(what.find("rank 1: cannot reach rank 0 at 127.0.0.1:" + std::to_string(port)) == 0, what.c_str());
    QVERIFY2(what.find("is it started") != std::string::npos, what.c_str());
  }
};

QTEST_GUILESS_MAIN(RankGateTest)
#include "RankGateTest.moc"
