"""The `[run.hosts]` table of a campaign spec: the hosts the hosts backend starts ranks on,
and how it reaches them (docs/hosts.md).

Problems are raised as the spec's _Problem so they read like every other spec error:
`<file>: run.hosts.<key>: <problem>; valid: ...`. Host entries are parsed here, for the
spec's `hosts` list and for a hostfile alike, so both accept the same lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from collbench.spec.fields import _Problem, reject_unknown_keys
from collbench.spec.fields import one_of as _one_of

LAUNCHERS: Final = ("ssh",)
MAX_HOSTS: Final = 65_536
MAX_SLOTS: Final = 4_096  # per host: more cores than any node has today
# A DNS name or an IPv4 address; never starting with '-' (it would read as an option to
# ssh or mpirun), never with whitespace (hostfiles and ssh agents split on it).
_HOST: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})")
_ENTRY: Final = re.compile(r"(?P<name>\S+?)(?::(?P<colon>\S+)|\s+slots\s*=\s*(?P<slots>\S+))?")


@dataclass(frozen=True)
class Host:
    """One host and the ranks it may take (mpirun's slots)."""

    name: str
    slots: int


def parse_host(text: str) -> Host:
    """A host entry: "n1", "n1:16" (MPICH's hostfile form) or "n1 slots=16" (Open MPI's);
    ValueError with the reason."""
    m = _ENTRY.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a host entry; valid: NAME, NAME:SLOTS, "
                         "NAME slots=SLOTS")
    name, count = m.group("name"), m.group("colon") or m.group("slots")
    if not _HOST.fullmatch(name):
        raise ValueError(f"{name!r} is not a host name (letters, digits, '.', '_', '-'; "
                         "not starting with '-' or '.')")
    if count is None:
        return Host(name, 1)
    if not count.isdigit() or not 1 <= int(count) <= MAX_SLOTS:
        raise ValueError(f"{text.strip()!r}: slots must be a whole number from 1 to "
                         f"{MAX_SLOTS}, got {count!r}")
    return Host(name, int(count))


def parse_hostfile(text: str, source: str) -> tuple[Host, ...]:
    """The hosts of a hostfile (one entry per line, '#' comments, blank lines skipped);
    ValueError naming the line."""
    hosts: list[Host] = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        try:
            hosts.append(parse_host(entry))
        except ValueError as e:
            raise ValueError(f"{source}:{number}: {e}") from None
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"{source}: more than {MAX_HOSTS} hosts")
    check_hosts(hosts, source)
    return tuple(hosts)


def check_hosts(hosts: list[Host], source: str) -> None:
    """Every host listed once, and at least one."""
    if not hosts:
        raise ValueError(f"{source}: lists no host")
    seen: set[str] = set()
    for h in hosts:
        if h.name in seen:
            raise ValueError(f"{source}: host {h.name!r} is listed twice; give it once with "
                             "its slots")
        seen.add(h.name)


def _entry(value: str) -> str:
    try:
        parse_host(value)
    except ValueError as e:
        raise _Problem(str(e)) from None
    return value.strip()


def _path(value: str) -> str:
    # mpirun splits its ssh agent setting on whitespace: a path with a space cannot pass.
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        raise _Problem(f"{value!r}: expected a path without spaces or control characters")
    return value


Path_ = Annotated[str, AfterValidator(_path)]


class HostsConfig(BaseModel):
    """Settings for backend = "hosts": mpirun over ssh on a list of hosts."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    hostfile: Path_ | None = Field(
        None, description='A file of hosts, one per line: "n1", "n1:16" or "n1 slots=16" '
                          "(relative: from the spec's folder).")
    hosts: Annotated[list[Annotated[str, AfterValidator(_entry)]],
                     Field(max_length=MAX_HOSTS)] | None = Field(
        None, description='The hosts instead of a hostfile: ["n1:16", "n2:16"].')
    launcher: Annotated[str, _one_of(LAUNCHERS)] = Field(
        "ssh", json_schema_extra={"enum": list(LAUNCHERS)},
        description="How mpirun starts its daemons on the hosts: ssh (its own agent).")
    ssh_config: Path_ | None = Field(
        None, description="An ssh client config (ssh -F) for user, port, identity and known "
                          "hosts (relative: from the spec's folder); default: ssh's own.")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        return reject_unknown_keys(cls, data)

    @model_validator(mode="after")
    def _one_source(self) -> HostsConfig:
        if self.hostfile is not None and self.hosts is not None:
            raise _Problem("give hostfile or hosts, not both", "hosts")
        if self.hosts is not None:
            try:
                check_hosts([parse_host(h) for h in self.hosts], "the list")
            except ValueError as e:
                raise _Problem(str(e).removeprefix("the list: "), "hosts") from None
        return self

    def given(self) -> bool:
        return self.hostfile is not None or self.hosts is not None
