"""``[share]``: several jobs sharing one aggregating forwarder (docs/sharing.md), one model for
the scenario's table (ndnps.lab.share) and the share controller's (ndnps.apps.controller), and
the names both check against: the policies and the share controller's scores.

    [share]
    policy = "time-division"   # a share controller decides each round;
                               # "always-wait": a FIFO lock (a round waits for the aggregators);
                               # "spatial": each job 1/J of the slots, no controller (ATP-style);
                               # "never": no in-network aggregation (PS sums; peers: ring)
    score = "time-saved"       # time-division's CalcScore: | "shortest-round"
    at = "root"                # the aggregating forwarder (the lab's default: a star's fwd,
                               # a tree's root)
    slots = 64                 # its pool: made to fit one job's round
    slot_timeout = 2.0         # s a slot waits for its contributors (an unclean round's hold)
    agree_timeout = 1.0        # the controller: s for all of a job's nodes to ask a round
                               # (`timeout`, its older name, is read too)
    backoff = 0.05             # ... s after an abort, doubling
    tries = 4                  # ... aborts of a round before it goes the ordinary way
    hold_limit = 30.0          # ... a holder that never says done is released after this
    name = "ctl"               # the controller's node name: it serves /<name>/share
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .part import ConfigError, Part, setting

# the policies a share controller runs (ndnps.exchanges.sharing.agreement), and every policy a
# scenario's [share] may name (the others need no controller)
CONTROLLED_POLICIES = ("time-division", "always-wait")
SHARE_POLICIES = CONTROLLED_POLICIES + ("spatial", "never")
# time-division's CalcScore, by name (ndnps.exchanges.sharing.decision.SCORES: the functions)
TIME_SAVED, SHORTEST_ROUND = "time-saved", "shortest-round"
SCORE_NAMES = (TIME_SAVED, SHORTEST_ROUND)
# older names of keys, still read: {older: current}
ALIASES = {"timeout": "agree_timeout"}


@dataclass(frozen=True)
class ShareConfig(Part):
    """[share], checked alike wherever it is read (errors name `share.<key>`)."""
    TABLE = "share"
    policy: str = setting("time-division", "who uses the aggregators, round by round",
                          choices=SHARE_POLICIES)
    score: str = setting(TIME_SAVED, "time-division's CalcScore", choices=SCORE_NAMES)
    at: str = setting("", "the aggregating forwarder (empty: the lab's default)")
    slots: int = setting(64, "the aggregator's pool of slots", low=1, high=1 << 20)
    slot_timeout: float = setting(2.0, "s a slot waits for its contributors", low=0.01,
                                  high=60.0)
    agree_timeout: float = setting(1.0, "s for every node of a job to ask a round, then the "
                                   "controller aborts it and the nodes retry", low=0.01,
                                   high=60.0)
    backoff: float = setting(0.05, "s after an abort, doubling per abort", low=0.001,
                             high=10.0)
    tries: int = setting(4, "aborts of one round before it goes the ordinary way", low=1,
                         high=100)
    hold_limit: float = setting(30.0, "a holder that never says done is released after this "
                                "(s)", low=0.1, high=3600.0)
    name: str = setting("ctl", "the share controller's node name: it serves /<name>/share")

    def check(self) -> None:
        if self.at:
            self.check_id("at", self.at)
        self.check_id("name", self.name)

    @property
    def controlled(self) -> bool:
        """A share controller decides the rounds (the policy is one it runs)."""
        return self.policy in CONTROLLED_POLICIES


def read_share(table: Any) -> ShareConfig:
    """[share] as written: unknown keys refused, an older key read under its current name,
    every error naming the key the user wrote."""
    if not isinstance(table, Mapping):
        raise ConfigError("share: expected a table")
    known = ShareConfig.keys()
    values: dict[str, Any] = {}
    written: dict[str, str] = {}            # current name -> the name the user wrote
    for key, value in table.items():
        name = ALIASES.get(key, key)
        if name not in known:
            raise ConfigError(f"share.{key}: unknown key (known: {', '.join(known)})")
        if name in values:
            older = key if key != name else written[name]
            raise ConfigError(f"share.{older}: the older name of share.{name}: give one")
        values[name], written[name] = value, key
    try:
        return ShareConfig(**values)
    except ConfigError as e:
        key = e.key
        if key in written and written[key] != key:
            raise e.renamed(f"share.{key}", f"share.{written[key]}") from None
        raise
