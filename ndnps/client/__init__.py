"""The asyncio NDN client runtime the apps run on, on the project's own NDN base (ndnps.ndn):
the app (app: expressing, serving, pushed Data, management), its face to the forwarder (face:
unix/TCP/UDP, framing, batching, NDNLPv2 link reliability), the pending Interests (pit), the
packets as received and sent (wire), the training's HMAC and digest signers and checks
(security), fetching segmented objects with a window and per-segment loss recovery (fetcher),
signing segments (segments), pacing pushes (pacer), held Interests (pending), the asyncio
timers of sans-I/O exchanges (wakeup) and events (events).  It knows NDN, not the training:
names and messages are the protocol's, above it.  Per-packet (mypyc-compilable): app, face,
pit, wire, security."""
