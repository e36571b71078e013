#!/usr/bin/env bash
# The cold container rootfs (lab/lab rootfs: debootstrap) beside a cold controller venv (scripts/bootstrap into a
# throwaway GPUSERVE_VENV), against each alone. Run as root from the worktree, under the lab lock. The cache's
# rootfs tarball and deb cache are moved aside for each cold build and put back at the end (content-keyed: the same).
set -euo pipefail
cd "$(dirname "$0")/../.."
C=/var/cache/gpuserve-lab
V=/tmp/ci-cuts-venv
aside() { rm -rf "$C.aside"; mkdir -p "$C.aside"; mv "$C"/rootfs-*.tar.gz "$C/debs" "$C.aside"/; }
fresh() { rm -rf "$C"/rootfs-*.tar.gz "$C/debs"; }
timed() { local name=$1; shift; local t=$EPOCHREALTIME; /usr/bin/time -f "$name: wall %e s, user %U s, sys %S s" "$@" >/dev/null 2>"/tmp/ci-cuts-$name.err" || { cat "/tmp/ci-cuts-$name.err"; exit 1; }; tail -1 "/tmp/ci-cuts-$name.err"; }
aside
echo "--- side by side"
t=$EPOCHREALTIME
rm -rf "$V"
( GPUSERVE_VENV=$V timed venv scripts/bootstrap ) &
p1=$!
( timed rootfs lab/lab rootfs ) &
p2=$!
wait $p1; wait $p2
awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN { printf "both done: wall %.1f s\n", b - a }'
echo "--- one after the other"
fresh; rm -rf "$V"
t=$EPOCHREALTIME
GPUSERVE_VENV=$V timed venv scripts/bootstrap
timed rootfs lab/lab rootfs
awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN { printf "both done: wall %.1f s\n", b - a }'
fresh; rm -rf "$V"
mv "$C.aside"/* "$C"/ && rmdir "$C.aside"
ls "$C"
