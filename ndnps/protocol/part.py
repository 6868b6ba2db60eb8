"""A part of a program's configuration: a small frozen dataclass of the settings one concern
reads (the fetches' transport, the model, the PS's update rule, aggregation, ``[share]``...).
Every setting is a key of a TOML table (``[training]``, ``[share]``: ``Part.TABLE``) and of
the ``--set`` overrides, and a flag of the programs that take flags; a part checks its own
values when it is made, and every error starts with the key as the user wrote it
(``training.lr: must be > 0, got -1``).

Lists are kept as tuples (the part is frozen), written back as lists (``as_table``); a TOML
integer is taken where a number is expected; NaN and the infinities are refused everywhere.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Mapping, NoReturn, Self

from . import names


class ConfigError(ValueError):
    """A bad setting; the message starts with the key (``training.<key>: ...``)."""

    @property
    def key(self) -> str:
        """The key the message names (``training.workers[0]``), without the table."""
        return str(self).partition(":")[0].partition(".")[2]

    def renamed(self, old: str, new: str) -> "ConfigError":
        """The same error naming `new` where it named `old` (a table, or a key written
        under another name: ``training.`` -> ``jobs[1].``, ``share.agree_timeout`` ->
        ``share.timeout``)."""
        text = str(self)
        return ConfigError(new + text[len(old):] if text.startswith(old) else text)


def setting(default: Any, help: str, *, choices: tuple | None = None,
            low: float | None = None, high: float | None = None,
            strict_low: bool = False) -> Any:
    """A part's setting: its default, what it does (the flag's help), and the values it
    takes (`choices`; a number's bounds, `low` excluded when `strict_low`)."""
    meta = {"help": help, "choices": choices, "low": low, "high": high, "strict_low": strict_low}
    return field(default=tuple(default) if isinstance(default, list) else default,
                 metadata=meta)


@dataclass(frozen=True)
class Part:
    """The settings of one concern, checked when made (ConfigError naming the key)."""
    TABLE: ClassVar[str] = "training"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = _coerce(getattr(self, f.name), str(f.type))
            _check(f"{self.TABLE}.{f.name}", value, str(f.type), f.metadata)
            if isinstance(value, list):
                value = tuple(value)
            object.__setattr__(self, f.name, value)
        self.check()

    def check(self) -> None:
        """The part's own checks across its settings (ConfigError naming the key)."""

    def fail(self, key: str, why: str) -> NoReturn:
        raise ConfigError(f"{self.TABLE}.{key}: {why}")

    def check_id(self, key: str, value: str) -> None:
        """`value` is one name component (a node's, an app's); else ConfigError."""
        try:
            names.check_id(value, key)
        except names.BadName as e:
            self.fail(key, str(e))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Self:
        """The part made of the table's keys that are its own (the others are not read)."""
        own = cls.keys()
        return cls(**{k: v for k, v in table.items() if k in own})

    def as_table(self) -> dict[str, Any]:
        """The settings as a TOML table holds them (lists, not tuples)."""
        return {f.name: _listed(getattr(self, f.name)) for f in fields(self)}


def _listed(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


_TYPE_NAMES = {"str": "a string", "int": "an integer", "float": "a number",
               "bool": "true or false", "tuple[str, ...]": "a list of strings",
               "tuple[int, ...]": "a list of integers", "tuple[float, ...]": "a list of numbers"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _coerce(value: Any, t: str) -> Any:
    """TOML integers are fine where numbers are expected."""
    if t == "float" and _is_int(value):
        return float(value)
    if t == "tuple[float, ...]" and isinstance(value, (list, tuple)):
        return [float(v) if _is_int(v) else v for v in value]
    return list(value) if isinstance(value, tuple) else value


def _check(key: str, value: Any, t: str, meta: Mapping[str, Any]) -> None:
    ok = {
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": _is_int(value),
        "float": _is_number(value),
        "tuple[str, ...]": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "tuple[int, ...]": isinstance(value, list) and all(map(_is_int, value)),
        "tuple[float, ...]": isinstance(value, list) and all(map(_is_number, value)),
    }[t]
    if not ok:
        raise ConfigError(f"{key}: expected {_TYPE_NAMES[t]}, got {value!r}")
    # nan and inf (TOML's and float()'s) would slip past every bound below
    if not all(map(math.isfinite, value if t == "tuple[float, ...]" else
                   [value] if t == "float" else [])):
        what = "finite numbers" if t == "tuple[float, ...]" else "a finite number"
        raise ConfigError(f"{key}: expected {what}, got {value!r}")
    if meta.get("choices") and value not in meta["choices"]:
        raise ConfigError(f"{key}: must be one of {', '.join(meta['choices'])}, got {value!r}")
    low, high = meta.get("low"), meta.get("high")
    if low is not None and (value < low or (meta.get("strict_low") and value == low)):
        raise ConfigError(f"{key}: must be {'>' if meta.get('strict_low') else '>='} "
                          f"{low}, got {value!r}")
    if high is not None and value > high:
        raise ConfigError(f"{key}: must be <= {high}, got {value!r}")
