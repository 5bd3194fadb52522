#!/usr/bin/env bash
# hosts.sh: test hosts on this machine, each in its own network namespace,
# joined by one bridge that lives in a network namespace of its own.
#
#   hosts.sh create NAME HOST...   make namespace NAME-br with bridge br0, and
#                                  for each HOST a namespace NAME-HOST whose
#                                  eth0 (a veth into br0) has the next address
#                                  of $CAIRN_TOPOLOGY_SUBNET (default 10.77.0;
#                                  hosts get .1, .2, ... in the order given, /24)
#   hosts.sh addr NAME HOST        print HOST's address
#   hosts.sh exec NAME HOST CMD... run CMD inside HOST's namespace
#   hosts.sh cut NAME HOST         cut HOST off from every other host (its
#                                  port on the bridge goes down; its processes
#                                  keep running and keep their loopback)
#   hosts.sh heal NAME HOST        bring HOST's port back up
#   hosts.sh destroy NAME          delete every namespace of NAME (the veths
#                                  go with them); safe to run twice
#   hosts.sh list NAME             the hosts of NAME with address and state
#
# Nothing is routed anywhere: the host namespaces have no default route and
# the bridge has no uplink, so processes inside reach each other and their
# own loopback only, never the machine's network. Needs root and iproute2.
# Namespaces are named NAME-br and NAME-HOST (ip netns list shows them);
# keep NAME and HOST short: interface names are limited to 15 characters,
# so the bridge's ports are named by position (p1, p2, ...).
set -euo pipefail

subnet=${CAIRN_TOPOLOGY_SUBNET:-10.77.0}

die() { echo "hosts.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (ip netns)"
command -v ip >/dev/null || die "ip not found (apt-get install iproute2)"

cmd=${1:-}; shift || true
name=${1:-}; shift || true
[ -n "$cmd" ] && [ -n "$name" ] || die "usage: hosts.sh create|addr|exec|cut|heal|destroy|list NAME [HOST...]"
case "$name" in *[!A-Za-z0-9_.-]*) die "bad name $name" ;; esac

br=$name-br

# port HOST: the bridge port of HOST, from the alias set on its host side.
port() {
	local p
	p=$(ip -n "$name-$1" -o link show eth0 2>/dev/null | sed -n 's/.*alias \(p[0-9]*\).*/\1/p')
	[ -n "$p" ] || p=$(ip -n "$name-$1" link show eth0 2>/dev/null | sed -n 's/^ *alias \(p[0-9]*\)$/\1/p')
	[ -n "$p" ] || die "no host $1 in $name"
	echo "$p"
}

addr() { ip -n "$name-$1" -4 -o addr show eth0 | awk '{split($4, a, "/"); print a[1]}'; }

case "$cmd" in
create)
	[ $# -ge 1 ] || die "create: no hosts"
	ip netns list | grep -q "^$br\b" && die "$name exists (hosts.sh destroy $name first)"
	trap 'ip netns list | sed -n "s/^\($name-[^ ]*\).*/\1/p" | xargs -r -n1 ip netns delete' ERR
	ip netns add "$br"
	ip -n "$br" link set lo up
	ip -n "$br" link add br0 type bridge
	ip -n "$br" link set br0 up
	i=0
	for h in "$@"; do
		i=$((i + 1))
		[ $i -le 250 ] || die "too many hosts"
		ns=$name-$h
		ip netns add "$ns"
		ip -n "$ns" link set lo up
		ip -n "$ns" link add eth0 type veth peer name "p$i" netns "$br"
		ip -n "$ns" link set eth0 alias "p$i"
		ip -n "$ns" addr add "$subnet.$i/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$br" link set "p$i" master br0
		ip -n "$br" link set "p$i" up
	done
	;;
addr)
	addr "$1"
	;;
exec)
	h=$1; shift
	exec ip netns exec "$name-$h" "$@"
	;;
cut)
	ip -n "$br" link set "$(port "$1")" down
	;;
heal)
	ip -n "$br" link set "$(port "$1")" up
	;;
destroy)
	# Processes still inside are SIGKILLed first: the namespaces are this
	# script's, and so is whatever was started in them with exec.
	ip netns list | sed -n "s/^\($name-[^ ]*\).*/\1/p" | while read -r ns; do
		ip netns pids "$ns" | xargs -r kill -9 2>/dev/null || true
		ip netns delete "$ns"
	done
	;;
list)
	ip netns list | sed -n "s/^$name-\([^ ]*\).*/\1/p" | grep -vx br | sort | while read -r h; do
		p=$(port "$h")
		state=$(ip -n "$br" -o link show "$p" | grep -q 'state UP\|,UP' && echo up || echo cut)
		echo "$h $(addr "$h") $state"
	done
	;;
*)
	die "unknown command $cmd"
	;;
esac
