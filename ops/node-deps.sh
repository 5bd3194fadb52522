#!/bin/sh
# node-deps.sh installs, only when missing, what a real cairn node runs on:
# Debian's containerd, runc and crun, CNI plugins (bridge, host-local, loopback,
# portmap in /usr/lib/cni), busybox-static (for the offline images) and
# iproute2 (ip netns) and nftables (cairn proxy). Idempotent: a second run installs nothing and prints
# nothing. Exits non-zero with a one-line message when it cannot succeed.
#
# On a hybrid cgroup layout (cgroup v1 controllers under /sys/fs/cgroup and
# a cgroup2 hierarchy at /sys/fs/cgroup/unified) it also mounts every
# controller still left in that cgroup2 hierarchy (hugetlb on these
# machines) as a cgroup v1 hierarchy of its own, the layout systemd's hybrid
# mode makes: crun refuses to run otherwise ("cgroups in hybrid mode not
# supported, drop all controllers from cgroupv2") and the node falls back to
# runc, which costs about twice the CPU per container.
#
# More package:file pairs may be given as arguments, e.g.
# `node-deps.sh chromium:/usr/bin/chromium` (the browser test's).
set -u

fail() {
	echo "node-deps: $*" >&2
	exit 1
}

# package:file that proves it is installed.
wanted="containerd:/usr/bin/containerd
runc:/usr/sbin/runc
crun:/usr/bin/crun
containernetworking-plugins:/usr/lib/cni/bridge
busybox-static:/bin/busybox
iproute2:/sbin/ip
nftables:/usr/sbin/nft
$*"

missing=""
for pair in $wanted; do
	pkg=${pair%%:*}
	file=${pair#*:}
	if [ -x "$file" ] && dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		continue
	fi
	missing="$missing $pkg"
done

# hybrid_cgroups moves the controllers left in a hybrid layout's cgroup2
# hierarchy to cgroup v1 hierarchies (see above). A controller in use in
# cgroup2 cannot move: then it says so and the node runs runc.
hybrid_cgroups() {
	[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] || return 0
	[ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] || return 0
	left=$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null) || return 0
	[ -z "$left" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		SUDO="sudo -n"
	else
		SUDO=""
	fi
	for c in $left; do
		if ! { $SUDO mkdir -p "/sys/fs/cgroup/$c" && $SUDO mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"; } 2>/dev/null; then
			echo "node-deps: cannot mount cgroup v1 controller $c (in use in cgroup2?): nodes use runc, not crun" >&2
		fi
	done
	return 0
}

if [ -z "$missing" ]; then
	hybrid_cgroups
	exit 0
fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found; install$missing by hand"
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo -n"
	else
		fail "need root to install$missing"
	fi
else
	SUDO=""
fi

log=$(mktemp) || fail "mktemp failed"
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# Install first from the current lists; refresh them only when that fails.
if ! $SUDO apt-get install -y -q --no-install-recommends $missing >"$log" 2>&1; then
	if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends $missing; } >"$log" 2>&1; then
		fail "apt-get install$missing failed: $(grep -E '^(E|W):' "$log" | tail -n 1)"
	fi
fi

for pair in $wanted; do
	file=${pair#*:}
	[ -x "$file" ] || fail "${pair%%:*} installed but $file is missing"
done

hybrid_cgroups
