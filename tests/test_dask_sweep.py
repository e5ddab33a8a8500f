"""Sweeps and optimiser searches on a real Dask cluster: a local dask.distributed cluster started by the test itself
(two worker processes), against the same work run in local processes; the CLI's --scheduler and its one-line
errors."""
import json

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import theorykit as tk  # noqa: E402
from theorykit.cli import main  # noqa: E402

KW = dict(activation="gelu", link="phase-retrieval", loss="square", width=1, d=60, steps=30, eta=1.0)


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


def test_sweep_on_a_local_cluster_equals_local_processes(cluster, tmp_path):
    local = tk.sweep([3.0, 6.0], range(3), processes=2, **KW)
    on_dask = tk.sweep([3.0, 6.0], range(3), scheduler=cluster.scheduler_address, csv=str(tmp_path / "d.csv"), **KW)
    cols = ["delta", "seed", "status", "success", "escape_time", "final_overlap", "final_train_loss", "steps_run"]
    assert local[cols].equals(on_dask[cols])  # same seeds, same numbers, whichever machine ran them
    # resuming the same file on the cluster computes nothing new
    again = tk.sweep([3.0, 6.0], range(3), scheduler=cluster.scheduler_address, csv=str(tmp_path / "d.csv"), **KW)
    assert again[cols].equals(on_dask[cols])
    with open(tmp_path / "d.csv") as fh:
        assert sum(1 for line in fh if not line.startswith("#")) == 1 + 6  # header + one row per run, none repeated


def test_a_failing_run_on_the_cluster_is_recorded(cluster):
    df = tk.sweep([3.0], [0, 1], scheduler=cluster.scheduler_address, **{**KW, "n_test": 0})
    assert list(df["status"]) == ["failed", "failed"] and df["error"].str.contains("n_test").all()


def test_cli_scheduler(cluster, capsys):
    argv = ["sweep", "--activation", "gelu", "--link", "phase-retrieval", "--d", "60", "--steps", "20", "--eta", "1",
            "--deltas", "3,6", "--seeds", "2", "--scheduler", cluster.scheduler_address, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["runs"] for r in out["summary"]] == [2, 2]
    assert np.isfinite([r["final_train_loss"] for r in out["runs"]]).all()
    assert main(argv[:-1] + ["--processes", "2"]) == 2
    assert "not both" in capsys.readouterr().err


def test_table_sim_column_on_the_cluster_equals_local_processes(cluster, capsys, tmp_path):
    """theorykit table --scheduler: the sim column's runs go to the cluster, with the numbers of local processes."""
    base = ["table", "--activations", "gelu", "--link", "phase-retrieval", "--columns", "sim@d=60:T=20", "--deltas",
            "3,12", "--seeds", "2", "--json"]
    assert main(base + ["--scheduler", cluster.scheduler_address, "--cache", str(tmp_path / "a")]) == 0
    on_dask = json.loads(capsys.readouterr().out)["rows"][0]
    assert main(base + ["--processes", "2", "--cache", str(tmp_path / "b")]) == 0
    local = json.loads(capsys.readouterr().out)["rows"][0]
    assert on_dask["sim@d=60:T=20_status"] == "computed" and on_dask["sim@d=60:T=20_how"] == local["sim@d=60:T=20_how"]
    assert main(base + ["--processes", "2", "--scheduler", cluster.scheduler_address]) == 2
    assert "not both" in capsys.readouterr().err


def test_unreachable_scheduler_is_one_line(capsys):
    from theorykit import runner

    old = runner.DASK_CONNECT_TIMEOUT
    runner.DASK_CONNECT_TIMEOUT = 2.0
    try:
        assert main(["sweep", "--activation", "gelu", "--link", "phase-retrieval", "--d", "30", "--steps", "2",
                     "--eta", "1", "--deltas", "3", "--seeds", "1", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    finally:
        runner.DASK_CONNECT_TIMEOUT = old
    err = capsys.readouterr().err.strip()
    assert "cannot reach the Dask scheduler" in err and len(err.splitlines()) == 1


def test_optimise_on_a_local_cluster_equals_local_processes(cluster, tmp_path):
    """The candidates run as cluster tasks and give the local numbers; the cache stays with the caller (written
    here, read back by a rerun without the cluster)."""
    kw = dict(eta=0.05, grid=3, refine=0, baseline=None, ingredients=False, paths=1024, replicas=2,
              delta_range=(1.0, 20.0))
    args = ("x**2 + c*x", "phase-retrieval", "c=-1:1", "delta_star@t=0:d=1000")
    local = tk.optimise(*args, processes=2, **kw)
    on_dask = tk.optimise(*args, scheduler=cluster.scheduler_address, cache=str(tmp_path), **kw)
    assert [e["value"] for e in on_dask.evaluations] == [e["value"] for e in local.evaluations]
    assert all(e["status"] == "ok" for e in on_dask.evaluations)
    again = tk.optimise(*args, cache=str(tmp_path), **kw)
    assert all(e["status"] == "cached" for e in again.evaluations) and again.best == on_dask.best
