"""The bad-input side of `python -m bench faults`: the hypothesis fuzz test of the forwarder
core (tests/unit/test_fw_fuzz.py, in-process, its packets counted), the atheris harness
(fuzz/fuzz_forwarder.py, coverage-guided) and every test whose name says bad input
(BAD_INPUT_K), each run and summed up as one result.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from unittest import mock

from bench.common import ROOT, env

ATHERIS_RUNS, ATHERIS_QUICK_RUNS = 1_000_000, 20_000
# A run that instruments the forwarder core reaches ~600-700 edges within 20,000 inputs; ~100
# means atheris did not instrument it (e.g. an import hook ahead of atheris's loads it)
ATHERIS_MIN_EDGES = 400
# tests about bad input, by name (pytest -k), across tests/ (slow ones included)
BAD_INPUT_K = ("malformed or bad or forged or garbage or truncat or oversize or fuzz or "
               "reject or nested or flood or corrupt or critical or non_local or localhost or "
               "unsolicited or duplicat or quota or rate_limit or never_raises")


def hypothesis_fuzz() -> dict:
    """tests/unit/test_fw_fuzz.py's property test, in-process, counting packets fed."""
    from hypothesis import settings
    settings.register_profile("bench-faults", database=None)
    settings.load_profile("bench-faults")
    from fuzz import harness
    count = {"packets": 0, "examples": 0}
    feed, init = harness.Harness.feed, harness.Harness.__init__

    def counting_feed(self, selector, wire):
        count["packets"] += 1
        return feed(self, selector, wire)

    def counting_init(self):
        count["examples"] += 1
        init(self)

    with mock.patch.object(harness.Harness, "feed", counting_feed), \
            mock.patch.object(harness.Harness, "__init__", counting_init):
        t0 = time.monotonic()
        error = None
        try:
            sys.path.insert(0, str(ROOT / "tests" / "unit"))
            import test_fw_fuzz
            test_fw_fuzz.test_no_exception_escapes_and_tables_stay_bounded()
        except BaseException as e:                   # noqa: BLE001 - reported as the finding
            error = f"{type(e).__name__}: {str(e)[:300]}"
    return {"examples": count["examples"], "packets": count["packets"], "error": error,
            "seconds": round(time.monotonic() - t0, 1), "ok": error is None}


def atheris_fuzz(runs: int, base: Path) -> dict:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return {"skipped": "atheris not installed (pip install atheris)", "ok": None}
    corpus = base / "atheris-corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(ROOT / "fuzz" / "fuzz_forwarder.py"), f"-runs={runs}",
            "-max_len=9000", str(corpus)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, cwd=str(base),
                           env={**os.environ, **env()}, timeout=max(600, runs / 200))
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = None, (e.stdout or b"").decode(errors="replace") + \
            (e.stderr or b"").decode(errors="replace")
    done = re.findall(r"Done (\d+) runs in (\d+) second", text)
    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text)
    crash = re.search(r"(Uncaught Python exception.*|==\d+== ERROR.*)", text)
    res: dict[str, Any] = {"runs_requested": runs, "runs": int(done[-1][0]) if done else None,
           "exit": rc, "seconds": round(time.monotonic() - t0, 1),
           "edges": int(cov[-1][0]) if cov else None,
           "corpus": int(cov[-1][2]) if cov else None,
           "crash": crash.group(1)[:300] if crash else None,
           "command": f"python fuzz/fuzz_forwarder.py -runs={runs} -max_len=9000 CORPUS_DIR"}
    res["ok"] = rc == 0 and res["runs"] == runs and not crash \
        and (res["edges"] or 0) >= ATHERIS_MIN_EDGES
    if not res["ok"]:
        res["tail"] = text[-1500:]
    return res


def bad_input_tests(base: Path) -> dict:
    xml = base / "bad-input.xml"
    argv = [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider",
            "-k", BAD_INPUT_K, f"--junitxml={xml}"]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=str(ROOT),
                       env={**os.environ, **env()}, timeout=1800)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed = []
    try:
        root = ET.parse(xml).getroot()
        for suite in root.iter("testsuite"):
            for k in counts:
                counts[k] += int(suite.get(k, 0))
        for tc in root.iter("testcase"):
            if tc.find("failure") is not None or tc.find("error") is not None:
                failed.append(f"{tc.get('classname')}::{tc.get('name')}")
    except (OSError, ET.ParseError):
        failed.append(f"no report; pytest exit {p.returncode}: {p.stdout[-500:]}")
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {**counts, "passed": passed, "failed": failed, "exit": p.returncode,
            "seconds": round(time.monotonic() - t0, 1), "k": BAD_INPUT_K,
            "ok": p.returncode == 0 and not failed}
