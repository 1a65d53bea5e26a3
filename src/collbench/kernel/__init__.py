"""The C measurement kernel and its on-demand build."""
