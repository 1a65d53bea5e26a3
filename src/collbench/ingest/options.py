"""What an ingested file does not say (process count, placement, algorithm, MPI), as the
command line gives it, and its checks."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Final

from collbench.errors import UserError, choice_error
from collbench.ingest.common import KNOWN_NAMES

FORMATS: Final = ("auto", "osu", "imb", "csv")


@dataclass(frozen=True)
class IngestOptions:
    """What the file does not say. Checked by ingest_files (see check_options)."""

    collective: str | None = None  # required when the OSU title does not say; IMB: a filter
    algorithm: str | None = None  # None: "default", or the name of the id --mca forced
    nprocs: int | None = None  # OSU: required; IMB: must match the job size it prints
    nodes: int = 1
    ppn: int | None = None  # default nprocs / nodes
    mapping: str | None = None
    binding: str | None = None
    mca: tuple[tuple[str, str], ...] = ()
    mpi: str = "unknown"
    mpi_version: str = "unknown"
    repetition: int = 0
    campaign: str | None = None  # default: the output folder's campaign, or its name
    format: str = "auto"
    # OSU options the file's `### cmd:` line does not give: test_calls (-t), iterations
    # (-i), warmup (-x). Left out of the hash when empty: older ids stay the same.
    params: tuple[tuple[str, int], ...] = ()

    def normalized(self) -> dict[str, Any]:
        """The options as stored and hashed: same meaning, same bytes."""
        d = asdict(self)
        d["mca"] = dict(sorted(self.mca))
        if self.params:
            d["params"] = dict(sorted(self.params))
        else:
            del d["params"]
        return d


def check_options(opts: IngestOptions) -> None:
    from collbench.spec.fields import BIND_TO, MAP_BY  # the spec's choices: one vocabulary

    if opts.format not in FORMATS:
        raise choice_error("--format", "format", opts.format, FORMATS)
    if opts.collective is not None and opts.collective not in KNOWN_NAMES:
        raise choice_error("--collective", "collective", opts.collective, KNOWN_NAMES)
    for flag, number, low in (("--nprocs", opts.nprocs, 1), ("--nodes", opts.nodes, 1),
                              ("--ppn", opts.ppn, 1), ("--repetition", opts.repetition, 0)):
        if number is not None and number < low:
            raise UserError(f"{flag}: {number} is not valid; expected a whole number >= {low}")
    if opts.mapping is not None and opts.mapping not in MAP_BY:
        raise choice_error("--mapping", "mapping", opts.mapping, MAP_BY)
    if opts.binding is not None and opts.binding not in BIND_TO:
        raise choice_error("--binding", "binding", opts.binding, BIND_TO)
    if opts.algorithm is not None and not opts.algorithm.strip():
        raise UserError("--algorithm: '' is not valid; expected an algorithm name")
    keys = [k for k, _ in opts.mca]
    for key, value in opts.mca:
        if key.upper().startswith("OMPI_MCA_") or not re.fullmatch(r"[A-Za-z0-9_]+", key):
            raise UserError(f"--mca {key}={value}: {key!r} is not an MCA parameter name "
                            "(letters, digits and '_', without OMPI_MCA_)")
        if keys.count(key) > 1:
            raise UserError(f"--mca {key}: given more than once")
    if opts.campaign is not None:
        check_name("--campaign", opts.campaign)
    names = [k for k, _ in opts.params]
    for pkey, number in opts.params:
        if pkey not in PARAM_LIMITS:
            raise choice_error("--param", "key", pkey, tuple(PARAM_LIMITS))
        if names.count(pkey) > 1:
            raise UserError(f"--param {pkey}: given more than once")
        low, high = PARAM_LIMITS[pkey]
        if not low <= number <= high:
            raise UserError(f"--param {pkey}={number}: out of range; valid: {low} to {high:,}")


# --param keys (OSU's -t, -i, -x) and their bounds (the kernel's and the row's).
PARAM_LIMITS: Final = {"test_calls": (0, 1_000_000), "iterations": (1, 2**31 - 1),
                       "warmup": (0, 2**31 - 1)}


def check_name(flag: str, name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise UserError(f"{flag}: {name!r} is not a valid campaign name; use letters, digits, "
                        "'_', '.' and '-'")
