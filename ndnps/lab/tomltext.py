"""TOML as the runner writes it: the scenario as run, each job's [training] file, the share
controller's configuration (tomllib reads TOML; nothing in the standard library writes it)."""
from __future__ import annotations

import json


def to_toml(doc: dict) -> str:
    """TOML for the scenario documents we write: top-level scalars, then one [table] per
    dict, whose own dicts are written inline ({ w4 = 3.0 })."""
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        raise TypeError(f"cannot write {v!r} as TOML")

    def tables(v) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    out = "".join(f"{k} = {value(v)}\n" for k, v in doc.items()
                  if not isinstance(v, dict) and not tables(v))
    for k, v in doc.items():
        if isinstance(v, dict):
            out += f"\n[{k}]\n" + "".join(f"{kk} = {value(vv)}\n" for kk, vv in v.items())
        elif tables(v):                  # [[k]]: an array of tables ([[jobs]], [[link]])
            for entry in v:
                out += f"\n[[{k}]]\n" + "".join(f"{kk} = {value(vv)}\n"
                                                 for kk, vv in entry.items())
    return out
