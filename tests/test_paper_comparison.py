"""tables/paper_comparison (issue 14 point 6): the quick mode writes the table, and the trained-second-layer GD of
theorykit/validation/paper_comparison.py is the simulator's GD when the second layer's step is 0."""
import csv
import os


def test_quick_paper_comparison(tmp_path):
    import theorykit as tk
    from theorykit.validation.paper_comparison import main
    from theorykit.referee.second_layer import trained_a_run
    from theorykit.referee import simulate

    stem = tmp_path / "t"
    rows = main(["--quick", "--processes", "1", "--out", str(stem), "--cache", str(tmp_path / "c")], prog="test",
                root=str(tmp_path))
    assert os.path.exists(f"{stem}.csv") and os.path.exists(f"{stem}.md")
    assert len(rows) == 2  # one case, two deltas
    with open(f"{stem}.csv", newline="") as f:
        header = next(csv.reader(f))
    for col in ("case", "delta", "activation", "width", "a", "second_layer", "link", "Sigma0", "d", "horizon", "runs",
                "escaped", "frac", "frac_cos_half", "midpoint", "midpoint_cos_half", "case_key"):
        assert col in header, col
    md = open(f"{stem}.md").read()
    assert "delta_1/2 (cos^2 > 1/2) [95% band]" in md and "quick-gelu-m2-pm1" in md
    for r in rows:
        assert r["runs"] == 2 and 0 <= r["escaped"] <= r["escaped_cos_half"] <= r["runs"]

    # eta_a = 0: the same escape as the simulator (same draws, same GD on Theta)
    p = tk.Problem("gelu", "phase-retrieval", "square", 2, a=(1, -1), delta=8.0, eta=1.0, steps=60)
    for seed in (0, 1):
        sim = simulate(p, d=100, seed=seed, stop_after_escape=0, kernel="numpy")
        own = trained_a_run(8.0, seed, {"problem": p, "d": 100, "eta_a": 0.0})
        assert own["escape_time"] == sim.escape_time
        assert abs(own["max_overlap"] - float(sim.overlap.max())) < 1e-10
