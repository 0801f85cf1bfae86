"""Bounds on numbers a user passes that reach a library's fixed-width argument or the machine's
resources: declared once, checked by the config models and the command-line flags alike."""

from __future__ import annotations

# every seed (numpy's legacy seeding and torch's generators take at most 32 / 64 bits; a seed of
# 2**64 crashed with "Overflow when unpacking long long")
MAX_SEED = 2**32 - 1
# threads per process: --threads 100000 exhausted the machine's threads (gloo failed, then SIGSEGV)
MAX_THREADS = 256
