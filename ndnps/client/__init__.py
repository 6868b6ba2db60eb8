"""The asyncio NDN client runtime the apps run on, on the project's own NDN base (ndnps.ndn):
the app (app: expressing, serving, pushed Data, management), its face to the forwarder (face:
unix/TCP/UDP, framing, batching, NDNLPv2 link reliability), the pending Interests (pit), the
packets as received and sent (wire), the training's HMAC and digest signers and checks
(security), how an Interest fails (errors), fetching segmented objects with a window and
per-segment loss recovery (fetcher), signing segments (segments), pacing pushes (pacer), held
Interests (pending), the asyncio timers of sans-I/O exchanges (wakeup) and events (events).
It knows NDN, not the training: names and messages are the protocol's, above it."""

from ndnps.ndn import COMPILED as _BASE_COMPILED
from ndnps.ndn.native import guard

# the modules on the per-packet path, compiled with mypyc at install with the base's (setup.py)
HOT_MODULES = ("ndnps.client.wire", "ndnps.client.security", "ndnps.client.pit",
               "ndnps.client.face", "ndnps.client.app", "ndnps.client.segments")
COMPILED = guard(HOT_MODULES) and _BASE_COMPILED
