"""Rules from a model: predictions (`models.predict`) stored as a results folder, then the
same selection and writer as measured data (`tune.select.select_from`, `tune.writer.build`).

    write_predictions(out, launches, extra) -> Store     (also `collbench model predict`)
    predicted_selection(model, request, folder) -> (Selection, Store)
    han_note(selection, request) -> why no coll/han rules file (multi-node), or None

With one predicted "repetition" per point nothing can be tested, so the choice per size is
the fastest predicted algorithm (`significance=False`); "default" is predicted as what
Open MPI 5.0's fixed rules run, so it wins its ties and a rule only leaves it where another
algorithm is predicted faster.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from collbench.analyse.compare import compare
from collbench.campaign import create_folder
from collbench.catalog import ompi_decisions
from collbench.errors import UserError
from collbench.models import predict
from collbench.models.algorithms import ALGORITHMS
from collbench.models.p2p import P2PModel
from collbench.store import Store
from collbench.tune import han
from collbench.tune.select import Options, Selection, select_from
from collbench.version import __version__

# Collectives a rules file can carry and the models cover.
TUNABLE: Final = tuple(c for c in ("allgather", "allreduce", "alltoall", "barrier", "bcast",
                                   "gather", "reduce", "scatter") if c in ALGORITHMS)


def write_predictions(out: Path, launches: Sequence[tuple[str, list[dict[str, Any]]]],
                      extra: dict[str, Any]) -> Store:
    """A results folder holding predicted rows, one launch each (campaign.create_folder)."""
    store = Store(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: exists and is not empty; valid: a new -o folder")
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER", "unknown")
    provenance = dict(extra, created=datetime.now(UTC).isoformat(timespec="seconds"),
                      collbench_version=__version__, host=socket.gethostname(), user=user,
                      kind="model", warnings=["latencies are model predictions, not "
                                              "measurements"])
    try:
        store.lock()
        create_folder(store, {"name": out.resolve().name, "seed": 0, "backend": "model",
                              "kind": "model"},
                      "# predicted by `collbench model predict`: no spec\n",
                      {"launches": []}, provenance)
        for lid, rows in launches:
            store.write_launch(lid, rows, {"status": "ok", "rows": len(rows), "kind": "model",
                                           "p2p_file": extra.get("p2p_file")})
    except OSError as e:
        raise UserError(f"{out}: cannot write: {e.strerror or e}") from None
    return store


def predicted_selection(model: P2PModel, req: predict.Request, folder: Path, model_name: str
                        ) -> tuple[Selection, Store]:
    """Predict into `folder` (new), then select per size as `tune` does for measurements."""
    for coll in req.collectives:
        if coll not in TUNABLE:
            raise UserError(f"--collective {coll!r} is not valid for tune --model; valid: "
                            f"{', '.join(TUNABLE)}")
        if not ompi_decisions.has_fixed_decision(ompi_decisions.KNOWN_VERSIONS[-1], coll):
            raise UserError(f"{coll}: no Open MPI default decision to compare with")
    runs, notes = predict.launches(model, req, folder.name, model_name)
    if not runs:
        raise UserError("tune --model: nothing to predict; " + "; ".join(notes[:3]))
    store = write_predictions(folder, runs, {"p2p_file": model_name,
                                             "p2p_source": dict(model.source)})
    comparison = compare(store, baseline="default", stat="avg")
    ids = {(coll, alg): (0 if alg == "default" else
                         ompi_decisions.ALGORITHMS[coll].index(alg) + 1)
           for coll in req.collectives for alg in ("default", *ALGORITHMS[coll])}
    selection = select_from(comparison, ids, Options(significance=False,
                                                     collectives=req.collectives),
                            "openmpi", predict.DECISIONS_VERSION)
    extra = tuple(dict.fromkeys(notes))
    note = ("chosen from predictions of " + model_name + " (one value per point: the fastest "
            "predicted algorithm per size, untested; validate with `collbench tune "
            "validate`)")
    # keep han_defaults: where "default" was predicted as han's hierarchy, han's rules file
    # hands the top level to coll/tuned, as for measurements (commands.tune_model)
    return replace(selection, tested=False, notes=(note, *selection.notes, *extra)), store


def han_note(selection: Selection, req: predict.Request) -> str | None:
    """Why `tune --model` writes no coll/han rules file for a multi-node regime (None: it
    writes one, or every regime is on one node, where han steps aside)."""
    multi = [n for n in req.nprocs if predict.placement(n, req.nodes, req.ppn)[0] > 1]
    if not multi:
        return None
    if ompi_decisions.series(req.version) != "5.0":
        return (f"no coll/han rules file: Open MPI {req.version} ships coll/han at priority 0, "
                "so coll/tuned's rules reach the whole communicator")
    if han.build(selection) is None:
        return ("no coll/han rules file: the modelled default is coll/tuned's in every "
                "regime (collectives coll/han does not serve, or unequal ranks per node)")
    return None
