"""Where the k aggregators go: the greedy search — start from none; each
round, solve the LP for the chosen set plus each unchosen candidate and keep the candidate with
the best γ — and the baselines it is judged against: random sets (mean of 20), the PS's edge
alone (no aggregator), every candidate aggregating (the upper bound), and exhaustive search
where C(candidates, k) is small enough."""
from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass, field

from .lp import Problem, Solution, solve

EXHAUSTIVE_LIMIT = 5000          # subsets: exhaustive search only up to this many
RANDOM_DRAWS = 20


@dataclass
class Placement:
    best: Solution                                       # at k
    by_k: dict[int, Solution] = field(default_factory=dict)   # greedy's set at each k ≤ K

    @property
    def gamma_by_k(self) -> dict[int, float]:
        return {k: s.gamma for k, s in self.by_k.items()}


def greedy(problem: Problem, k: int) -> Placement:
    """The greedy placement of up to `k` aggregators (fewer when there are fewer candidates).
    Ties go to the candidate first by name, so a run is reproducible."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    chosen: list[str] = []
    left = sorted(problem.candidates())
    by_k = {0: solve(problem, [])}
    while len(chosen) < k and left:
        best: Solution | None = None
        for cand in left:
            sol = solve(problem, chosen + [cand], tidy=False)
            if best is None or sol.gamma > best.gamma + 1e-9:
                best = sol
        assert best is not None
        chosen = best.aggregators
        left = [c for c in left if c not in chosen]
        by_k[len(chosen)] = solve(problem, chosen)          # its plan, tidied
    return Placement(by_k[len(chosen)], by_k)


def exhaustive(problem: Problem, k: int) -> Solution | None:
    """The best set of exactly min(k, candidates) aggregators by trying every one, or None
    when there are more than EXHAUSTIVE_LIMIT sets."""
    cands = sorted(problem.candidates())
    k = min(k, len(cands))
    if math.comb(len(cands), k) > EXHAUSTIVE_LIMIT:
        return None
    best: Solution | None = None
    for subset in itertools.combinations(cands, k):
        sol = solve(problem, list(subset), tidy=False)
        if best is None or sol.gamma > best.gamma + 1e-9:
            best = sol
    return solve(problem, best.aggregators) if best is not None else None


def random_mean(problem: Problem, k: int, draws: int = RANDOM_DRAWS, seed: int = 0) -> float:
    """Mean γ of `draws` sets of k candidates drawn at random (seeded: reproducible)."""
    cands = sorted(problem.candidates())
    rng = random.Random(seed)
    return statistics.mean(solve(problem, rng.sample(cands, min(k, len(cands))),
                                 tidy=False).gamma for _ in range(draws))


def baselines(problem: Problem, k: int) -> dict[str, float | None]:
    """γ of each baseline at k (exhaustive: None where too many sets)."""
    ex = exhaustive(problem, k)
    return {"random": random_mean(problem, k),
            "edge_only": solve(problem, [], tidy=False).gamma,
            "all": solve(problem, problem.candidates(), tidy=False).gamma,
            "exhaustive": ex.gamma if ex is not None else None}
