"""`python -m forwarder`: the alias of `python -m ndnps.forwarder` (ndnps/forwarder/__main__.py),
the same flags, the same exit codes."""
import sys

from ndnps.forwarder.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
