"""Schedulers and stop rules. They see jobs only through `SchedulerJobView`.

Each module registers the names it answers to (`register_base`, `register_detector`), and
`registry.MODULES` declares every module that does, so importing the package knows them all.
"""

from .bocpd import BOCPD
from .composed import ComposedPolicy
from .cusum import CUSUM
from .decline_test import DeclineTest
from .eval_sched import EvalSched
from .eval_stop import EvalStop
from .fifo import FIFO
from .las import LAS
from .loss_aware import LossAware
from .loss_plateau import LossPlateau
from .material_decline import MaterialDecline
from .median_pruner import MedianPruner
from .patience import Patience
from .peer_prior import PeerPrior
from .registry import (
    BASES,
    DETECTORS,
    PolicyNameError,
    make_base,
    make_detector,
    make_policy,
    parse_policy,
    register_base,
    register_detector,
)
from .sjf_est import SJFEst
from .srtf_est import SRTFEst
from .stop_at import StopAt
from .trend_test import TrendTest

__all__ = [
    "BASES", "BOCPD", "CUSUM", "DETECTORS", "ComposedPolicy", "DeclineTest", "EvalSched",
    "EvalStop", "FIFO", "LAS", "LossAware", "LossPlateau", "MaterialDecline", "MedianPruner",
    "Patience", "PeerPrior", "PolicyNameError", "SJFEst", "SRTFEst", "StopAt", "TrendTest",
    "make_base", "make_detector", "make_policy", "parse_policy", "register_base",
    "register_detector",
]
