#!/usr/bin/env bash
# Install the system packages listed in system-packages.txt that are missing: with apt-get when root, else say how.
# Usage: scripts/system_deps.sh [--check]   (--check: report what is missing, install nothing)
set -euo pipefail
list="${SYSTEM_PACKAGES_FILE:-$(dirname "$0")/system-packages.txt}"
present() {  # present CHECK...: a path that exists, or a command on PATH
  for c in "$@"; do
    case "$c" in /*) [ -e "$c" ] && return 0 ;; *) command -v "$c" >/dev/null 2>&1 && return 0 ;; esac
  done
  return 1
}
missing() {
  while read -r line; do
    line="${line%%#*}"; set -- $line
    [ $# -ge 2 ] || continue
    pkg=$1; shift
    present "$@" || printf '%s ' "$pkg"
  done < "$list"
}
need=$(missing)
[ -z "$need" ] && exit 0
need=${need% }
if [ "${1:-}" = --check ]; then echo "system packages missing: $need"; exit 1; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "letter8: missing system packages: $need. Install them, then run make again: sudo apt-get install -y $need" >&2
  exit 1
fi
echo "installing system packages: $need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $need >/dev/null
still=$(missing)
[ -z "$still" ] || { echo "letter8: apt-get installed $need, yet these are still missing: $still" >&2; exit 1; }
