"""`collbench model fit`, `model scaling` and `model jacobi`: models fitted to a results
folder, with their errors. Subcommands of `model` (registered by commands/model.py).
Method: docs/models.md.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, Final

from collbench.errors import UserError, choice_error
from collbench.tables import render

FORMS: Final = {"constant": "constant", "linear": "linear", "quadratic": "quadratic",
                "log": "log", "nlogn": "plogp", "plogp": "plogp", "pmnf": "pmnf"}


def words(text: str) -> list[str]:
    """A comma list as its non-empty items."""
    return [w.strip() for w in text.split(",") if w.strip()]


# --- fit ------------------------------------------------------------------------------------

FIT_COLUMNS: Final = ("collective", "algorithm", "points", "coefficients", "fit_median_pct",
                      "fit_p95_pct", "cv_size_median_pct", "cv_size_p95_pct",
                      "cv_nprocs_median_pct", "cv_nprocs_p95_pct", "p2p_median_pct")


def cmd_fit(args: argparse.Namespace) -> int:
    from collbench.analyse.modeldata import collective_rows, fit_p2p, machine_shape
    from collbench.models.fitted import (
        BASES,
        CollectivePoint,
        fit_algorithm,
        leave_one_out,
        model_errors,
    )
    from collbench.models.networks import network
    from collbench.models.predict import Shape, modelled, topology
    from collbench.store import Store

    if args.basis not in BASES:
        raise choice_error("model fit", "--basis", args.basis, BASES)
    store = Store(args.results)
    shape = machine_shape(store)
    if args.sockets or args.cores_per_socket:
        shape = Shape(args.sockets or shape.sockets, args.cores_per_socket or
                      shape.cores_per_socket)
    rows = [r for r in collective_rows(store, args.stat, args.collective)
            if r.algorithm != "default"]
    skipped = sorted({f"{r.collective}/{r.algorithm}" for r in rows
                      if not modelled(r.collective, r.algorithm)})
    rows = [r for r in rows if modelled(r.collective, r.algorithm)]
    if not rows:
        raise UserError(f"{args.results}: no collective rows with a modelled algorithm "
                        "(forced Open MPI coll/tuned algorithms); valid: a folder measured "
                        "with algorithms other than 'default'")
    p2p, how = _fit_p2p_model(args, store, fit_p2p)
    sends = network(args.network).sends
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        topo = topology(r.nprocs, r.nodes, r.ppn, r.mapping, shape, str(args.results))
        groups.setdefault((r.collective, r.label), []).append(
            CollectivePoint(r.collective, r.algorithm, topo, r.size_bytes, r.value_us,
                            r.segsize))
    out = []
    for (coll, label), pts in sorted(groups.items()):
        where = f"{args.results}: {coll}/{label}"
        try:
            fitted = fit_algorithm(pts, p2p, args.basis, sends)
        except UserError as e:
            raise UserError(f"{where}: {e}") from None
        insample = [abs(fitted.predict(p.topology, p.size_bytes, p.segsize) - p.latency_us)
                    / p.latency_us * 100 for p in pts]
        row: dict[str, Any] = {
            "collective": coll, "algorithm": label, "points": len(pts),
            "coefficients": ", ".join(f"{n}={c:.4g} [{lo:.3g}, {hi:.3g}]" for n, c, (lo, hi)
                                      in zip(fitted.names, fitted.coefs, fitted.ci,
                                             strict=True)),
            "fit_median_pct": _median(insample), "fit_p95_pct": _pct95(insample)}
        for by in ("size", "nprocs"):
            values = {p.size_bytes if by == "size" else p.topology.nprocs for p in pts}
            if len(values) >= 3:
                try:
                    cv = leave_one_out(pts, p2p, by=by, basis=args.basis, sends=sends)
                    row[f"cv_{by}_median_pct"] = cv.median_abs_pct
                    row[f"cv_{by}_p95_pct"] = cv.p95_abs_pct
                except UserError:
                    pass
        if how != "unit costs":
            row["p2p_median_pct"] = model_errors(pts, p2p, sends).median_abs_pct
        out.append(row)
    if args.format == "json":
        print(json.dumps({"p2p": how, "basis": args.basis, "network": args.network,
                          "algorithms": out,
                          "not_modelled": skipped}, indent=1))
        return 0
    print(render(out, FIT_COLUMNS, args.format))
    if args.format == "table":
        print(f"\nhop costs: {how}; basis {args.basis}; network {args.network}. fit = "
              "in-sample, cv_size = leave one size out, cv_nprocs = leave one process "
              "count out (absolute % error); "
              "p2p = the unfitted prediction.")
        if skipped:
            print(f"not modelled: {', '.join(skipped)}")
    return 0


def _fit_p2p_model(args: argparse.Namespace, store: Any, fit_p2p: Any) -> tuple[Any, str]:
    from collbench.models.p2p import LevelModel, P2PModel, Regime
    from collbench.models.p2pfile import read_p2p

    if args.p2p is not None:
        return read_p2p(args.p2p, required_levels=()), str(args.p2p)
    try:
        models, _ = fit_p2p(store)
    except UserError:
        models = {}
    if len(models) == 1:
        (model,) = models.values()
        if set(model.levels) == {"core", "socket", "node"}:
            return model, "fitted to the folder's ping-pongs"
    unit = {lv: LevelModel(lv, (Regime(0, 1.0, 1e9),)) for lv in ("core", "socket", "node")}
    if args.basis == "scaled":
        raise UserError(f"{args.results}: --basis scaled needs hop costs; valid: --p2p FILE "
                        "(or ping-pongs at every level in the folder)")
    return P2PModel(unit), "unit costs"


def _median(values: Sequence[float]) -> float:
    import statistics

    return statistics.median(values)


def _pct95(values: Sequence[float]) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), 95))


# --- scaling --------------------------------------------------------------------------------

SCALING_COLUMNS: Final = ("collective", "algorithm", "placement", "at", "points", "form",
                          "formula", "adj_r2", "aicc", "loo_median_pct", "loo_p95_pct",
                          "best")


def cmd_scaling(args: argparse.Namespace) -> int:
    from collbench.analyse.modeldata import collective_rows
    from collbench.models.scaling import choose, fit_scaling, points_needed
    from collbench.store import Store

    forms = words(args.forms)
    for form in forms:
        if form not in FORMS:
            raise choice_error("model scaling", "--forms", form, FORMS)
    wanted = {FORMS[f] for f in forms}
    what = "process counts" if args.x == "nprocs" else "sizes"
    rows = collective_rows(Store(args.results), args.stat, args.collective)
    if args.algorithm:
        rows = [r for r in rows if r.label == args.algorithm]
    groups: dict[tuple[str, str, str, int], dict[int, float]] = {}
    for r in rows:
        fixed, x = (r.size_bytes, r.nprocs) if args.x == "nprocs" else (r.nprocs,
                                                                        r.size_bytes)
        groups.setdefault((r.collective, r.label, r.mapping_label, fixed), {})[x] = r.value_us
    out: list[dict[str, Any]] = []
    skipped = 0
    short: dict[str, int] = {}  # form -> series with too few points for it
    for (coll, label, placement, fixed), series in sorted(groups.items()):
        xs = sorted(x for x in series if x >= 1)
        for form in wanted:
            if len(xs) < points_needed(form):
                short[form] = short.get(form, 0) + 1
        if len(xs) < 3:
            skipped += 1
            continue
        res = fit_scaling(xs, [series[x] for x in xs], what=args.x, pmnf="pmnf" in wanted)
        fits = [f for f in res.fits if f.name in wanted or
                ("pmnf" in wanted and f.name.startswith("pmnf"))]
        if not fits:
            skipped += 1
            continue
        best = choose(fits)
        at = f"size={fixed}" if args.x == "nprocs" else f"np={fixed}"
        for f in fits if args.all_forms else [best]:
            out.append({"collective": coll, "algorithm": label, "placement": placement,
                        "at": at, "points": len(xs),
                        "form": "nlogn" if f.name == "plogp" else f.name,
                        "formula": f.formula.replace("x", "P" if args.x == "nprocs" else "m"),
                        "adj_r2": f.adj_r2, "aicc": f.aicc,
                        "loo_median_pct": f.loo_median_abs_pct,
                        "loo_p95_pct": f.loo_p95_abs_pct, "best": f is best})
    if not out:
        most = max((len([x for x in s if x >= 1]) for s in groups.values()), default=0)
        raise UserError(f"{args.results}: no series with enough distinct {what} per "
                        "algorithm, placement and " + ("size" if args.x == "nprocs"
                                                       else "process count")
                        + f" for --forms {args.forms} (at most {most} here); "
                        + _needs(sorted(wanted), {}, what).rstrip(".")
                        + "; valid: measure more of them, or ask for a form that needs fewer")
    print(render(out, SCALING_COLUMNS, args.format))
    if args.format == "table":
        print(f"\n{len({(r['collective'], r['algorithm'], r['placement'], r['at']) for r in out})}"
              f" series; {skipped} with fewer than 3 points left out. Best: lowest AICc, the "
              "simplest form within 2 of it preferred (docs/models.md).")
        print(_needs(sorted(wanted), short, what))
    return 0


def _needs(forms: Sequence[str], short: dict[str, int], what: str) -> str:
    """How many distinct x values each asked form needs, why, and where it was left out."""
    from collbench.models.scaling import NEEDS_WHY, points_needed

    shown = {"plogp": "nlogn"}
    needs = ", ".join(f"{shown.get(f, f)} {points_needed(f)}" for f in forms)
    line = f"{what} each form needs: {needs} ({NEEDS_WHY})."
    left = [f"{shown.get(f, f)} in {n} series" for f, n in sorted(short.items())]
    return line + (f" Left out for too few {what}: {', '.join(left)}." if left else "")


# --- jacobi ---------------------------------------------------------------------------------

def cmd_jacobi(args: argparse.Namespace) -> int:
    from collbench.analyse.jacobi import COLUMNS, error_summary, jacobi_points
    from collbench.analyse.modeldata import machine_shape
    from collbench.models.p2pfile import read_p2p
    from collbench.models.predict import Shape
    from collbench.store import Store

    store = Store(args.results)
    shape = machine_shape(store)
    if args.sockets or args.cores_per_socket:
        shape = Shape(args.sockets or shape.sockets, args.cores_per_socket or
                      shape.cores_per_socket)
    points = jacobi_points(store, read_p2p(args.p2p, required_levels=()), shape)
    summary = error_summary(points)
    if args.format == "json":
        print(json.dumps({"p2p": str(args.p2p), "points": [p.as_row() for p in points],
                          "error": summary}, indent=1))
        return 0
    print(render([p.as_row() for p in points], COLUMNS, args.format))
    if args.format == "table" and summary:
        print(f"\nP(L,N) = L^3 N / (T_s + C/B + 4kλ), λ and B of the level the halos cross "
              f"({args.p2p}); error over {int(summary['points'])} runs with N > 1: median "
              f"{summary['median_abs_pct']:.1f} %, largest {summary['max_abs_pct']:.1f} %.")
    return 0
