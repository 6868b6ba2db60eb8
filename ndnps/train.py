"""`python -m ndnps.train`: the single-process reference trainer (ndnps.ml.train)."""
import sys

from ndnps.ml.train import main

if __name__ == "__main__":
    sys.exit(main())
