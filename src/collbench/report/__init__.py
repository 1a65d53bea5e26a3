"""Reports of a results folder: figures (matplotlib), Markdown/CSV tables, one HTML page."""

from collbench.report.build import Options, Written, build_report

__all__ = ["Options", "Written", "build_report"]
