"""`python -m ndnps.demo`: one Interest/Data exchange through a forwarder (ndnps.lab.demo)."""
import sys

from ndnps.lab.demo import main

if __name__ == "__main__":
    sys.exit(main())
