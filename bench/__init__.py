"""The benchmarks: scripts grouped by the question they answer, each run as `python bench/<group>/<script>.py` from the
clone's root; `bench/common.py` is the one helper they share, and `bench/results/` holds what they measured."""
