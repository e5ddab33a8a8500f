"""The paper's phase-retrieval comparison, GeLU against x^2 (slow: run with `python -m pytest -m slow
examples/example_pr_gelu_vs_x2.py`, or directly), through the table machinery of `theorykit table`.

    python examples/example_pr_gelu_vs_x2.py

Montanari & Wang report delta_NN ~ 6.0 (GeLU) and ~ 3.6 (x^2): x^2 needs fewer samples.  At finite d the simulated
midpoints order the same way (measured earlier at d = 400: about 10.3 and 5.3 for m = 1); here d = 200 and a
horizon of 400 steps, 12 seeds per delta.  Both lie far above delta_alg = 1/2, the best spectral method's threshold.
"""
import math
import tempfile

import pytest

from theorykit.report import table as st

DELTAS = (3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 14.0)


def main(verbose=True):
    cols = st.parse_columns("delta_alg,sim@d=200:T=400")
    opts = st.TableOptions(seeds=12, deltas=DELTAS)
    with tempfile.TemporaryDirectory() as cache:
        df = st.build(["gelu", "quad"], ["square"], [1], ["phase-retrieval"], cols, {"gelu": 1.0, "quad": 0.05},
                      opts, cache)
    rows = {r["activation"]: r for r in df.to_dict("records")}
    g, q = rows["gelu"]["sim@d=200:T=400"], rows["quad"]["sim@d=200:T=400"]
    assert all(math.isfinite(v) for v in (g, q)), rows
    assert 0.5 < q < g, (q, g)  # x^2 learns the hard direction with fewer samples than GeLU
    assert rows["gelu"]["delta_alg"] == rows["quad"]["delta_alg"] == 0.5
    if verbose:
        for a, r in rows.items():
            print(f"{a}: simulated midpoint {r['sim@d=200:T=400']:.3g} [{r['sim@d=200:T=400_low']:.3g}, "
                  f"{r['sim@d=200:T=400_high']:.3g}]; delta_alg = {r['delta_alg']}")


@pytest.mark.slow
def test_pr_gelu_vs_x2():
    main(verbose=False)


if __name__ == "__main__":
    main()
