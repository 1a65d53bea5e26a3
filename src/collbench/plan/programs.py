"""Workloads: launches of a program instead of the kernel."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from collbench.catalog.algorithms import DEFAULT
from collbench.errors import UserError
from collbench.plan.model import MAX_LAUNCHES, NONE, Launch, Point, ProgramRun
from collbench.plan.variants import _combinations
from collbench.sizes import expand_sizes, parse_size
from collbench.spec import Spec
from collbench.spec.workload import APPS, Workload


def _program_excluded(criteria: list[dict[str, list[Any]]], at: dict[str, Any]) -> bool:
    return any(all(at.get(key) in values for key, values in crit.items()) for crit in criteria)


def program_launches(spec: Spec, source: str, cores: int) -> list[Launch]:
    """One launch per combination of the launch dimensions (nprocs, map_by, bind_to,
    mca.sweep, workload.params) and repetition, each with one point: the program's row
    (or one per message size, for an app printing a line per size).
    A built-in app's process grid (dims) must hold nprocs: refused here, before anything
    runs."""
    from collbench.spec.workload import grid_problem, param_text

    wl = spec.workload
    assert wl is not None
    combos = math.prod(len(v) for v in spec.launch_dimensions().values())
    if combos * spec.run.repetitions > MAX_LAUNCHES:
        raise UserError(f"{source}: the plan would hold {combos * spec.run.repetitions:,} "
                        f"launches; collbench plans at most {MAX_LAUNCHES:,}: sweep fewer "
                        "params, process counts or repetitions per campaign")
    criteria = [entry.criteria() for entry in spec.exclude]
    dims_key = wl.app is not None and APPS[wl.app].dims
    out: list[Launch] = []
    for repetition in range(spec.run.repetitions):
        for dims in _combinations(spec):
            nprocs = dims["nprocs"]
            values = {k: param_text(dims[k]) for k in wl.params}
            if dims_key and "dims" in values:
                problem = grid_problem(values["dims"], nprocs)
                if problem:
                    raise UserError(f"{source}: workload.params.dims: {problem}; give dims "
                                    "whose product is nprocs (zip them: zip = [[\"nprocs\", "
                                    "\"dims\"]]) or exclude the pair")
            at = {**dims, **values, "repetition": repetition}
            if "size" in values:  # exclude's size is the program's size param, in bytes
                at["size"] = _int_param(values, "size")
            if _program_excluded(criteria, at):
                continue
            out.append(_program_launch(spec, dims, values, repetition, cores, source))
    return out


def _int_param(values: Mapping[str, str], key: str, default: int = 0) -> int:
    text = values.get(key, str(default)).strip()
    try:
        return parse_size(text)
    except ValueError:
        return 0


def _points(wl: Workload, values: dict[str, str], source: str) -> tuple[Point, ...]:
    """The launch's points: the program's one row, or (an app printing a line per message
    size) one per size of its min:max range."""
    app = APPS.get(wl.app or "")
    (it_key, wu_key), (it, wu) = (app.counts, app.count_defaults) if app else (
        ("iterations", "warmup"), (0, 0))
    iterations, warmup = _int_param(values, it_key, it), _int_param(values, wu_key, wu)
    if app is None or app.lines is None:
        return (Point(wl.label(), DEFAULT, None, 0, 0, _int_param(values, "size"),
                      iterations, warmup),)
    low, high = _int_param(values, "min", app.lines.low), _int_param(values, "max",
                                                                      app.lines.high)
    if not low <= high <= app.lines.limit:
        raise UserError(f"{source}: workload.params: min = {low}, max = {high}; valid: "
                        f"min <= max <= {app.lines.limit} (bytes)")
    return tuple(Point(wl.label(), DEFAULT, None, 0, 0, size, iterations, warmup)
                 for size in expand_sizes(f"{low}:{high}"))


def _program_launch(spec: Spec, dims: dict[str, Any], values: dict[str, str],
                    repetition: int, cores: int, source: str) -> Launch:
    wl = spec.workload
    assert wl is not None
    nprocs = dims["nprocs"]
    swept = {k: v for k, v in dims.items() if k in spec.mca.sweep}
    mca = {**spec.mca.fixed, **swept}
    name = wl.label()
    points = _points(wl, values, source)
    app = APPS.get(wl.app or "")
    program = ProgramRun(name, tuple(wl.arguments(values, nprocs)),
                         tuple(sorted(values.items())),
                         tuple(wl.metric_patterns().items()), wl.primary(),
                         lines=app is not None and app.lines is not None)
    oversubscribe = (nprocs > cores if spec.run.oversubscribe == "auto"
                     else bool(spec.run.oversubscribe))
    return Launch(
        launch_id="", repetition=repetition, nprocs=nprocs, mapping=dims["map_by"],
        binding=dims["bind_to"], oversubscribe=oversubscribe, mca=tuple(sorted(mca.items())),
        env=(), swept=tuple(sorted(swept.items())), selection=NONE, points=points,
        timeout_s=spec.run.timeout, validate=False, samples=False, program=program,
        ppn=dims.get("ppn"))
