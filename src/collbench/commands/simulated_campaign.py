"""One simulation behind a calibration step: a SimGrid campaign of a few points on a
description, kept in its own folder (resumable), its ok rows read back; a failed point is
one line naming the campaign."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from collbench import points as door
from collbench.campaign import SpecSource
from collbench.catalog.mpi import MpiInstall
from collbench.commands.results_folder import check_platform, measure
from collbench.errors import UserError
from collbench.platforms.model import Cluster
from collbench.platforms.template import cluster_toml
from collbench.store import Store


def simulate(folder: Path, cluster: Cluster, spec: str, what: str, mpi: MpiInstall,
             resume: bool) -> list[dict[str, Any]]:
    """The rows of `spec` simulated on `cluster` in `folder` (`what` names the points in
    messages); every row ok, or one line with the first failure."""
    source = SpecSource.from_text(spec, f"simulated {what} on {cluster.name}")
    # without the [calibration] summary: it holds the date, and a resume compares texts
    text = cluster_toml(cluster.model_copy(update={"calibration": {}}), exact=True)
    check_platform(folder, text, resume)
    with tempfile.TemporaryDirectory(prefix="collbench-calibrate-sim-") as tmp:
        platform = Path(tmp) / "platform.toml"
        platform.write_text(text)
        with open(os.devnull, "w") as quiet:
            measure(source, mpi, folder, resume, platform=str(platform), progress=quiet)
    rows = door.read(Store(folder))
    for r in rows:
        if r["status"] != "ok":
            said = " ".join(str(r["error"] or "no error recorded").split())
            raise UserError(f"simulated {what} at {r['nprocs']} ranks failed: "
                            f"{said[-400:]} (campaign {folder})")
    return rows
