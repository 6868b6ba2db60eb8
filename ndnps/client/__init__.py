"""The asyncio NDN client runtime the apps run on: a python-ndn `NDNApp` with our fast packet
paths and NDNLPv2 link reliability (app), fetching segmented objects with a window and
per-segment loss recovery (fetcher), signing and assembling segments (segments), pacing
pushes (pacer), the training's HMAC and digest signers (security), held Interests (pending),
the per-packet wire shortcuts next to python-ndn (wire) and the asyncio timers (estimator).
It knows NDN, not the training: names and messages are the protocol's, above it."""
