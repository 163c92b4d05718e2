#!/usr/bin/env bash
# The checks nbdev3-ci makes before testing: nbdev-clean and nbdev-export must change no tracked file.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
if [ -n "$(git status --porcelain -uno)" ]; then
  echo "sync-check: tracked files already differ from the last commit; it checks the committed state:"
  git status --short -uno
fi
before=$(git diff --stat; git diff | sha256sum)
nbdev-clean
nbdev-export
after=$(git diff --stat; git diff | sha256sum)
if [ "$before" != "$after" ]; then
  echo "::error::nbdev-clean or nbdev-export changed tracked files: run both and commit the result."
  git status --short -uno
  exit 1
fi
echo "sync-check: notebooks clean, library in step with nbs/"
