"""The base of every table of the campaign spec: strict types, unknown keys refused."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, model_validator

from collbench.errors import did_you_mean
from collbench.spec.fields import _Problem

TOP_LEVEL: Final = ("zip", "exclude")  # keys of the spec itself, not of any [table]


def check_keys(cls: type[BaseModel], data: Any) -> None:
    if not isinstance(data, dict) or cls.model_config.get("extra") == "allow":
        return
    valid = [f.alias or name for name, f in cls.model_fields.items()]
    for key in data:
        if key in TOP_LEVEL and not getattr(cls, "top_level", False):
            # TOML puts keys written after a [table] header into that table.
            raise _Problem(f"{key!r} is a top-level key: write it before the first [table] "
                           f"header{' or as [[exclude]] tables' if key == 'exclude' else ''}",
                           key)
        if key not in valid:
            raise _Problem(f"unknown key {key!r}; valid: {', '.join(valid)}"
                           f"{did_you_mean(key, valid)}", key)


class Table(BaseModel):
    """A TOML table: typed strictly, unknown keys rejected with did-you-mean."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    top_level: ClassVar[bool] = False  # the spec itself, where TOP_LEVEL keys belong

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        check_keys(cls, data)
        return data
