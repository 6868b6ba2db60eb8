"""A peer of PS-less training, `python -m ndnps.apps.peer` (docs/collectives.md): setup, the
version loop, the done markers; its gradients combined by ..common.combine."""
