"""The same success-probability study on a Dask cluster (runs as a test): here a local dask.distributed cluster of
two worker processes, started by the script; on a real cluster pass its scheduler's address instead
(``theorykit sweep ... --scheduler tcp://host:8786``).

    python examples/example_dask_sweep.py

Every run is seeded, so the cluster returns exactly the rows that local processes return.
"""
import theorykit as tk

KW = dict(activation="quad", link="phase-retrieval", loss="square", width=1, d=80, steps=200, eta=0.05)
DELTAS, SEEDS = [2.0, 6.0, 12.0], range(4)


def main(verbose=True):
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        on_dask = tk.sweep(DELTAS, SEEDS, scheduler=c.scheduler_address, **KW)
    local = tk.sweep(DELTAS, SEEDS, processes=2, **KW)
    cols = ["delta", "seed", "success", "escape_time", "final_overlap", "final_train_loss"]
    assert on_dask[cols].equals(local[cols])
    s = tk.referee.summarise(on_dask)
    p = list(s["success_probability"])
    assert p[-1] >= p[0]  # more samples, more success (x^2, phase retrieval: delta_alg = 1/2)
    if verbose:
        print(s[["delta", "runs", "successes", "success_probability", "low", "high"]].to_string(index=False))


def test_dask_sweep():
    main(verbose=False)


if __name__ == "__main__":
    main()
