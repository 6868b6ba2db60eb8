"""A pipeline stage, `python -m ndnps.apps.stage` (docs/hetero.md): one device of one virtual
machine, its layers run per micro-batch; its gradient averaged with the same stage of the other
machines by ..common.combine."""
