"""`python -m ndnps.scenario`: run a whole experiment as processes (ndnps.lab.scenario)."""
import sys

from ndnps.lab.scenario import main

if __name__ == "__main__":
    sys.exit(main())
