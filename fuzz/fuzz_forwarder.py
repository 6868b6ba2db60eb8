"""Coverage-guided fuzzing of the forwarder core and management with atheris (by hand):

    pip install atheris
    python fuzz/fuzz_forwarder.py -runs=1000000 [-max_len=9000] [corpus_dir]

Each input's first byte picks the face (and whether time passes); the rest is one packet.
A crash is a bug: an exception escaping the pipelines or management, or a table out of bounds.
"""
from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports(include=["ndnps.forwarder"]):
    from fuzz.harness import Harness, seeds

HARNESS = Harness()


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    HARNESS.feed(data[0], data[1:])


def main() -> None:
    corpus = [a for a in sys.argv[1:] if not a.startswith("-")]
    if corpus and not os.listdir(corpus[0]):
        for i, seed in enumerate(seeds()):
            with open(os.path.join(corpus[0], f"seed{i}"), "wb") as f:
                f.write(bytes([i % 3]) + seed)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
