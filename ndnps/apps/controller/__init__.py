"""The share controller, `python -m ndnps.apps.controller` (docs/sharing.md): the jobs sharing
one aggregator ask it before each round; all nodes of a job are answered alike."""
