"""What every plot of a run shares: the series' colours, the fault marks, the legend below the
axes, saving a figure."""
from __future__ import annotations

from pathlib import Path

from .marks import MARK_STYLES, Mark

# colours apart from the marks' (MARK_STYLES): one per job, forwarder process or machine
SERIES_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:brown", "navy",
                  "darkgreen", "goldenrod")
TIME_AXIS = "time since the run started (s)"


def legend(ax, handles: list) -> None:
    """Below the axes, clear of the data and of the marks' labels."""
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15),
              ncol=min(4, len(handles)) or 1, frameon=False)


def mark(ax, marks: list[Mark]) -> list:
    """Vertical lines at the marks (named beside the line while few enough to read); returns
    one legend handle per kind shown."""
    from matplotlib.lines import Line2D
    from matplotlib.transforms import blended_transform_factory
    along = blended_transform_factory(ax.transData, ax.transAxes)
    for m in marks:
        colour = MARK_STYLES[m.kind][0]
        ax.axvline(m.t, color=colour, ls=":", lw=1)
        if len(marks) <= 12:
            ax.text(m.t, 0.98, f" {m.label}", transform=along, rotation=90, va="top",
                    ha="right", fontsize=6, color=colour)
    kinds = dict.fromkeys(m.kind for m in marks)
    return [Line2D([], [], color=MARK_STYLES[k][0], ls=":", label=MARK_STYLES[k][1])
            for k in kinds]


def save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
