#!/usr/bin/env bash
# The network test's lab, run as root inside `unshare --net --mount --fork`: this namespace is
# the VM; a second one is "outside", holding the metadata server's address (DNS and HTTP) and an
# "internet" address. The runner's own wall (container.sh) is set up with real iptables around a
# real podman bridge, then a container asks a name, the internet and the metadata server.
#   netlab.sh REPO IMAGE WORKDIR CONTAINERS_CONF
# Prints RESOLVED=, INTERNET=, METADATA=, TCP53= lines. Every wait is bounded.
set -u
REPO=$1 IMAGE=$2 WORK=$3
export CONTAINERS_CONF=$4
METADATA=169.254.169.254 INTERNET=198.51.100.10

# Private: the network definitions, podman's network namespaces, the resolver this "VM" uses.
mount --make-rprivate / || exit 3
mkdir -p /etc/containers/networks /run/netns
mount -t tmpfs tmpfs /etc/containers/networks && mount -t tmpfs tmpfs /run/netns || exit 3
printf 'nameserver %s\n' "$METADATA" >"$WORK/resolv.conf" && mount --bind "$WORK/resolv.conf" /etc/resolv.conf || exit 3
ip link set lo up

unshare --net sleep 300 & OUT=$!
trap 'kill $OUT ${SERVERS-} 2>/dev/null' EXIT
for _ in $(seq 200); do [[ $(readlink /proc/$OUT/ns/net) != "$(readlink /proc/self/ns/net)" ]] && break; sleep 0.05; done
ip link add vm0 type veth peer name out0 && ip link set out0 netns "$OUT" || exit 3
ip addr add 10.231.0.1/30 dev vm0 && ip link set vm0 up && ip route add default via 10.231.0.2 || exit 3
nsenter --net=/proc/$OUT/ns/net sh -c "ip link set lo up && ip link set out0 up && ip addr add 10.231.0.2/30 dev out0 &&
  ip addr add $METADATA/32 dev lo && ip addr add $INTERNET/32 dev lo" || exit 3
sysctl -qw net.ipv4.ip_forward=1
nsenter --net=/proc/$OUT/ns/net python3 "$REPO/tests/runner/netlab_servers.py" "$METADATA" "$INTERNET" 280 \
  "$WORK/servers.ready" >"$WORK/servers.log" 2>&1 & SERVERS=$!
for _ in $(seq 600); do [[ -f $WORK/servers.ready ]] && break; sleep 0.1; done
[[ -f $WORK/servers.ready ]] || { echo "the servers did not start"; cat "$WORK/servers.log"; exit 3; }

# Docker's own chain, first in FORWARD, as docker keeps it. podman (netavark) puts its accept
# rules first when it first wires a container: wire one, then put DOCKER-USER back in front.
iptables -w -N DOCKER-USER && iptables -w -I FORWARD -j DOCKER-USER || exit 3
# The job network, without podman's own DNS server: the container's resolver is the VM's, as
# with docker, whose embedded DNS forwards from the container's own namespace.
podman network create --disable-dns spotcron-lab >/dev/null || exit 3
BRIDGE=$(podman network inspect --format '{{.NetworkInterface}}' spotcron-lab)
podman run --rm --network spotcron-lab --entrypoint true "$IMAGE" || exit 3
iptables -w -D FORWARD -j DOCKER-USER && iptables -w -I FORWARD 1 -j DOCKER-USER || exit 3

# The runner's wall, as the runner sets it up.
cd "$REPO/vm_images/runner" || exit 3
# shellcheck disable=SC2034  # read by the sourced parts
LOGS=$WORK/logs.txt DOCKER=podman IPTABLES=iptables IP6TABLES=ip6tables JOB_NETWORK=spotcron-lab \
  JOB_BRIDGE=$BRIDGE D_METADATA_ACCESS=false LOCAL_HOST= D_EGRESS=false
for part in http metadata storage checkpoint preemption secrets container hardware; do
  # shellcheck source=/dev/null
  source "./$part.sh"
done
wall_off_metadata || { echo "WALL=failed"; cat "$LOGS"; exit 4; }
echo "NETWORK_ARGS=${NETWORK_ARGS[*]}"
iptables -w -S DOCKER-USER

podman run --rm "${NETWORK_ARGS[@]}" --entrypoint sh "$IMAGE" -c "
  echo RESOLVED=\$(nslookup example.test 2>&1 | grep -A1 'Name:' | grep -o '$INTERNET' | head -n1)
  echo INTERNET=\$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $INTERNET 80 2>&1 | tail -n1)
  echo METADATA=\$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $METADATA 80 2>&1 | tail -n1)
  echo TCP53=\$(echo | nc -w 3 $METADATA 53 >/dev/null 2>&1 && echo open || echo closed)
"
