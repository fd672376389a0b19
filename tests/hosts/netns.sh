# Hosts as network namespaces, for tests/hosts/hosts.sh and tests/bench/links.sh (sourced).
# make_link creates a bridge namespace; host_ns adds a host on it with link0 = ADDR/24 and an
# /etc/hosts of Debian's default layout (its own NAME on 127.0.1.1) plus the names given; `on` runs
# a command in a host with its hostname. Everything is removed on exit (netns_cleanup).
TAG="s$$"; N=$(( ($$ % 200) + 20 ))
NA="${TAG}a"; NB="${TAG}b"; NI="${TAG}i"; NL="${TAG}l"
A="10.213.$N.1"; B="10.213.$N.2"; I="10.213.$N.3"
W="$(mktemp -d)"
netns_cleanup() {
  for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
  for ns in "$NA" "$NB" "$NI" "$NL"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$W"
}
trap netns_cleanup EXIT INT TERM
# Returns 1 (after saying why) where namespaces cannot be made.
make_link() {
  [ "$(id -u)" = 0 ] || { echo "network namespaces need root"; return 1; }
  command -v ip >/dev/null || { echo "no ip (iproute2)"; return 1; }
  ip netns add "$NL" 2>/dev/null || { echo "cannot create network namespaces here"; return 1; }
  ip netns exec "$NL" ip link add br0 type bridge && ip netns exec "$NL" ip link set br0 up
  ip netns exec "$NL" ip link set lo up
}
host_ns() {  # NAME NS ADDR OTHER_NAME OTHER_ADDR
  local name=$1 ns=$2 addr=$3
  ip netns add "$ns"
  ip link add "v$ns" type veth peer name "p$ns"
  ip link set "v$ns" netns "$ns"; ip link set "p$ns" netns "$NL"
  ip netns exec "$NL" ip link set "p$ns" master br0
  ip netns exec "$NL" ip link set "p$ns" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set "v$ns" name link0
  ip netns exec "$ns" ip addr add "$addr/24" dev link0
  ip netns exec "$ns" ip link set link0 up
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$name" >"/etc/netns/$ns/hosts"
  shift 3
  while [ $# -ge 2 ]; do printf '%s %s\n' "$2" "$1" >>"/etc/netns/$ns/hosts"; shift 2; done
}
# on NS NAME VAR=VALUE... -- COMMAND...: runs COMMAND in host NS with hostname NAME.
on() {
  local ns=$1 name=$2; shift 2
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  ip netns exec "$ns" unshare --uts sh -c 'hostname "$0"; exec env "$@"' "$name" \
    OMP_NUM_THREADS=1 TORCH_CPP_LOG_LEVEL=ERROR "${envs[@]}" "$@"
}
