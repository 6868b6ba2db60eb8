"""Every synchronisation method the lab runs, in the one order the spec, the runner and the
report call them (ndnps.lab.feature says what a feature is): a pipeline sets its training
before a PS-less job's defaults apply; the TCP baseline's checks come first; [share] may change
the jobs before the PS-less checks see them and claims the aggregator before [ina]'s."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .baseline import Baseline
from .feature import Feature
from .ina import InNetwork
from .jobs import Jobs
from .peers import Collective
from .pipeline import PipelineFeature
from .share import Sharing

if TYPE_CHECKING:
    from .config import Scenario

FEATURES: tuple[Feature, ...] = (PipelineFeature(), Baseline(), Sharing(), Collective(),
                                 InNetwork(), Jobs())


def active(sc: "Scenario") -> list[Feature]:
    """The features the scenario uses, in the table's order."""
    return [feature for feature in FEATURES if feature.active(sc)]
