"""Checking a hand calculation (runs as a test): a Hermite coefficient and a t = 1 DMFT quantity, derived by hand
below, against theorykit's exact closed forms (directly and through tk.check, the API of `theorykit check`) and
against the Monte-Carlo DMFT.

    python examples/example_hand_check.py

Setting: sigma(x) = x^2, square loss, phase retrieval y = z^2, m = 1, delta = 4, eta = 1/20, Theta(0) ~ N(0, I/d).

By hand, with r = w^0 ~ N(0, 1) independent of z ~ N(0, 1) at t = 0:
  u^0 = F = (f - y) sigma'(r) = (r^2 - z^2) 2r,   D^0 = sigma'^2 + (f - y) sigma'' = 6 r^2 - 2 z^2
  R_u(0,0) = E[D^0] = 6 - 2 = 4,   P_1 = 1 - eta R_u(0,0) = 4/5
  C_u(0,0) = E[u^2] = 4 E[r^6 - 2 r^4 z^2 + r^2 z^4] = 4 (15 - 6 + 3) = 48
  C_theta(1,1) = P_1^2 + (eta^2 / delta) C_u(0,0) = 16/25 + 48/1600 = 67/100 = gram(1)   (M_1 = 0: hard link)
  train_loss(0) = E[(r^2 - z^2)^2] / 2 = (3 - 2 + 3) / 2 = 2
and the Hermite coefficient mu_2 = E[sigma(G) He_2(G)] = E[G^4 - G^2] = 2.
"""
import sympy as sp

import theorykit as tk


def main(verbose=True):
    # the Hermite coefficient: exact (SymPy), and the tier that made it
    mu2 = tk.hermite_coefficients("quad", degree=2)[2]
    assert mu2.exact == 2 and mu2.tier == "exact"

    # the t = 0, 1 DMFT quantities: exact rationals from the closed-form module
    cf = tk.dynamics.dmft_closed_form("quad", "phase-retrieval", "square", 1, delta=4, eta=sp.Rational(1, 20))
    assert cf.R_u00[0, 0] == 4 and cf.C_u00[0, 0] == 48 and cf.P1[0, 0] == sp.Rational(4, 5)
    assert cf.gram1[0, 0] == sp.Rational(67, 100) and cf.M1[0, 0] == 0 and cf.train_loss0 == 2

    # the same claims through the checker users call (theorykit check ... on the command line): each verdict says how
    # it was decided; a slip (48 -> 47 in C_u, or the wrong delta) is caught with the exact difference
    for kind, claim, kw in [("hermite", "2", dict(activation="quad", k=2)),
                            ("dmft", "67/100", dict(quantity="gram1", activation="quad", link="phase-retrieval",
                                                    delta=4, eta="1/20")),
                            ("dmft", "(1 - 4*eta)**2 + 48*eta**2/delta",  # the same at every delta and eta
                             dict(quantity="gram1", activation="quad", link="phase-retrieval"))]:
        r = tk.check(kind, claim, **kw)
        assert r.message == "equal (exactly)", (kind, claim, r.message)
        if verbose:
            print(f"check {kind} {claim}: {r.message} ({r.how})")
    slip = tk.check("dmft", "(1 - 4*eta)**2 + 47*eta**2/delta", quantity="gram1", activation="quad",
                    link="phase-retrieval")
    assert slip.verdict == "differs" and slip.difference_exact == "-eta**2/delta"
    if verbose:
        print(f"a slip: {slip.message}")

    # the Monte-Carlo DMFT solver agrees within 3 of its standard errors (an independent code path)
    d = tk.dmft("quad", "phase-retrieval", "square", 1, delta=4, eta=0.05, steps=1, paths=16384, replicas=4, seed=0)
    for name, exact, got, se in [("gram(1)", 0.67, d.gram[1, 0, 0], d.stderr["gram"][1, 0, 0]),
                                 ("train_loss(0)", 2.0, d.train_loss[0], d.stderr["train_loss"][0])]:
        assert abs(got - exact) <= 3 * se + 1e-12, (name, got, exact, se)
        if verbose:
            print(f"{name}: hand {exact}, closed form exact, DMFT {got:.4f} +- {se:.4f}")
    if verbose:
        print(f"mu_2 = {mu2.exact} ({mu2.tier})")


def test_hand_check():
    main(verbose=False)


if __name__ == "__main__":
    main()
