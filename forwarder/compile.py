"""`python -m forwarder.compile`: the alias of `python -m ndnps.forwarder.compile` (the compiled
core rebuilt in place, or removed with --clean)."""
import sys

from ndnps.forwarder.compile import main

if __name__ == "__main__":
    sys.exit(main())
