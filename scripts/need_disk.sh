#!/usr/bin/env bash
# Stop before an install that would not fit: fail with the space needed, the space free and the fix, having changed nothing.
# Usage: scripts/need_disk.sh GIB DIR WHAT   (GIB: whole GiB the install needs in DIR's file system)
set -euo pipefail
need_gib=$1; dir=$2; what=$3
probe=$dir; while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
free_kib=$(df -Pk "$probe" | awk 'NR==2 {print $4}')
free_gib=$((free_kib / 1048576))
if [ "$free_gib" -lt "$need_gib" ]; then
  echo "letter8: $what needs about ${need_gib} GiB free in $(cd "$probe" && pwd), and only ${free_gib} GiB is." >&2
  echo "letter8: free space there (old clones, ~/.cache/pip: 'pip cache purge'), or point the install at a larger disk" >&2
  echo "letter8: (make VENV=/big/.venv, make test-xla XLA_VENV=/big/.venv-xla), then run make again." >&2
  exit 1
fi
