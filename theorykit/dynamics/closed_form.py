"""Exact t = 0 and t = 1 quantities of the discrete-time DMFT (docs/theory.md §3) for polynomial models.

For a polynomial activation sigma, a polynomial loss l(y, yhat) (the 'square' preset l = (y - yhat)^2 / 2 is the
case of interest) and a polynomial link y = h(z, eps) (eps ~ N(0, 1), optional), every quantity of the first two
steps of the DMFT is the expectation of a polynomial in jointly Gaussian variables, so it is computed exactly:

* the Gaussian variables are z ~ N(0, I_k), eps ~ N(0, 1) (noisy links only), and (w^0, w^1) ~ N(0, C_w) with
  C_w = [[C_theta(0,0), C_theta(0,1)], [C_theta(1,0), C_theta(1,1)]], independent of (z, eps);
* each integrand is a sparse polynomial in these variables (SymPy's ``PolyRing``) with coefficients in an exact
  domain: QQ for rational inputs; QQ[params] (else QQ(params), else EX, e.g. for sqrt(2) in a) when delta, eta,
  ridge, M_0 or Sigma_0 carry SymPy symbols (a and b must be numbers: Network evaluates them as floats); 1/delta is
  carried as its own symbol, so no division appears; the network's ``F_expr``, ``D_expr``, ``f_expr`` are
  substituted as expression trees (their factored form is kept);
* moments, with no square roots: C_w = L diag(v) L^T is factorised exactly (LDL^T, unit lower-triangular L; a zero
  pivot is allowed when its column vanishes), w = L g with independent g_i ~ N(0, v_i), so
  E[prod g_i^{n_i}] = prod (n_i - 1)!! v_i^{n_i/2}, and second moments E[p q] (C_u, R_u(1,0), the losses) are
  inner products in the scaled Hermite basis He^[v]_n(g) = v^{n/2} He_n(g/sqrt(v)):
  E[p q] = sum_alpha phat_alpha qhat_alpha prod_i alpha_i! v_i^{alpha_i}, linear in the number of terms instead of
  forming p q.  When a pivot does not divide exactly (symbolic inputs), the moments of w come from Isserlis' theorem
  on C_w itself, E[w_i g(w)] = sum_j C_ij E[d_j g(w)] (memoised); both engines are tested against each other.

The network is :class:`theorykit.Network`: its ``F_expr``, ``D_expr`` and ``f_expr`` are used as they are (the loss
enters through its coefficients as a polynomial in yhat, ``Network.loss.expr``).

Equations (docs/theory.md §3, the first two steps; ridge lambda optional, default 0)::

    t = 0:  r^0 = M_0^T z + w^0,  w^0 ~ N(0, Sigma_0) independent of (z, eps),  y = h(z, eps)
            u^0 = F(r^0, y),  D^0 = D(r^0, y)
            Ezu0 = E[z u^0T] (k x m),  C_u(0,0) = E[u^0 u^0T],  R_u(0,0) = E[D^0]
            train_loss(0) = test_loss(0) = E[l(y, f(r^0))],  gram(0) = M_0^T M_0 + Sigma_0
    parameter side:
            P_1 = (1 - eta lambda) I - eta R_u(0,0),   R_theta(1,0) = -(eta/delta) I
            C_theta(0,0) = Sigma_0,  C_theta(1,0) = P_1 Sigma_0  (C_theta(0,1) = Sigma_0 P_1^T)
            C_theta(1,1) = P_1 Sigma_0 P_1^T + (eta^2/delta) C_u(0,0)
            M_1 = (1 - eta lambda) M_0 - eta Ezu0,   gram(1) = M_1^T M_1 + C_theta(1,1)
    t = 1:  r^1 = M_1^T z + w^1 + R_theta(1,0) u^0 = M_1^T z + w^1 - (eta/delta) u^0   (u^0 of the same sample)
            u^1 = F(r^1, y),  D^1 = D(r^1, y),  J^1_0 = R_theta(1,0) D^0 = -(eta/delta) D^0
            Ezu1 = E[z u^1T],  C_u(1,1) = E[u^1 u^1T],  C_u(1,0) = E[u^1 u^0T],
            R_u(1,1) = E[D^1],  R_u(1,0) = E[D^1 J^1_0] = -(eta/delta) E[D^1 D^0]
            train_loss(1) = E[l(y, f(r^1))]
            test_loss(1) = E[l(y, f(M_1^T z + g))],  g ~ N(0, C_theta(1,1)) independent of (z, eps)
            M_2 = (1 - eta lambda) M_1 - eta Ezu1

Cost and limits (one core, Python ground types, square loss).  The work is set by the size of the largest
polynomial, u^1 = F(r^1, y): r^1 has degree 2q - 1 in k + [eps] + 2m variables for sigma of degree q (link of degree
<= q), and u^1 degree about (2q - 1)(2q - 1).  Quadratic sigma at m <= 4, sigma = x^3 at m <= 2 and sigma = x^5 at
m = 1 take seconds or less, symbolic eta and delta included; a nonzero M_0 costs several times more.
Beyond that (sigma = x^3 with m = 3, sigma = x^4 with m = 2 and M_0 != 0, multi-index links with noise and degree
>= 3 at m = 2) a call takes minutes: use the numerical DMFT (theorykit.dmft) there.  A nonzero M_0 costs most,
because r^0 then depends on z.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from math import factorial
from typing import Optional

import numpy as np
import sympy as sp
from sympy.polys.polyerrors import CoercionFailed, ExactQuotientFailed, PolynomialError
from sympy.polys.rings import PolyElement, PolyRing

from .. import conventions as cv
from ..errors import TheorykitError
from ..symbolic.gaussian import double_factorial
from ..symbolic.ingredients import link as make_link
from ..symbolic.network import Network

__all__ = ["dmft_closed_form", "ClosedFormDMFT"]


@dataclass(frozen=True)
class ClosedFormDMFT:
    """Exact DMFT quantities at t = 0 and t = 1 (docs/theory.md §3); see the module docstring for the equations.

    Matrices are SymPy ``Matrix`` objects (k x m for Ezu0, Ezu1, M0, M1, M2; m x m for the kernels and grams), the
    losses SymPy expressions.  ``P1 = (1 - eta ridge) I - eta R_u(0,0)``; ``C_theta10 = C_theta(1,0) = P1 Sigma_0``
    (its transpose is C_theta(0,1)); ``R_theta10 = R_theta(1,0) = -(eta/delta) I``; ``C_theta00 = Sigma_0``;
    ``gram0 = M_0^T M_0 + Sigma_0``, ``gram1 = M_1^T M_1 + C_theta(1,1)`` (the predicted Theta^T Theta);
    ``R_u10 = E[D^1 J^1_0] = -(eta/delta) E[D^1 D^0]``.  :meth:`numeric` converts everything to NumPy.
    """

    Ezu0: sp.Matrix
    C_u00: sp.Matrix
    R_u00: sp.Matrix
    M1: sp.Matrix
    P1: sp.Matrix
    C_theta11: sp.Matrix
    C_theta10: sp.Matrix
    gram0: sp.Matrix
    gram1: sp.Matrix
    train_loss0: sp.Expr
    train_loss1: sp.Expr
    test_loss0: sp.Expr
    test_loss1: sp.Expr
    Ezu1: sp.Matrix
    C_u11: sp.Matrix
    C_u10: sp.Matrix
    R_u11: sp.Matrix
    R_u10: sp.Matrix
    M2: sp.Matrix
    M0: sp.Matrix
    C_theta00: sp.Matrix
    R_theta10: sp.Matrix

    def names(self) -> list:
        return [f.name for f in fields(self)]

    def free_symbols(self) -> set:
        out = set()
        for name in self.names():
            out |= getattr(self, name).free_symbols
        return out

    def subs(self, *args, **kw) -> "ClosedFormDMFT":
        """A copy with ``.subs(...)`` applied to every field (e.g. numbers for symbolic eta, delta)."""
        return ClosedFormDMFT(**{n: sp.expand(getattr(self, n).subs(*args, **kw)) for n in self.names()})

    def numeric(self) -> dict:
        """name -> numpy float array (matrices with their shapes, losses as 0-d arrays).

        Raises TheorykitError if a field still has free symbols (substitute them first with :meth:`subs`).
        """
        out = {}
        for name in self.names():
            v = getattr(self, name)
            free = v.free_symbols
            if free:
                raise TheorykitError(f"{name} still depends on {sorted(map(str, free))}: substitute numbers first "
                                     f"(ClosedFormDMFT.subs)")
            if isinstance(v, sp.MatrixBase):
                out[name] = np.array([[float(sp.N(e, 20)) for e in row] for row in v.tolist()],
                                     dtype=float).reshape(v.shape)
            else:
                out[name] = np.array(float(sp.N(v, 20)))
        return out


# ------------------------------------------------------------------------------------------------ helpers
def _exact(v, name: str) -> sp.Expr:
    """A number or SymPy expression -> exact SymPy (floats via their shortest repr: 0.05 -> 1/20)."""
    if isinstance(v, sp.Basic):
        e = sp.sympify(v)
    elif isinstance(v, (bool, np.bool_)):
        raise TheorykitError(f"{name} must be a number or a SymPy expression, got {v!r}")
    elif isinstance(v, (int, np.integer)):
        e = sp.Integer(int(v))
    elif isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            raise TheorykitError(f"{name} must be finite, got {v!r}")
        e = sp.Rational(repr(float(v)))
    else:
        try:
            e = sp.Rational(str(v))
        except (TypeError, ValueError):
            raise TheorykitError(f"{name} must be a number or a SymPy expression, got {v!r}") from None
    if e.has(sp.Float):
        e = e.xreplace({f: sp.Rational(repr(float(f))) for f in e.atoms(sp.Float)})
    return e


def _matrix(v, shape, name: str, default) -> sp.Matrix:
    if v is None:
        return default
    try:
        arr = v.tolist() if hasattr(v, "tolist") else v
        M = sp.Matrix(arr)
    except (TypeError, ValueError) as e:
        raise TheorykitError(f"{name} must be a {shape[0]} x {shape[1]} matrix ({type(e).__name__})") from None
    if shape[0] == 1 and M.shape == (shape[1], 1):
        M = M.T
    if M.shape != shape:
        raise TheorykitError(f"{name} must be {shape[0]} x {shape[1]}, got {M.shape[0]} x {M.shape[1]}")
    return M.applyfunc(lambda e: _exact(e, name))


def _require_polynomial(what: str, name: str, expr: sp.Expr, variables) -> None:
    ok = expr.is_polynomial(*variables)
    if ok:
        try:
            sp.Poly(expr, *variables)
        except PolynomialError:
            ok = False
    if not ok:
        raise TheorykitError(f"dmft_closed_form needs a polynomial {what}; {name!r} = {expr} is not polynomial in "
                             f"{', '.join(map(str, variables))} (theorykit.dmft solves the DMFT numerically)")


def _domain(exprs, params):
    """The smallest convenient exact domain holding every expression: QQ, QQ[params], QQ(params), else EX."""
    candidates = [sp.QQ] if not params else [sp.QQ[tuple(params)], sp.QQ.frac_field(*params)]
    for K in candidates:
        try:
            for e in exprs:
                K.from_sympy(sp.sympify(e))
            return K
        except (CoercionFailed, TypeError, ValueError, NotImplementedError):
            continue
    return sp.EX


class _Engine:
    """Sparse polynomials in the Gaussian variables with exact coefficients in K, and their Gaussian expectations.

    Variables: n_std independent standard normals (z, eps) and p correlated ones w ~ N(0, cov).  When cov = L diag(v)
    L^T has an exact LDL^T factorisation in K (always for numbers; for symbols when the pivots divide exactly), w is
    represented as L g with independent g_i ~ N(0, v_i), and
        E[prod_i g_i^{n_i}] = prod_i (n_i - 1)!! v_i^{n_i/2},
        E[p q] = sum_alpha phat_alpha qhat_alpha prod_i alpha_i! v_i^{alpha_i}
    in the scaled Hermite basis He^[v]_n(g) = v^{n/2} He_n(g/sqrt(v)) (g^n = sum_k n!/(k!(n-2k)!2^k) v^k He^[v]_{n-2k}),
    which costs O(#terms) instead of forming the product.  Otherwise w are the variables themselves and moments come
    from Isserlis' theorem in the recursive form E[w_i g(w)] = sum_j cov_ij E[d_j g(w)] (memoised), E[p q] = E[pq].
    """

    def __init__(self, K, n_std: int, cov):
        self.K = K
        self.n_std = n_std
        p = len(cov)
        syms = [sp.Dummy(f"g{i}") for i in range(n_std + p)]
        self.R = PolyRing(syms, K)
        g = self.R.gens
        self.std = list(g[:n_std])
        factor = _ldl(K, cov)
        if factor is not None:
            L, v = factor
            self.diagonal = True
            self.var = [K.one] * n_std + list(v)
            self.w = [sum((g[n_std + j] * L[i][j] for j in range(i + 1) if L[i][j]), self.R.zero)
                      for i in range(p)]
            self._expansions = {}
            self._norms = {}
            self._hermite_cache = {}
        else:
            self.diagonal = False
            self.cov = cov
            self.w = list(g[n_std:])
            self._memo = {(0,) * p: K.one}

    # -- building polynomials
    def compose(self, expr: sp.Expr, syms, images, cache: Optional[dict] = None):
        """expr(syms) with each symbol replaced by a ring element (polynomial substitution).

        The expression tree is evaluated as it stands (Add, Mul, integer Pow), so factored forms such as
        F = l'(y, f(r)) grad f stay factored and shared subexpressions are computed once: ``cache`` (a dict, valid
        for one assignment syms -> images) carries them between calls.
        """
        cache = {} if cache is None else cache
        mapping = dict(zip(syms, images))
        keys = set(syms)
        R, K = self.R, self.K

        def ev(e):
            hit = cache.get(e)
            if hit is not None:
                return hit
            if not (e.free_symbols & keys):
                out = R.ground_new(K.from_sympy(e))
            elif e in mapping:
                out = mapping[e]
            elif e.is_Add:
                out = R.zero
                for arg in e.args:
                    out = out + ev(arg)
            elif e.is_Mul:
                const = R.ground_new(K.from_sympy(sp.Mul(*[a for a in e.args if not (a.free_symbols & keys)])))
                factors = sorted((ev(a) for a in e.args if a.free_symbols & keys), key=len)
                out = const
                for fac in factors:
                    out = out * fac
            elif e.is_Pow and e.exp.is_Integer and e.exp >= 0:
                out = ev(e.base) ** int(e.exp)
            else:  # anything else that is polynomial in syms: expand it
                P = sp.Poly(e, *syms)
                out = R.zero
                for monom, c in P.terms():
                    term = R.ground_new(K.from_sympy(P.domain.to_sympy(c)))
                    for img, n in zip(images, monom):
                        if n:
                            term = term * img ** n
                    out = out + term
            cache[e] = out
            return out

        return ev(sp.sympify(expr))

    # -- Gaussian moments
    def _wmoment(self, e: tuple):
        memo = self._memo
        if e in memo:
            return memo[e]
        if sum(e) % 2:
            return self.K.zero
        i = next(j for j, v in enumerate(e) if v)
        base = list(e)
        base[i] -= 1
        total = self.K.zero
        for j, c in enumerate(self.cov[i]):
            if not base[j] or not c:
                continue
            nxt = list(base)
            nxt[j] -= 1
            sub = self._wmoment(tuple(nxt))
            if sub:
                total += c * sub * base[j]
        memo[e] = total
        return total

    def expect(self, p):
        """E[p]."""
        K = self.K
        total = K.zero
        ns = self.n_std
        for monom, coeff in p.iterterms():
            if self.diagonal:
                val = coeff
                for i, e in enumerate(monom):
                    if e & 1:
                        val = None
                        break
                    if e:
                        val = (val * double_factorial(e - 1) if i < ns
                               else val * double_factorial(e - 1) * self.var[i] ** (e // 2))
                if val is not None:
                    total += val
                continue
            f = 1
            for e in monom[:ns]:
                if e & 1:
                    f = 0
                    break
                f *= double_factorial(e - 1)
            if not f:
                continue
            mw = self._wmoment(monom[ns:])
            if mw:
                total += coeff * mw * f
        return total

    def hermite(self, p) -> dict:
        """Coefficients of p in the scaled Hermite basis of the independent variables (diagonal mode only; cached
        per polynomial object)."""
        hit = self._hermite_cache.get(id(p))
        if hit is not None and hit[0] is p:
            return hit[1]
        out = self._hermite(p)
        self._hermite_cache[id(p)] = (p, out)
        return out

    def _hermite(self, p) -> dict:
        """One variable at a time (g^n = sum_k n!/(k!(n-2k)!2^k) v^k He^[v]_{n-2k}), merging equal multi-indices
        after each variable: cost ~ #terms x sum_i (n_i/2 + 1) instead of #terms x prod_i (n_i/2 + 1)."""
        K = self.K
        cur = dict(p.iterterms())
        for i in range(len(self.var)):
            if all(monom[i] < 2 for monom in cur):
                continue  # g^0 = He_0, g^1 = He_1
            new = {}
            get = new.get
            for monom, c in cur.items():
                n = monom[i]
                if n < 2:
                    new[monom] = get(monom, K.zero) + c
                    continue
                key = (i, n)
                exp = self._expansions.get(key)
                if exp is None:
                    v = self.var[i]
                    # v^0 = 1 even for a zero pivot (eta = 0 makes C_w singular; a polynomial ring refuses 0**0)
                    exp = [(n - 2 * k, (v ** k if k else K.one) * (factorial(n) // (factorial(k) * factorial(n - 2 * k)
                                                                                   * 2 ** k)))
                           for k in range(n // 2 + 1)]
                    self._expansions[key] = exp
                head, tail = monom[:i], monom[i + 1:]
                for al, w in exp:
                    if not w:
                        continue
                    a = head + (al,) + tail
                    new[a] = get(a, K.zero) + c * w
            cur = {a: c for a, c in new.items() if c}
        return cur

    def _norm(self, alpha: tuple):
        val = self._norms.get(alpha)
        if val is None:
            val = self.K.one
            for i, n in enumerate(alpha):
                if n:
                    val = val * factorial(n) * self.var[i] ** n
            self._norms[alpha] = val
        return val

    def inner(self, p, q):
        """E[p q]; p and q may also be dicts returned by :meth:`hermite`."""
        for a, b in ((p, q), (q, p)):
            if isinstance(b, PolyElement) and b.is_ground:
                return self.expect(a) * b.LC if b else self.K.zero
        if not self.diagonal:
            return self.expect(p * q)
        hp = self.hermite(p) if isinstance(p, PolyElement) else p  # (a PolyElement is a dict too)
        hq = self.hermite(q) if isinstance(q, PolyElement) else q
        if len(hp) > len(hq):
            hp, hq = hq, hp
        total = self.K.zero
        for a, c in hp.items():
            c2 = hq.get(a)
            if c2:
                total += c * c2 * self._norm(a)
        return total

    def loss(self, net: Network, r, y, cache: Optional[dict] = None):
        """E[l(y, f(r))] = sum_k E[c_k(y) f^k] with l(y, yhat) = sum_k c_k(y) yhat^k, as inner products."""
        f = self.compose(net.f_expr, list(net.r) + [cv.Y], list(r) + [y], cache)
        P = sp.Poly(net.loss.expr, cv.YHAT)
        powers = {0: self.R.one, 1: f}
        total = self.K.zero
        for (k,), ck in P.terms():
            for j in ((k + 1) // 2, k // 2):
                if j not in powers:
                    powers[j] = f ** j
            c = self.compose(P.domain.to_sympy(ck), [cv.Y], [y])
            if c.is_ground:  # a constant c_k: keep f^j as it is, so its Hermite transform is reused
                total += self.inner(powers[(k + 1) // 2], powers[k // 2]) * c.LC if c else self.K.zero
            else:
                total += self.inner(c * powers[(k + 1) // 2], powers[k // 2])
        return total


def _ldl(K, cov):
    """cov = L diag(v) L^T with L unit lower triangular, by exact division in K; None if a pivot does not divide
    (or a zero pivot has a nonzero column below it)."""
    p = len(cov)
    if not K.is_Field and not hasattr(K, "exquo"):
        return None
    A = [list(row) for row in cov]
    L = [[K.one if i == j else K.zero for j in range(p)] for i in range(p)]
    v = []
    try:
        for j in range(p):
            piv = A[j][j]
            v.append(piv)
            for i in range(j + 1, p):
                if not A[i][j]:
                    continue
                if not piv:
                    return None
                L[i][j] = K.exquo(A[i][j], piv)
            for i in range(j + 1, p):
                for l in range(j + 1, i + 1):
                    if L[i][j] and L[l][j]:
                        A[i][l] = A[i][l] - L[i][j] * L[l][j] * piv
                        A[l][i] = A[i][l]
    except (ArithmeticError, ExactQuotientFailed, NotImplementedError):
        return None
    return L, v


def _matmul(A, B, zero):
    return [[sum((A[i][l] * B[l][j] for l in range(len(B))), zero) for j in range(len(B[0]))]
            for i in range(len(A))]


def _transpose(A):
    return [list(r) for r in zip(*A)]


# ------------------------------------------------------------------------------------------------ entry point
def dmft_closed_form(activation, link=None, loss="square", width: int = 1, *, a=None, b=None, delta=None, eta=None,
                     ridge=0, Sigma0=None, M0=None) -> ClosedFormDMFT:
    """Exact DMFT quantities at t = 0, 1 for polynomial sigma, loss and link (docs/theory.md §3).

    activation, loss, width, a, b: as for :class:`theorykit.Network` (polynomial sigma and loss only; a, b numbers,
    exact SymPy numbers such as sqrt(2) allowed);
    link: as for :func:`theorykit.link` (polynomial in z or z1..zk and eps); delta, eta, ridge: numbers (floats are
    read exactly from their repr, 0.05 -> 1/20) or SymPy expressions; Sigma0 (m x m, default I_m) and M0 (k x m,
    default 0): the law of the initialisation, Theta(0)^T Theta(0) -> M0^T M0 + Sigma0, Theta*^T Theta(0) -> M0.
    Equations, method and limits: module docstring of ``theorykit.symbolic.dmft_closed``.
    Returns a :class:`ClosedFormDMFT`.  Non-polynomial ingredients raise :class:`TheorykitError`.
    Also ``dmft_closed_form(problem)`` with a :class:`theorykit.Problem` (its eta, or its first step size).
    """
    from ..problem import problem_or_keywords

    # dmft_closed_form(problem) or the keyword form (its values kept exact: a SymPy delta, say)
    _, f = problem_or_keywords("dmft_closed_form", activation, required=("link", "delta", "eta"),
                               unset=dict(loss="square", width=1, ridge=0), link=link, loss=loss, width=width, a=a,
                               b=b, delta=delta, eta=eta, ridge=ridge, Sigma0=Sigma0, M0=M0)
    activation, link, loss, width, a, b, delta, ridge, Sigma0, M0 = (
        f["activation"], f["link"], f["loss"], f["width"], f["a"], f["b"], f["delta"], f["ridge"], f["Sigma0"],
        f["M0"])
    eta = f["eta"] if f["eta"] is not None else f["schedule"][0]  # a Problem's eta, or its first step size
    try:
        net = Network(activation, loss, width, a=a, b=b)
    except TypeError:
        raise TheorykitError("a and b must be numbers (theorykit.Network evaluates them as floats)") from None
    lk = make_link(link)
    m, k = net.m, lk.k
    _require_polynomial("activation", net.activation.name, net.activation.expr, [cv.X])
    _require_polynomial("loss", net.loss.name, net.loss.expr, [cv.Y, cv.YHAT])
    _require_polynomial("link", lk.name, lk.expr, list(lk.variables))

    delta = _exact(delta, "delta")
    eta = _exact(eta, "eta")
    ridge = _exact(ridge, "ridge")
    if delta.is_zero or (delta.is_number and not delta.is_positive):
        raise TheorykitError(f"delta must be > 0, got {delta}")
    Sigma0 = _matrix(Sigma0, (m, m), "Sigma0", sp.eye(m))
    if Sigma0 != Sigma0.T:
        raise TheorykitError("Sigma0 must be symmetric")
    M0 = _matrix(M0, (k, m), "M0", sp.zeros(k, m))

    # 1/delta as its own symbol when delta is not a number, so that every coefficient is a polynomial
    inv_delta = 1 / delta
    back = {}
    if inv_delta.free_symbols:
        iota = sp.Dummy("iota")
        back = {iota: inv_delta}
        inv_delta = iota
    inputs = ([eta, ridge, inv_delta] + list(net.a_sym) + list(net.b_sym) + list(Sigma0) + list(M0)
              + sp.Poly(net.activation.expr, cv.X).coeffs() + sp.Poly(net.loss.expr, cv.Y, cv.YHAT).coeffs()
              + sp.Poly(lk.expr, *lk.variables).coeffs())
    params = sorted(set().union(*(sp.sympify(e).free_symbols for e in inputs)), key=str)
    K = _domain(inputs, params)

    n_std = k + (1 if lk.noisy else 0)
    kk = lambda e: K.from_sympy(sp.sympify(e))  # noqa: E731
    Kz = K.zero
    M0K = [[kk(M0[i, j]) for j in range(m)] for i in range(k)]
    S0K = [[kk(Sigma0[i, j]) for j in range(m)] for i in range(m)]
    etaK, ridgeK, idK = kk(eta), kk(ridge), kk(inv_delta)
    r_syms = list(net.r) + [cv.Y]

    def sample_side(E, w0):
        """y, r^0, u^0, D^0 as polynomials in E's variables."""
        zs = E.std[:k]
        y = E.compose(lk.expr, list(lk.variables), E.std)
        r0 = pre(E, zs, M0K, w0)
        return zs, y, r0, *derivs(E, r0, y)[:2]

    def pre(E, zs, MK, w):
        return [sum((zs[i] * MK[i][j] for i in range(k) if MK[i][j]), E.R.zero) + w[j] for j in range(m)]

    def derivs(E, r, y):
        ims = list(r) + [y]
        cache = {}
        u = [E.compose(net.F_expr[j], r_syms, ims, cache) for j in range(m)]
        D = [[E.compose(net.D_expr[i, j], r_syms, ims, cache) if j >= i else None for j in range(m)]
             for i in range(m)]
        for i in range(m):
            for j in range(i):
                D[i][j] = D[j][i]
        return u, D, cache

    def herm(E, p):
        return E.hermite(p) if E.diagonal else p

    # ---------------------------------------------------------------- t = 0
    E = _Engine(K, n_std, S0K)
    zs, y, r0, u0, D0 = sample_side(E, E.w)
    Ezu0 = [[E.expect(zs[i] * u0[j]) for j in range(m)] for i in range(k)]
    h0 = [herm(E, u) for u in u0]
    Cu00 = [[None] * m for _ in range(m)]
    for i in range(m):
        for j in range(i, m):
            Cu00[i][j] = Cu00[j][i] = E.inner(h0[i], h0[j])
    Ru00 = [[E.expect(D0[i][j]) for j in range(m)] for i in range(m)]
    loss0 = E.loss(net, r0, y)

    # ---------------------------------------------------------------- parameter side
    decay = K.one - etaK * ridgeK
    P1 = [[(decay if i == j else Kz) - etaK * Ru00[i][j] for j in range(m)] for i in range(m)]
    C10 = _matmul(P1, S0K, Kz)
    C11 = _matmul(C10, _transpose(P1), Kz)
    C11 = [[C11[i][j] + etaK * etaK * idK * Cu00[i][j] for j in range(m)] for i in range(m)]
    M1K = [[decay * M0K[i][j] - etaK * Ezu0[i][j] for j in range(m)] for i in range(k)]
    C01 = _transpose(C10)
    cov = [[(S0K[i][j] if j < m else C01[i][j - m]) if i < m else (C10[i - m][j] if j < m else C11[i - m][j - m])
            for j in range(2 * m)] for i in range(2 * m)]

    # ---------------------------------------------------------------- t = 1
    E = _Engine(K, n_std, cov)
    w0, w1 = E.w[:m], E.w[m:]
    zs, y, r0, u0, D0 = sample_side(E, w0)
    mem = -etaK * idK
    base1 = pre(E, zs, M1K, w1)
    r1 = [base1[j] + u0[j] * mem for j in range(m)]
    u1, D1, cache1 = derivs(E, r1, y)
    loss1_train = E.loss(net, r1, y, cache1)
    loss1_test = E.loss(net, base1, y)
    Ezu1 = [[E.expect(zs[i] * u1[j]) for j in range(m)] for i in range(k)]
    h0 = [herm(E, u) for u in u0]
    h1 = [herm(E, u) for u in u1]
    Cu11 = [[None] * m for _ in range(m)]
    for i in range(m):
        for j in range(i, m):
            Cu11[i][j] = Cu11[j][i] = E.inner(h1[i], h1[j])
    Cu10 = [[E.inner(h1[i], h0[j]) for j in range(m)] for i in range(m)]
    Ru11 = [[E.expect(D1[i][j]) for j in range(m)] for i in range(m)]
    hD0 = [[herm(E, D0[i][j]) for j in range(m)] for i in range(m)]  # D[i][j] is D[j][i]: transformed once
    hD1 = [[herm(E, D1[i][j]) for j in range(m)] for i in range(m)]
    Ru10 = [[sum((E.inner(hD1[i][l], hD0[l][j]) for l in range(m)), Kz) * mem for j in range(m)]
            for i in range(m)]
    M2K = [[decay * M1K[i][j] - etaK * Ezu1[i][j] for j in range(m)] for i in range(k)]

    # ---------------------------------------------------------------- back to SymPy
    def out(v):
        e = K.to_sympy(v)
        if back:
            e = sp.expand(e.xreplace(back))
        return e

    def mat(A):
        return sp.Matrix(len(A), len(A[0]), [out(v) for row in A for v in row])

    M1 = mat(M1K)
    C11s = mat(C11)
    return ClosedFormDMFT(
        Ezu0=mat(Ezu0), C_u00=mat(Cu00), R_u00=mat(Ru00), M1=M1, P1=mat(P1), C_theta11=C11s, C_theta10=mat(C10),
        gram0=sp.expand(M0.T * M0 + Sigma0), gram1=(M1.T * M1 + C11s).applyfunc(sp.expand),
        train_loss0=out(loss0), train_loss1=out(loss1_train), test_loss0=out(loss0), test_loss1=out(loss1_test),
        Ezu1=mat(Ezu1), C_u11=mat(Cu11), C_u10=mat(Cu10), R_u11=mat(Ru11), R_u10=mat(Ru10), M2=mat(M2K),
        M0=M0, C_theta00=Sigma0, R_theta10=sp.expand(-eta / delta) * sp.eye(m))
