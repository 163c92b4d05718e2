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
cp nbs/segment.ipynb letter8_tokenizer/segment.ipynb   # the packaged copy of the segment notebook
python scripts/make_readme.py >/dev/null               # README.md from nbs/index.ipynb
after=$(git diff --stat; git diff | sha256sum)
if [ "$before" != "$after" ]; then
  echo "::error::nbdev-clean, nbdev-export, the packaged segment notebook or README.md changed tracked files: run `make sync` and commit the result."
  git status --short -uno
  exit 1
fi
echo "sync-check: notebooks clean, library in step with nbs/"
