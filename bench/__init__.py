"""Benchmarks: each prints figures measured side by side in one run and one JSON line last.

Registry: benchmark name -> module with `main(argv: list[str] | None) -> int`.
Add a benchmark by writing bench/<name>.py with such a main() and listing it here.
"""
from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "forwarder": "bench.forwarder",     # exchanges/s through the forwarder vs a byte relay
}
