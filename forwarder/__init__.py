"""The alias of ndnps.forwarder, kept so that `python -m forwarder` (and `python -m
forwarder.compile`) go on working: the forwarder itself is ndnps/forwarder/. Nothing imports
this package; it holds no code of its own (tests/unit/test_layers.py)."""
