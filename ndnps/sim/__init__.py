"""The simulator: the real forwarder cores and apps in one process, over a discrete-event
network in virtual time (docs/simulation.md)."""
