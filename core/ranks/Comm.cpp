#include "core/ranks/Comm.h"
#include "core/base/JsonText.h"
#include "core/ranks/GateTunnel.h"
#include "core/ranks/RankAddress.h"
#include "core/ranks/RankGate.h"
#include "core/ranks/TensorSeal.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <thread>

#include <algorithm>
#include <array>
#include <cctype>

namespace splitseg::ranks {

namespace {
// A tensor travels as a fixed header (dtype, rank, sizes) then its bytes.
constexpr int kMaxDims = 6;
// dtype, dims, sizes, then the message's count between the two ranks (TensorSeal's nonce).
constexpr int kHeaderSize = 2 + kMaxDims + 1;
constexpr int kCountAt = 2 + kMaxDims;
// Above every tag the trainers and inferers use (PipelineSchedule::tag kinds are small).
constexpr int kLinkProbeTag = 0x7f000000;
constexpr std::int64_t kLinkProbeBytes = std::int64_t{8} << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string secondsText(std::chrono::milliseconds t) {
  const double s = static_cast<double>(t.count()) / 1000.0;
  std::string out = std::to_string(s);
  out.erase(out.find_last_not_of('0') + 1);
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out + " s";
}

std::string what(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

std::string hostName() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "?";
  return buf.data();
}
} // namespace

struct Comm::Impl {
  RankAddress address;
  std::unique_ptr<RankGate> gate;      // rank 0
  std::unique_ptr<GateTunnel> tunnel;  // the other ranks
  std::unique_ptr<TensorSeal> seal;    // when tensors are sealed
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  struct Pending {
    c10::intrusive_ptr<c10d::Work> work;
    torch::Tensor tensor;  // alive until its send completes
    int dst;
    std::string what;
  };
  std::vector<Pending> pending;
  int barriers = 0;  // barriers passed (every rank calls them in the same order)
};

Comm::Comm(const RankEnv& env, const std::string& identity, std::chrono::milliseconds timeout,
           const CancelToken* cancel)
    : env_(env), timeout_(timeout), impl_(std::make_unique<Impl>()) {
  if (env_.secret.empty()) throw RankError(missingSecretMessage(env_.rank));
  impl_->address = chooseRankAddress(env_);
  if (env_.rank == 0)
    openStoreAsRankZero();
  else
    openStoreThroughGate();
  // Join: every rank says who it is; rank 0 compares and decides for all.
  const nlohmann::json me{{"world_size", env_.worldSize}, {"identity", identity}, {"host", hostName()},
                          {"pid", static_cast<long>(getpid())}};
  std::string problem;
  if (env_.rank == 0) {
    for (int r = 1; r < env_.worldSize && problem.empty(); ++r) {
      const std::string key = "join/" + std::to_string(r);
      // Polled in short slices rather than one wait, so a cancel is seen while ranks are missing.
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      bool joined = false;
      while (!(joined = impl_->store->check({key})) && std::chrono::steady_clock::now() < deadline) {
        if (cancel && cancel->cancelled()) throw Cancelled();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!joined) {
        problem = "rank " + std::to_string(r) + " did not join within " + secondsText(timeout) + " (WORLD_SIZE=" +
                  std::to_string(env_.worldSize) + "; is every rank started?)";
        break;
      }
      const auto v = impl_->store->get(key);
      nlohmann::json other;
      try {
        other = parseJson(std::string_view(reinterpret_cast<const char*>(v.data()), v.size()), "rank " + std::to_string(r) + "'s greeting",
                          kRankMessageLimits);
      } catch (const FormatError&) {
        other = nullptr;
      }
      if (!other.is_object() || !other.contains("world_size")) {
        problem = "rank " + std::to_string(r) + " sent an unreadable greeting";
      } else if (other["world_size"] != env_.worldSize) {
        problem = "rank " + std::to_string(r) + " has WORLD_SIZE=" + other["world_size"].dump() + ", rank 0 has " +
                  std::to_string(env_.worldSize);
      } else if (other.value("identity", std::string()) != identity) {
        problem = "rank " + std::to_string(r) + " runs " + other.value("identity", std::string("?")) +
                  ", rank 0 runs " + identity + " (every rank needs the same SplitSeg and LibTorch)";
      }
    }
    const std::string v = problem.empty() ? "ok" : problem;
    impl_->store->set("join/verdict", std::vector<std::uint8_t>(v.begin(), v.end()));
    if (!problem.empty()) {
      awaitReaders("join");
      throw RankError("rank 0: " + problem);
    }
  } else {
    const std::string text = me.dump();
    impl_->store->set("join/" + std::to_string(env_.rank), std::vector<std::uint8_t>(text.begin(), text.end()));
    try {
      impl_->store->wait({"join/verdict"}, timeout);
    } catch (const std::exception&) {
      throw RankError("rank " + std::to_string(env_.rank) + ": rank 0 did not admit this rank within " +
                      secondsText(timeout));
    }
    const auto v = impl_->store->get("join/verdict");
    const std::string verdict(v.begin(), v.end());
    impl_->store->set("join/read/" + std::to_string(env_.rank), std::vector<std::uint8_t>{1});
    if (verdict != "ok") throw RankError("rank " + std::to_string(env_.rank) + ": refused by rank 0: " + verdict);
  }
}

Comm::~Comm() = default;

namespace {
c10::intrusive_ptr<c10d::TCPStore> agentStore(const RankEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(env.masterPort);
  opts.isServer = false;
  opts.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(env.masterAddr, opts);
  } catch (const std::exception& e) {
    throw RankError("rank " + std::to_string(env.rank) + ": cannot reach torchrun's store at " + env.masterAddr + ":" +
                    std::to_string(env.masterPort) + ": " + what(e));
  }
}

std::string gateKey(const RankEnv& env) { return "splitseg/gate/" + std::to_string(env.restartCount); }
} // namespace

void Comm::openStoreAsRankZero() {
  // The store listens on loopback only; the gate, where the other ranks reach this host.
  std::string error;
  const int storeFd = gate::listenOn("127.0.0.1", 0, error);
  if (storeFd < 0) throw RankError("rank 0: cannot listen on 127.0.0.1 for the rendezvous store: " + error);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(gate::boundPort(storeFd));
  opts.isServer = true;
  opts.waitWorkers = false;
  opts.timeout = timeout_;
  opts.masterListenFd = storeFd;
  impl_->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", opts);
  // torchrun's agent holds MASTER_PORT already: the gate takes any port and says which through it.
  const int port = env_.agentStore ? 0 : env_.masterPort;
  const std::string bind = allRanksOnThisHost(env_) && !impl_->address.named ? "127.0.0.1" : impl_->address.address;
  impl_->gate = std::make_unique<RankGate>(env_.secret, bind, port, opts.port, [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  });
  const std::string where = bind + ":" + std::to_string(port);
  if (!impl_->gate->listening())
    throw RankError("rank 0: cannot listen on " + where +
                    (lower(impl_->gate->listenError()).find("in use") != std::string::npos
                         ? " (port in use: choose another MASTER_PORT)"
                         : "") +
                    ": " + impl_->gate->listenError());
  if (env_.agentStore) {
    const std::string at = impl_->address.address + ":" + std::to_string(impl_->gate->port());
    agentStore(env_, timeout_)->set(gateKey(env_), std::vector<std::uint8_t>(at.begin(), at.end()));
  }
}

void Comm::openStoreThroughGate() {
  std::string host = env_.masterAddr;
  int port = env_.masterPort;
  if (env_.agentStore) {
    auto agent = agentStore(env_, timeout_);
    try {
      agent->wait({gateKey(env_)}, timeout_);
    } catch (const std::exception&) {
      throw RankError("rank " + std::to_string(env_.rank) + ": rank 0 did not open its gate within " +
                      secondsText(timeout_));
    }
    const auto v = agent->get(gateKey(env_));
    const std::string at(v.begin(), v.end());
    const auto colon = at.rfind(':');
    if (colon == std::string::npos) throw RankError("rank " + std::to_string(env_.rank) + ": torchrun's store holds an unreadable gate address");
    host = at.substr(0, colon);
    port = std::atoi(at.c_str() + colon + 1);
  }
  impl_->tunnel = std::make_unique<GateTunnel>(env_.secret, host, port, timeout_, env_.rank);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(impl_->tunnel->localPort());
  opts.isServer = false;
  opts.timeout = timeout_;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", opts);
  } catch (const std::exception& e) {
    throw RankError("rank " + std::to_string(env_.rank) + ": cannot reach rank 0's store through its gate at " + host +
                    ":" + std::to_string(port) + ": " + what(e));
  }
}

bool Comm::sealed() const { return impl_->seal != nullptr; }

void Comm::measureLinks() {
  linkSpeeds_.assign(static_cast<std::size_t>(env_.worldSize), 0.0);
  const auto probe = torch::zeros({kLinkProbeBytes}, torch::kUInt8);
  for (int r = 1; r < env_.worldSize; ++r) {
    if (env_.rank == 0) {
      const auto t0 = std::chrono::steady_clock::now();
      send(probe, r, kLinkProbeTag, "the link probe");
      flush();
      (void)recv(r, kLinkProbeTag, "the link probe");
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      linkSpeeds_[static_cast<std::size_t>(r)] = s > 0 ? 2.0 * static_cast<double>(kLinkProbeBytes) / s : 0;
    } else if (env_.rank == r) {
      send(recv(0, kLinkProbeTag, "the link probe"), 0, kLinkProbeTag, "the link probe");
      flush();
    }
  }
  counters_ = Counters{};  // the steps' figures start here
}

std::string Comm::linkSummary() const {
  std::string out;
  for (std::size_t r = 1; r < linkSpeeds_.size(); ++r) {
    if (linkSpeeds_[r] <= 0) continue;
    char one[64];
    std::snprintf(one, sizeof one, "%srank %zu %.2f Gbit/s", out.empty() ? "" : ", ", r, linkSpeeds_[r] * 8 / 1e9);
    out += one;
  }
  return out.empty() ? out : "links measured at the join: " + out + (sealed() ? " (sealed)" : "");
}

std::vector<std::string> Comm::refusals() const {
  return impl_->gate ? impl_->gate->refusals() : std::vector<std::string>{};
}

void Comm::awaitReaders(const std::string& phase) {
  // Rank 0 serves the store: before it exits with a refusal, the other ranks read why (each
  // gets a few seconds; a rank that never joined is not waited for longer).
  const auto wait = std::min(timeout_, std::chrono::milliseconds(5000));
  for (int r = 1; r < env_.worldSize; ++r) {
    try {
      impl_->store->wait({phase + "/read/" + std::to_string(r)}, wait);
    } catch (const std::exception&) {
    }
  }
}

void Comm::agree(const std::string& phase, const std::string& problem) {
  const std::string key = phase + "/" + std::to_string(env_.rank);
  const std::string mine = problem.empty() ? "ok" : problem;
  try {
    impl_->store->set(key, std::vector<std::uint8_t>(mine.begin(), mine.end()));
    std::string verdict = "ok";
    if (env_.rank == 0) {
      if (!problem.empty()) verdict = "rank 0: " + problem;
      for (int r = 1; r < env_.worldSize && verdict == "ok"; ++r) {
        const std::string k = phase + "/" + std::to_string(r);
        impl_->store->wait({k}, timeout_);
        const auto v = impl_->store->get(k);
        const std::string s(v.begin(), v.end());
        if (s != "ok") verdict = "rank " + std::to_string(r) + ": " + s;
      }
      impl_->store->set(phase + "/verdict", std::vector<std::uint8_t>(verdict.begin(), verdict.end()));
      if (verdict != "ok") awaitReaders(phase);
    } else {
      impl_->store->wait({phase + "/verdict"}, timeout_);
      const auto v = impl_->store->get(phase + "/verdict");
      verdict.assign(v.begin(), v.end());
      impl_->store->set(phase + "/read/" + std::to_string(env_.rank), std::vector<std::uint8_t>{1});
    }
    if (verdict != "ok") throw RankError(verdict);
  } catch (const RankError&) {
    throw;
  } catch (const std::exception& e) {
    throw RankError("rank " + std::to_string(env_.rank) + ": the ranks did not agree on " + phase + " within " +
                    secondsText(timeout_) + " (" + what(e) + ")");
  }
}

void Comm::publish(const std::string& key, const std::string& value) {
  impl_->store->set("pub/" + key, std::vector<std::uint8_t>(value.begin(), value.end()));
}

std::string Comm::fetch(const std::string& key) {
  try {
    impl_->store->wait({"pub/" + key}, timeout_);
  } catch (const std::exception&) {
    throw RankError("rank " + std::to_string(env_.rank) + ": rank 0 did not send the " + key + " within " +
                    secondsText(timeout_));
  }
  const auto v = impl_->store->get("pub/" + key);
  return std::string(v.begin(), v.end());
}

void Comm::startGroup(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  // Rank 0 decides whether tensors are sealed and draws the run's salt; the store carries both,
  // behind the gate.
  nlohmann::json transport;
  if (env_.rank == 0) {
    std::uint8_t salt[16];
    randomBytes(salt, sizeof salt);
    const bool sealed = env_.tensorSealing == "on" || (env_.tensorSealing == "auto" && !allRanksOnThisHost(env_));
    transport = {{"sealed", sealed}, {"salt", hexOf(salt, sizeof salt)}};
    publish("transport", transport.dump());
  } else {
    try {
      transport = parseJson(fetch("transport"), "rank 0's transport message", kRankMessageLimits);
    } catch (const FormatError&) {
      transport = nullptr;
    }
    if (!transport.is_object() || !transport.value("sealed", nlohmann::json()).is_boolean() ||
        !transport.value("salt", nlohmann::json()).is_string())
      throw RankError("rank " + std::to_string(env_.rank) + ": rank 0 sent an unreadable transport message");
  }
  if (transport["sealed"].get<bool>())
    impl_->seal = std::make_unique<TensorSeal>(env_.secret, transport["salt"].get<std::string>(), env_.rank);
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  // The interfaces RankAddress chose: the ones named, else the address that routes to MASTER_ADDR.
  try {
    if (impl_->address.named)
      for (const auto& name : impl_->address.interfaces)
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    else
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(impl_->address.address));
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gloo", impl_->store);
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, env_.rank, env_.worldSize, opts);
  } catch (const std::exception& e) {
    throw RankError("rank " + std::to_string(env_.rank) + ": cannot connect the ranks' transport: " + what(e));
  }
  if (!allRanksOnThisHost(env_)) measureLinks();
}

void Comm::fail(int peer, const std::string& waitingFor, const std::exception& e) const {
  const std::string m = lower(what(e));
  std::string cause;
  if (m.find("timed out") != std::string::npos || m.find("timeout") != std::string::npos)
    cause = "no answer from rank " + std::to_string(peer) + " within " + secondsText(timeout_) +
            " (it hangs, died or cannot be reached)";
  else if (m.find("closed") != std::string::npos || m.find("reset") != std::string::npos ||
           m.find("broken pipe") != std::string::npos || m.find("eof") != std::string::npos)
    cause = "rank " + std::to_string(peer) + " closed the connection (it exited or crashed)";
  else
    cause = "transport error with rank " + std::to_string(peer) + ": " + what(e);
  throw RankError("rank " + std::to_string(env_.rank) + ": " + cause + " while " + waitingFor);
}

void Comm::send(const torch::Tensor& tensor, int dst, int tag, const std::string& whatTensor) {
  if (tensor.dim() > kMaxDims) throw InvalidArgument("cannot send a tensor of more than 6 dimensions");
  auto data = tensor.detach().to(torch::kCPU).contiguous();
  auto header = torch::zeros({kHeaderSize}, torch::kLong);
  auto h = header.accessor<std::int64_t, 1>();
  h[0] = static_cast<std::int64_t>(data.scalar_type());
  h[1] = data.dim();
  for (std::int64_t d = 0; d < data.dim(); ++d) h[2 + d] = data.size(d);
  auto body = data;
  if (impl_->seal) {
    h[kCountAt] = impl_->seal->nextSend(dst, tag);
    const auto n = static_cast<std::size_t>(data.nbytes());
    body = torch::empty({static_cast<std::int64_t>(n + 16)}, torch::kUInt8);
    auto* out = body.data_ptr<std::uint8_t>();
    impl_->seal->seal(dst, tag, h[kCountAt], reinterpret_cast<const std::uint8_t*>(header.data_ptr<std::int64_t>()),
                      kHeaderSize * 8, static_cast<const std::uint8_t*>(data.data_ptr()), n, out, out + n);
  }
  try {
    for (auto t : {header, body}) {
      std::vector<at::Tensor> one{t};
      impl_->pending.push_back({impl_->group->send(one, dst, tag), t, dst, whatTensor});
    }
  } catch (const std::exception& e) {
    fail(dst, "sending " + whatTensor, e);
  }
  counters_.bytesSent += static_cast<std::int64_t>(body.nbytes() + header.nbytes());
}

torch::Tensor Comm::recv(int src, int tag, const std::string& whatTensor) {
  const auto t0 = std::chrono::steady_clock::now();
  torch::Tensor data;
  try {
    std::vector<at::Tensor> header{torch::zeros({kHeaderSize}, torch::kLong)};
    impl_->group->recv(header, src, tag)->wait(timeout_);
    auto h = header[0].accessor<std::int64_t, 1>();
    const auto dims = h[1];
    const bool knownType = h[0] >= 0 && h[0] < static_cast<std::int64_t>(c10::ScalarType::NumOptions);
    const auto type = knownType ? static_cast<c10::ScalarType>(h[0]) : c10::ScalarType::Undefined;
    bool sane = knownType && dims >= 0 && dims <= kMaxDims;
    for (std::int64_t d = 0; sane && d < dims; ++d) sane = h[2 + d] >= 0 && h[2 + d] <= (std::int64_t{1} << 40);
    if (!sane)
      throw RankError("rank " + std::to_string(env_.rank) + ": rank " + std::to_string(src) +
                      " sent a damaged tensor header for " + whatTensor);
    std::vector<std::int64_t> sizes(h.data() + 2, h.data() + 2 + dims);
    data = torch::empty(sizes, torch::TensorOptions().dtype(type));
    if (!impl_->seal) {
      std::vector<at::Tensor> body{data};
      impl_->group->recv(body, src, tag)->wait(timeout_);
    } else {
      const auto n = static_cast<std::size_t>(data.nbytes());
      std::vector<at::Tensor> body{torch::empty({static_cast<std::int64_t>(n + 16)}, torch::kUInt8)};
      impl_->group->recv(body, src, tag)->wait(timeout_);
      const auto* in = body[0].data_ptr<std::uint8_t>();
      const std::string why = impl_->seal->open(
          src, tag, h[kCountAt], reinterpret_cast<const std::uint8_t*>(header[0].data_ptr<std::int64_t>()),
          kHeaderSize * 8, in, n, static_cast<std::uint8_t*>(data.data_ptr()), in + n);
      if (!why.empty())
        throw RankError("rank " + std::to_string(env_.rank) + ": the " + whatTensor + " from rank " +
                        std::to_string(src) + " is refused: " + why);
    }
  } catch (const RankError&) {
    throw;
  } catch (const std::exception& e) {
    fail(src, "waiting for " + whatTensor, e);
  }
  counters_.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  counters_.bytesReceived += static_cast<std::int64_t>(data.nbytes()) + kHeaderSize * 8 + (impl_->seal ? 16 : 0);
  return data;
}

void Comm::flush() {
  auto pending = std::move(impl_->pending);
  impl_->pending.clear();
  for (auto& p : pending) {
    try {
      p.work->wait(timeout_);
    } catch (const std::exception& e) {
      fail(p.dst, "sending " + p.what, e);
    }
  }
}

void Comm::barrier(const std::string& whatFor) {
  flush();
  try {
    impl_->group->barrier()->wait(timeout_);
    // A rank may leave gloo's barrier while another is still inside it (its last send in
    // flight); tearing the transport down then makes the other fail (gloo issue #155), and with
    // ranks as threads of one process it crashed once on CI (SpatialTrainingTest, SIGSEGV with a
    // rank in gloo::barrier). So every rank also says it is out, over the store, and waits for all.
    const std::string key = "barrier/" + std::to_string(impl_->barriers++);
    if (impl_->store->add(key + "/out", 1) == env_.worldSize)
      impl_->store->set(key + "/all", std::vector<std::uint8_t>{1});
    impl_->store->wait({key + "/all"}, timeout_);
  } catch (const std::exception& e) {
    throw RankError("rank " + std::to_string(env_.rank) + ": the ranks did not meet at " + whatFor + " within " +
                    secondsText(timeout_) + " (" + what(e) + ")");
  }
}

} // namespace splitseg::ranks
