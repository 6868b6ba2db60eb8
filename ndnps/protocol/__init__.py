"""The training protocol: every name built and parsed in one place (names), the control and
tensor messages (messages) over the tensor codec — raw bytes behind a small msgpack header
(codec) — and the training's parameters, validated with errors that name the key: the
[training] table's parts (parts, on part), the whole table and each program's config of it
(config), [share] (sharing).
No I/O: the apps and the experiment runner both read it."""

from ndnps.ndn import COMPILED as _BASE_COMPILED
from ndnps.ndn.native import guard

# every packet's name is built or parsed here: compiled with mypyc at install (setup.py)
HOT_MODULES = ("ndnps.protocol.names",)
COMPILED = guard(HOT_MODULES) and _BASE_COMPILED
