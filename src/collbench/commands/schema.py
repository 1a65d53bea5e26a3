"""`collbench schema`: the JSON schema of campaign specs."""

from __future__ import annotations

import argparse
import json

from collbench.commands import options
from collbench.spec import spec_json_schema


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("schema", help="print the JSON schema of campaign specs")
    options.add_table_output(s)
    s.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    options.emit(args, json.dumps(spec_json_schema(), indent=2))
    return 0
