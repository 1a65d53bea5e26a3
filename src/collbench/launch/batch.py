"""Batch backends: a scheduler takes many launches at once and reports each as it ends.

The runner hands a batch backend every launch still to do (`begin`), then polls: each
report is either Done (the launch ran: its outcome is stored like a local launch's) or
Lost (the scheduler killed the job before the launch finished: nothing is stored, so
`--resume` runs it again). Ctrl-C makes the runner call `cancel`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.launch.base import Backend, LaunchOutcome

if TYPE_CHECKING:
    from collbench.plan import Launch
    from collbench.store import Store


@dataclass(frozen=True)
class Done:
    launch: Launch
    outcome: LaunchOutcome
    nodes: int  # nodes the ranks ran on
    meta: dict[str, Any] = field(default_factory=dict)  # merged into the launch's meta.json


@dataclass(frozen=True)
class Lost:
    launch: Launch
    state: str  # the scheduler's word: CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, ...
    detail: str


Report = Done | Lost


class BatchBackend(Backend):
    """Takes every launch at once (begin), then reports each as it ends (poll)."""

    poll_interval_s: float = 0.5

    @abstractmethod
    def begin(self, store: Store, todo: list[Launch], kernel: Path,
              debug: tuple[str, ...]) -> list[Report]:
        """Collect launches that already finished, follow live jobs, submit the rest."""

    @abstractmethod
    def poll(self) -> list[Report]:
        """Launches that ended since the last call."""

    @abstractmethod
    def active(self) -> bool:
        """Whether any launch is still waited for."""

    @abstractmethod
    def cancel(self) -> list[str]:
        """Cancel the jobs collbench submitted that are still alive; their ids."""

    def stored(self, launch: Launch, status: str) -> None:
        """The runner stored this launch (hook to retire its markers)."""
