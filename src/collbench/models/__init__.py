"""The "explain" half of collbench as a pure library: models of point-to-point and collective
latency, fitted to and checked against measurements.

- `p2p`: piecewise Hockney fits of ping-pong data per placement level (core|socket|node).
- `p2pfile`: the `.p2p.toml` file holding those parameters (hand-written or fitted).
- `topology`: where ranks sit (`--map-by core|socket|node`) and the level of each pair.
- `schedules`: what each Open MPI 5.0 coll/tuned algorithm sends, as per-rank programs.
- `algorithms`: those programs costed with a p2p model (`predict`); a fitted mode that keeps
  each schedule's structure and fits its coefficients, with cross-validation.
- `scaling`: regressions in the process count (or size), named forms and a PMNF search.
- `accuracy`: how far predictions are from measurements, and whether they pick the same winner.
- `predict`: one point (`predict_point`) and the rows of a prediction request, "default"
  as Open MPI 5.0's fixed rules run it; `networks`: how messages share time (--network).

Everything here is pure: plain data in, plain data out; no file I/O except `p2pfile`.
"""
