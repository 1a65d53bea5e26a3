"""The `[run.simgrid]` table of a campaign spec: which simulated platform and options.

Problems are raised as the spec's _Problem so they read like every other spec error:
`<file>: run.simgrid.<key>: <problem>; valid: ...`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from collbench.catalog import ompi_decisions
from collbench.errors import UserError
from collbench.spec.fields import _Problem, reject_unknown_keys

# --cfg keys collbench sets for every launch: placement, algorithm forcing, determinism.
RESERVED_CFG: Final = re.compile(
    r"smpi/(np|hostfile|coll-selector|privatization|simulate-computation|wtime|"
    r"auto-shared-malloc-thresh|barrier|bcast|gather|scatter|reduce|allreduce|allgather|"
    r"allgatherv|alltoall|alltoallv|reduce_scatter)")


def _problem(message: str, *path: str | int) -> ValueError:
    return _Problem(message, *path)


def cfg_problem(value: str) -> str | None:
    """Why `value` cannot be an extra --cfg option (spec or platform file), or None."""
    key, sep, _ = value.partition(":")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_/-]+", key):
        return (f"{value!r} is not a SimGrid option; write 'key:value', e.g. "
                "'smpi/or:0:1e-7:0' (see smpirun's --help-cfg)")
    if RESERVED_CFG.fullmatch(key):
        return (f"{key!r} is set by collbench for every launch (placement, algorithm "
                "forcing, determinism); remove it")
    return None


def _cfg(value: str) -> str:
    problem = cfg_problem(value)
    if problem:
        raise _problem(problem)
    return value


def _auto(value: Any) -> Any:
    if value == "auto" or isinstance(value, bool):
        return value
    raise _problem(f"expected \"auto\", true or false, got {value!r}")


def _ompi_version(value: str | None) -> str | None:
    """'5.0', '4.1' (or a release of those series, e.g. '5.0.11') -> the series."""
    if value is None:
        return None
    try:
        return ompi_decisions.series(value)
    except UserError as e:
        raise _problem(str(e)) from None


class SimgridConfig(BaseModel):
    """Settings for backend = "simgrid" (SimGrid SMPI)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    platform: str | None = Field(
        None, description="Built-in platform (`collbench platforms`) or path to a cluster "
                          "TOML; `collbench run --platform` overrides it.")
    cfg: list[Annotated[str, AfterValidator(_cfg)]] = Field(
        default_factory=list, description="More SimGrid options, 'key:value' each, passed as "
                                          "--cfg=key:value after collbench's own.")
    ompi_version: Annotated[str | None, AfterValidator(_ompi_version)] = Field(
        None, description="The Open MPI series whose collectives are simulated (collbench's "
                          "ports of its coll/tuned algorithms; \"default\" = its fixed "
                          "decision rules): \"5.0\" (the default) or \"4.1\".")
    shared_malloc: Annotated[Literal["auto"] | bool, BeforeValidator(_auto)] = Field(
        "auto", description="Let simulated ranks share buffers of 64 KiB and more (memory at "
                            "scale); auto: on unless measure.validate (shared buffers "
                            "cannot be checked).")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        return reject_unknown_keys(cls, data)
