"""bench.gloo, the optional torch.distributed baseline: 2 gloo ranks train exactly what the
single-process reference trains (skipped where torch, the `baselines` extra, is absent)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch build has no gloo backend", allow_module_level=True)

from threadpoolctl import threadpool_limits  # noqa: E402

from bench import gloo  # noqa: E402
from bench.scenario_runs import TrainingRun  # noqa: E402
from ndnps.ml.data import load_dataset  # noqa: E402
from ndnps.ml.train import train_sync_reference  # noqa: E402

pytestmark = pytest.mark.slow

# 400 samples -> 320 training rows, 160 per rank: 5 batches of 32 per epoch
N_FEATURES, HIDDEN, N_SAMPLES, RANKS, EPOCHS, STEPS_PER_EPOCH = 16, [16, 8], 400, 2, 2, 5


def reference() -> np.ndarray:
    """The single-process reference with bench.tcp_ps's defaults (batch 32, lr 0.1, momentum
    0.9, seed 0), flattened; one BLAS thread, as the ranks run."""
    from ndnps.protocol.codec import flatten
    ds = load_dataset("synthetic", 0, n_samples=N_SAMPLES, n_features=N_FEATURES, n_classes=10)
    with threadpool_limits(1):
        ref = train_sync_reference(ds, {"kind": "mlp", "hidden": HIDDEN}, RANKS, EPOCHS, 32, 0.1,
                                   0.9, seed=0)
    assert ref["steps_per_epoch"] == STEPS_PER_EPOCH
    return flatten(ref["params"])


@pytest.mark.timeout(150)
def test_two_gloo_ranks_end_on_the_reference_parameters(tmp_path):
    versions = EPOCHS * STEPS_PER_EPOCH
    # run_training kills every rank still running when it returns or raises (timeout included)
    out = gloo.run_training(tmp_path / "run", N_FEATURES, HIDDEN, N_SAMPLES, RANKS, versions,
                            timeout=100)
    finals = [np.load(out / "final" / f"rank{r}.npy") for r in range(RANKS)]
    np.testing.assert_array_equal(finals[0], finals[1])       # the replicas never drift apart
    # a + b == b + a in float32, so 2 ranks average exactly as the PS's worker-order sum
    np.testing.assert_allclose(finals[0], reference(), rtol=1e-6, atol=1e-7)
    # the metrics read back like the TCP PS's: one record per version at rank 0, every step
    run = TrainingRun(out)
    assert [r["version"] for r in run.ps_versions] == list(range(1, versions + 1))
    assert sorted(run.workers) == ["w1", "w2"]
    assert all([r["step"] for r in recs] == list(range(versions)) for recs in run.workers.values())
    assert run.iteration_median() > 0 and run.compute_median() > 0
