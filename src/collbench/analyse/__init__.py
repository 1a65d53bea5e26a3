"""Analysis of stored measurements: ratios to a baseline, best algorithm per size,
confidence intervals and significance across repetitions, stability warnings."""

from collbench.analyse.compare import (
    Best,
    Comparison,
    PointStat,
    RatioStat,
    StabilityWarning,
    WinRange,
    algorithm_label,
    compare,
)

__all__ = ["Best", "Comparison", "PointStat", "RatioStat", "StabilityWarning", "WinRange",
           "algorithm_label", "compare"]
