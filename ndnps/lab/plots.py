"""The run's plots (PNG): loss and accuracy, iteration time, bytes per link, the PIT; a
feature adds its own (ndnps.lab.feature: `plot`)."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from .features import active
from .figures import SERIES_COLOURS, TIME_AXIS, legend, mark, save
from .marks import Mark, fault_marks, read_summary
from .series import iterations, ps_series
from .traces import link_directions, node_of, read_tsv, trace_stems


def plot_all(run_dir: Path, scenario: Any) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    made = []
    runs = {job.who.ps: ps_series(run_dir, job.recorder) for job in scenario.all_jobs}
    several = len(runs) > 1
    marks = fault_marks(read_summary(run_dir), runs[scenario.training.who.ps].records)
    time_axis = TIME_AXIS

    if not any(feature.draws_loss for feature in active(scenario)):
        made.append(_loss_accuracy(runs, scenario, marks, plots / "loss_accuracy.png"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    all_iters = []
    for ps, run in runs.items():
        iters = iterations(run.versions)
        all_iters += [dt for _, dt in iters]
        # each version's time over the span it took: a PS restart's pause is one long step
        ax.step([t for t, _ in iters], [dt * 1000 for _, dt in iters], where="pre", lw=0.8,
                label=f"{ps}: a version's time since the one before" if several else
                "iteration: a version's time since the one before")
    if all_iters and max(all_iters) > 20 * statistics.median(all_iters):
        ax.set_yscale("symlog", linthresh=max(1e-3, statistics.median(all_iters)) * 1000)
        # (a restart's pause beside ms-long versions)
    ax.set_xlabel(time_axis)
    ax.set_ylabel("iteration time (ms)")
    legend(ax, [*ax.get_lines(), *mark(ax, marks)])
    ax.set_title(f"{scenario.name}: iteration time per version")
    fig.tight_layout()
    made.append(save(fig, plots / "iteration_time.png"))

    made.append(_plot_links(run_dir, scenario, plots / "link_bytes.png"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, stem in enumerate(trace_stems(run_dir, "tables")):
        rows = read_tsv(run_dir / "traces" / f"{stem}-tables.tsv")
        ts = [float(r["Time"]) for r in rows]
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]      # one per forwarder process
        ax.plot(ts, [int(r["Pit"]) for r in rows], color=colour, label=f"{stem} PIT")
        ax.plot(ts, [int(r["PersistentFaces"]) for r in rows], color=colour, ls="--",
                label=f"{stem} persistent faces")
    ax.set_xlabel(time_axis)
    ax.set_ylabel("entries")
    ax.set_title(f"{scenario.name}: ordinary and persistent PIT")
    legend(ax, [*ax.get_lines(), *mark(ax, marks)])
    fig.tight_layout()
    made.append(save(fig, plots / "pit_size.png"))
    for feature in active(scenario):
        made += feature.plot(run_dir, scenario, plots)
    return made


MAX_LINKS = 48


def _plot_links(run_dir: Path, scenario: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    directions = link_directions(run_dir)
    forwarders = {node_of(s) for s in trace_stems(run_dir, "rates")}
    colours = {"forwarder → app": "tab:blue", "app → forwarder": "tab:orange",
               "forwarder → forwarder": "tab:green"}

    def kind(a: str, b: str) -> str:
        if node_of(a) in forwarders and node_of(b) in forwarders:
            return "forwarder → forwarder"
        return "forwarder → app" if node_of(a) in forwarders else "app → forwarder"

    # a datacentre's thousands of links would make a figure no one reads (and minutes to
    # draw): the busiest MAX_LINKS directions, said in the title
    shown = set(sorted(directions, key=directions.__getitem__, reverse=True)[:MAX_LINKS])
    # the two directions of a link side by side, links in name order
    keys = sorted(shown, key=lambda ab: (sorted(ab), ab), reverse=True)
    fig, ax = plt.subplots(figsize=(8, max(3, 0.3 * len(keys) + 1.6)))
    ax.barh([f"{a} → {b}" for a, b in keys], [directions[k] / 1e6 for k in keys],
            color=[colours[kind(*k)] for k in keys])
    ax.set_xlabel("MB sent (NDN packets on the face, management excluded)")
    busiest = f" (the busiest {len(keys)} of {len(directions)})" \
        if len(keys) < len(directions) else ""
    ax.set_title(f"{scenario.name}: bytes per link and direction{busiest}")
    ax.tick_params(axis="y", labelsize=7)
    legend(ax, [Patch(color=colours[k], label=k)
                 for k in dict.fromkeys(kind(*k) for k in keys)])
    fig.tight_layout()
    return save(fig, path)


def _loss_accuracy(runs: dict, scenario: Any, marks: list[Mark], path: Path) -> Path:
    """Each job's training loss and test accuracy over the run's time."""
    import matplotlib.pyplot as plt
    several = len(runs) > 1
    time_axis = TIME_AXIS
    fig, ax1 = plt.subplots(figsize=(8, 4.5))
    ax2 = ax1.twinx()
    lines = []
    for i, (ps, run) in enumerate(runs.items()):
        # one job: loss red, accuracy blue; several: a colour per job, accuracy dashed
        colours = (SERIES_COLOURS[i % len(SERIES_COLOURS)],) * 2 if several else \
            ("tab:red", "tab:blue")
        job = f" ({ps})" if several else ""
        versions = run.versions
        loss = [r.get("loss", float("nan")) for r in versions]     # (NaN: not plotted)
        lines += ax1.plot([r["t"] for r in versions], loss, color=colours[0],
                          label=f"training loss{job}")
        acc = [(r["t"], r["accuracy"]) for r in versions if r.get("accuracy") is not None]
        lines += ax2.plot([a for a, _ in acc], [b for _, b in acc], color=colours[1],
                          ls="--" if several else "-", label=f"test accuracy{job}")
    ax1.set_xlabel(time_axis)
    ax1.set_ylabel("loss")
    ax2.set_ylabel("test accuracy")
    legend(ax1, lines + mark(ax1, marks))
    ax1.set_title(f"{scenario.name}: loss and accuracy")
    fig.tight_layout()
    return save(fig, path)
