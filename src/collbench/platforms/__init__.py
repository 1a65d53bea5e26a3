"""Simulated clusters: descriptions (TOML), SimGrid platform files, placement, calibration."""
