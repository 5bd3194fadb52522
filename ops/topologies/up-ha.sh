#!/usr/bin/env bash
# up-ha.sh: a cluster of three cairn servers and two hollow nodes on this
# machine, each on a test host of its own (hosts.sh: a network namespace
# with an address on a bridge, nothing routed out), for users to try what
# servers that join do (go tool task up:ha).
#
#   up-ha.sh up [DIR]      hosts ha-s1..s3 (10.77.0.1-3), ha-n1, ha-n2 (.4,
#                          .5) and ha-lb (.6); s1 runs cairn up
#                          --cluster-init, s2 and s3 cairn up --join with
#                          s1's join token, n1 and n2 cairn agent --join
#                          (hollow nodes), lb HAProxy (Debian's haproxy, when
#                          installed) in front of the three apiservers, with
#                          DIR/kubeconfig pointing at it; state, logs and
#                          pids in DIR (default /var/lib/cairn-ha)
#   up-ha.sh status [DIR]  cairn cluster status and the nodes, through s1
#   up-ha.sh kubectl ARGS  kubectl through HAProxy (DIR/kubeconfig, run in
#                          lb's namespace, where the servers' addresses are
#                          routed), or against s1 without HAProxy
#   up-ha.sh down [DIR]    stop what up started (by its pids) and delete the
#                          hosts; the data directories stay
#
# Faults to try: hosts.sh cut ha s2 / hosts.sh heal ha s2, or kill -9 the
# pid in DIR/s2.pid and run up-ha.sh up again to restart what is not running
# (a server restarted on its data directory rejoins without the token).
# Needs root, iproute2 and the cairn binary ($CAIRN_BIN, default bin/cairn).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/hosts.sh"
cairn=$(realpath "${CAIRN_BIN:-bin/cairn}")
name=ha
subnet=${CAIRN_TOPOLOGY_SUBNET:-10.77.0}
export CAIRN_TOPOLOGY_SUBNET=$subnet

die() { echo "up-ha.sh: $*" >&2; exit 1; }

cmd=${1:-}; shift || true
[ "$cmd" = kubectl ] || dir=$(realpath -m "${1:-${CAIRN_HA_DIR:-/var/lib/cairn-ha}}")
[ "$cmd" != kubectl ] || dir=$(realpath -m "${CAIRN_HA_DIR:-/var/lib/cairn-ha}")

# running NAME: whether the process in DIR/NAME.pid is alive.
running() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }

# start NAME ARGS...: run the cairn binary with ARGS on host NAME, detached,
# output to DIR/NAME.out, pid to DIR/NAME.pid; startp NAME PROGRAM ARGS...
# runs another program so.
start() { local h=$1; shift; startp "$h" "$cairn" "$@"; }
startp() {
	local h=$1; shift
	running "$h" && { echo "$h: running (pid $(cat "$dir/$h.pid"))"; return; }
	setsid "$hosts" exec "$name" "$h" "$@" >>"$dir/$h.out" 2>&1 < /dev/null &
	echo $! > "$dir/$h.pid"
	echo "$h: started (pid $!, log $dir/$h.out)"
}

kube() {
	if running lb; then
		"$hosts" exec "$name" lb kubectl --kubeconfig "$dir/kubeconfig" "$@"
	else
		"$hosts" exec "$name" s1 kubectl --kubeconfig "$dir/s1/kubeconfig" "$@"
	fi
}

# haproxy: HAProxy on lb in front of the three apiservers (TCP: kubectl's
# TLS goes through to the servers, whose certificates name lb's address),
# and DIR/kubeconfig, s1's admin kubeconfig with lb as its server.
haproxy() {
	command -v haproxy >/dev/null || { echo "lb: no haproxy (apt-get install haproxy); kubectl goes to s1"; return; }
	cat > "$dir/haproxy.cfg" <<CFG
defaults
	mode tcp
	timeout connect 5s
	timeout client 1h
	timeout server 1h
frontend apiservers
	bind $subnet.6:6443
	default_backend apiservers
backend apiservers
	option tcp-check
	server s1 $subnet.1:6443 check inter 2s
	server s2 $subnet.2:6443 check inter 2s
	server s3 $subnet.3:6443 check inter 2s
CFG
	sed "s#server: https://$subnet.1:6443#server: https://$subnet.6:6443#" "$dir/s1/kubeconfig" > "$dir/kubeconfig"
	startp lb "$(command -v haproxy)" -db -f "$dir/haproxy.cfg"
}

# ready H: wait up to 3 minutes for server H's /readyz.
ready() {
	local h=$1
	for _ in $(seq 180); do
		running "$h" || die "$h exited; see $dir/$h.out"
		if [ -f "$dir/$h/kubeconfig" ] && "$hosts" exec "$name" "$h" kubectl --kubeconfig "$dir/$h/kubeconfig" \
			--request-timeout 5s get --raw /readyz >/dev/null 2>&1; then
			echo "$h: ready"
			return
		fi
		sleep 1
	done
	die "$h not ready after 3 minutes; see $dir/$h.out"
}

case "$cmd" in
up)
	[ -x "$cairn" ] || die "no cairn binary at $cairn (go tool task build, or set CAIRN_BIN)"
	mkdir -p "$dir"
	ip netns list | grep -q "^$name-br\b" || "$hosts" create "$name" s1 s2 s3 n1 n2 lb
	s1=https://$subnet.1:6443
	start s1 up --node=false --data-dir "$dir/s1" --listen "$subnet.1:6443" --tls-san "$subnet.6" --cluster-init
	ready s1
	token=$(cat "$dir/s1/join-token")
	for i in 2 3; do
		start "s$i" up --node=false --data-dir "$dir/s$i" --listen "$subnet.$i:6443" --tls-san "$subnet.6" --join "$s1" --join-token "$token"
		ready "s$i"
	done
	for i in 1 2; do
		start "n$i" agent --runtime hollow --data-dir "$dir/n$i" --node-name "n$i" \
			--address "$subnet.$((i + 3)):10250" --node-ip "$subnet.$((i + 3))" --join "$s1" --join-token "$token"
	done
	haproxy
	for _ in $(seq 120); do
		[ "$(kube get nodes --no-headers 2>/dev/null | grep -c ' Ready')" -ge 2 ] && break
		sleep 1
	done
	kube get nodes
	cat <<MSG

Three servers and two hollow nodes are up. Try:
  $0 kubectl get pods -A
  $0 status $dir
  $hosts cut $name s2; sleep 20; $hosts heal $name s2
  $0 down $dir
MSG
	;;
status)
	"$hosts" exec "$name" s1 "$cairn" cluster status --data-dir "$dir/s1"
	kube get nodes -o wide
	;;
kubectl)
	kube "$@"
	;;
down)
	for h in lb n2 n1 s3 s2 s1; do
		if running "$h"; then
			kill -TERM "$(cat "$dir/$h.pid")"
			for _ in $(seq 30); do running "$h" || break; sleep 1; done
			running "$h" && kill -KILL "$(cat "$dir/$h.pid")"
			echo "$h: stopped"
		fi
		rm -f "$dir/$h.pid"
	done
	"$hosts" destroy "$name"
	;;
*)
	die "usage: up-ha.sh up|status|down [DIR] | up-ha.sh kubectl ARGS..."
	;;
esac
