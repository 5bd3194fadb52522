#!/bin/sh
# node-deps.sh installs, only when missing, what a real cairn node runs on:
# Debian's containerd, runc, CNI plugins (bridge, host-local, loopback,
# portmap in /usr/lib/cni), busybox-static (for the offline images) and
# iproute2 (ip netns) and nftables (cairn proxy). Idempotent: a second run installs nothing and prints
# nothing. Exits non-zero with a one-line message when it cannot succeed.
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

[ -z "$missing" ] && exit 0

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
