"""`mypyc_attr` for the modules of the compiled core (every package's HOT_MODULES), without
making mypy_extensions a dependency of the pure-Python sources.

mypyc reads the decorator at build time (it sees this name as mypy_extensions.mypyc_attr) and
leaves it out of the compiled module; a pure-Python run calls it: the real one when
mypy_extensions is installed, else a no-op. The fallback lives here, in a module that is never
compiled, because mypyc makes the `else` of `if TYPE_CHECKING` unreachable in what it compiles.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:
    try:
        from mypy_extensions import mypyc_attr
    except ImportError:
        def mypyc_attr(*args: Any, **kwargs: Any) -> Callable[[type], type]:
            return lambda cls: cls

__all__ = ["mypyc_attr"]
