"""Schedulers and stop rules. They see jobs only through `SchedulerJobView`."""

from .composed import ComposedPolicy
from .eval_sched import EvalSched
from .eval_stop import EvalStop
from .fifo import FIFO
from .loss_aware import LossAware
from .loss_plateau import LossPlateau
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

__all__ = [
    "BASES", "DETECTORS", "ComposedPolicy", "EvalSched", "EvalStop", "FIFO", "LossAware",
    "LossPlateau", "PolicyNameError", "SJFEst", "SRTFEst", "StopAt", "make_base", "make_detector",
    "make_policy", "parse_policy", "register_base", "register_detector",
]

# Detectors beyond the paper; each module registers its name prefix on import.
from .bocpd import BOCPD  # noqa: E402
from .cusum import CUSUM  # noqa: E402
from .decline_test import DeclineTest  # noqa: E402
from .material_decline import MaterialDecline  # noqa: E402
from .median_pruner import MedianPruner  # noqa: E402
from .patience import Patience  # noqa: E402
from .peer_prior import PeerPrior  # noqa: E402
from .trend_test import TrendTest  # noqa: E402

__all__ += ["BOCPD", "CUSUM", "DeclineTest", "MaterialDecline", "MedianPruner", "Patience",
            "PeerPrior", "TrendTest"]
