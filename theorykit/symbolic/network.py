"""Per-sample derivatives of the loss of a two-layer network in its pre-activations (docs/theory.md §1).

    f(r) = (1/m) sum_j a_j sigma(r_j + b_j),            r = Theta^T x in R^m,
    F(r, y) = grad_r l(y, f(r)) = l' grad f,            grad f_j = a_j sigma'(r_j + b_j) / m,
    D(r, y) = hess_r l(y, f(r)) = l'' grad f grad f^T + l' diag(a_j sigma''(r_j + b_j) / m),
with l' = dl/dyhat and l'' = d^2 l/dyhat^2 at yhat = f(r).

The symbolic F and D (``F_expr``, ``D_expr``, in r1..rm and y) are exact SymPy matrices.  The numerical versions
evaluate the same expressions through one lambdified (CSE'd) function of sigma, sigma', sigma'' and one of l, l', l'',
then assemble the rank-one-plus-diagonal structure of D: O(m) work per sample instead of O(m^2) lambdified entries.
Tests check both against each other and against finite differences.  The simulator, the DMFT and the Hessian theory
all call :meth:`Network.evaluate`: one copy of the network's derivatives.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy as sp

from .. import conventions as cv
from ..errors import TheorykitError
from .ingredients import Activation, Loss, activation as make_activation, loss as make_loss
from .lambdify import drop_dirac, lambdify_safe


def _is_scalar(spec) -> bool:
    """A single number: int, float, a NumPy scalar or 0-d array, or a SymPy number (bool is not a number here)."""
    if isinstance(spec, (bool, np.bool_)):
        return False
    if isinstance(spec, sp.Basic):
        return not isinstance(spec, (sp.MatrixBase, sp.Tuple))
    return isinstance(spec, (int, float, np.integer, np.floating)) or (isinstance(spec, np.ndarray) and spec.ndim == 0)


def _number(it, name: str) -> sp.Expr:
    """One entry -> an exact SymPy number (floats through their shortest repr: 0.1 -> 1/10); a one-line error else."""
    if isinstance(it, (bool, np.bool_)):
        raise TheorykitError(f"--{name}: {it!r} is not a number")
    if isinstance(it, np.ndarray) and it.ndim == 0:
        it = it.item()
    if isinstance(it, sp.Basic):
        v = it
    else:
        try:
            v = sp.nsimplify(sp.Rational(str(it).strip()))
        except (TypeError, ValueError, SyntaxError, ZeroDivisionError, OverflowError):  # '0/0', '1/0': Fraction raises
            raise TheorykitError(f"--{name}: {it!r} is not a number") from None
    if not isinstance(v, sp.Expr) or not v.is_number:
        raise TheorykitError(f"--{name}: {it!r} is not a number")
    try:
        c = complex(v.evalf())
    except (TypeError, ValueError):
        raise TheorykitError(f"--{name}: {it!r} is not a number") from None
    if c.imag != 0 or not np.isfinite(c.real):
        raise TheorykitError(f"--{name}: {it!r} is not a real finite number")
    return v


def parse_vector(spec, m: int, name: str, default) -> tuple:
    """-> tuple of m SymPy numbers.  Accepts a comma-separated string ('1,-1'), a sequence or 1-d array of m numbers,
    or a single number (int, float, NumPy scalar, SymPy number, or a one-entry string or sequence), which is broadcast
    to all m entries (the rule of :func:`theorykit._checks.check_vector` too); None -> m copies of default.  Any other
    entry count than 1 or m, or anything else, is a one-line :class:`TheorykitError`."""
    if spec is None:
        return tuple(sp.Integer(default) for _ in range(m))
    if _is_scalar(spec):
        v = _number(spec, name)
        return tuple(v for _ in range(m))
    if isinstance(spec, str):
        items = [s.strip() for s in spec.split(",")]
    elif isinstance(spec, np.ndarray):
        if spec.ndim != 1:
            raise TheorykitError(f"--{name} must be a number or a vector of m = {m} numbers (got an array of shape "
                                 f"{spec.shape})")
        items = list(spec)
    elif isinstance(spec, (list, tuple, sp.Tuple)) or (isinstance(spec, sp.MatrixBase) and 1 in spec.shape):
        items = list(spec)
    else:
        raise TheorykitError(f"--{name} must be a number, a comma-separated string or a sequence of m = {m} numbers "
                             f"(got {type(spec).__name__})")
    if len(items) == 1:
        items = items * m
    if len(items) != m:
        raise TheorykitError(f"--{name} has {len(items)} entries but the width is m = {m}")
    return tuple(_number(it, name) for it in items)


def eigen_range(D: np.ndarray) -> tuple:
    """(smallest, largest) eigenvalue of each symmetric m x m matrix in D (N, m, m): closed form for m <= 2."""
    D = np.asarray(D, dtype=float)
    m = D.shape[1]
    if m == 1:
        return D[:, 0, 0], D[:, 0, 0]
    if m == 2:
        h = 0.5 * (D[:, 0, 0] - D[:, 1, 1])
        rad = np.sqrt(h * h + D[:, 0, 1] ** 2)
        mid = 0.5 * (D[:, 0, 0] + D[:, 1, 1])
        return mid - rad, mid + rad
    ev = np.linalg.eigvalsh(D)
    return ev[:, 0], ev[:, -1]


@dataclass(frozen=True)
class Derivatives:
    """Network quantities at N samples.  Shapes: f, loss, l1, l2 (N,); F, grad_f, curv (N, m).

    F = l1 * grad_f; D = l2 grad_f grad_f^T + diag(curv), curv_j = l1 a_j sigma''(r_j + b_j) / m.
    """

    f: np.ndarray
    loss: np.ndarray
    l1: np.ndarray
    l2: np.ndarray
    F: np.ndarray
    grad_f: np.ndarray
    curv: np.ndarray

    @property
    def D(self) -> np.ndarray:
        """(N, m, m) per-sample Hessians in r."""
        g = self.grad_f
        N, m = g.shape
        out = np.empty((N, m, m))
        lg = self.l2[:, None] * g  # entry (i, j) = (l2 g_i) g_j (+ curv_i on the diagonal), written column by column
        for i in range(m):
            for j in range(m):
                out[:, i, j] = lg[:, i] * g[:, j] + self.curv[:, i] if i == j else lg[:, i] * g[:, j]
        return out

    def eigen_range(self) -> tuple:
        """(smallest, largest) eigenvalue of every sample's D, each (N,): exact closed forms for m <= 2 (m = 1
        without forming D); beyond, the roots of D's secular equation (D is diagonal plus rank one:
        :mod:`theorykit.symbolic._eig`), NaN for a sample with a non-finite entry. The one implementation the DMFT's
        tails and the finite-d Hessian's spike start use."""
        m = self.grad_f.shape[1]
        if m == 1:
            d = self.l2 * self.grad_f[:, 0] ** 2 + self.curv[:, 0]
            return d, d
        if m == 2:
            return eigen_range(self.D)
        # D = diag(curv) + l2 grad_f grad_f^T: two secular-equation roots per sample instead of a batched eigvalsh
        from ._eig import rank_one_extremes

        N = len(self.grad_f)
        lo, hi = np.empty(N), np.empty(N)
        rank_one_extremes(*(np.ascontiguousarray(np.broadcast_to(v, shape), dtype=float)
                            for v, shape in ((self.curv, (N, m)), (self.grad_f, (N, m)), (self.l2, (N,)))), lo, hi)
        return lo, hi

    def D_apply(self, v: np.ndarray) -> np.ndarray:
        """D_i v_i for v of shape (N, m), without forming D: O(N m)."""
        return self.l2[:, None] * np.sum(self.grad_f * v, axis=1)[:, None] * self.grad_f + self.curv * v


class Network:
    """A two-layer network's loss as a function of its pre-activations: sigma, loss, a (m,), b (m,)."""

    def __init__(self, activation, loss, width: int = 1, a=None, b=None):
        if not isinstance(width, (int, np.integer)) or width < 1 or width > 4096:
            raise TheorykitError(f"width m must be an integer in 1..4096, got {width!r}")
        self.activation: Activation = make_activation(activation)
        self.loss: Loss = make_loss(loss)
        self.m = int(width)
        self.a_sym = parse_vector(a, self.m, "a", 1)
        self.b_sym = parse_vector(b, self.m, "b", 0)
        self.a = np.array([float(v) for v in self.a_sym])
        self.b = np.array([float(v) for v in self.b_sym])

    def __repr__(self):
        return (f"Network(activation={self.activation.name!r}, loss={self.loss.name!r}, m={self.m}, "
                f"a={list(map(str, self.a_sym))}, b={list(map(str, self.b_sym))})")

    @property
    def kinked(self) -> bool:
        """True when sigma' jumps (a kink of the activation) or the loss's derivative jumps in yhat: the Dirac terms
        of docs/theory.md §3.1, which only Stein's responses carry."""
        return bool(self.activation.kinks) or bool(self.loss.derivative_jumps)

    @cached_property
    def hessian_psd(self) -> bool:
        """True when every per-sample Hessian D_i = l'' grad f grad f^T + l' diag(a_j sigma''(u_j) / m) is positive
        semi-definite almost surely: sigma'' = 0 off its kinks (ReLU, |x|, a linear sigma) and l'' >= 0 (checked on
        the grid y in [-10, 10], yhat in [-30, 30]).  Then the empirical Hessian has no negative eigenvalue at any delta
        and t, so the spectral criterion (a negative hard outlier) never fires (docs/theory.md §5)."""
        if not sp.simplify(self.activation.d2_expr) == 0:
            return False
        Y, F = np.meshgrid(np.linspace(-10.0, 10.0, 41), np.linspace(-30.0, 30.0, 121))
        l2 = self.loss.numpy(Y.ravel(), F.ravel())[2]
        return bool(np.all(np.isfinite(l2)) and np.all(l2 >= -1e-12))

    # ------------------------------------------------------------------ symbolic
    @cached_property
    def r(self) -> tuple:
        return tuple(cv.r_symbol(j + 1) for j in range(self.m))

    @cached_property
    def f_expr(self) -> sp.Expr:
        s = self.activation.expr
        return sum(aj * s.subs(cv.X, rj + bj) for aj, bj, rj in zip(self.a_sym, self.b_sym, self.r)) / self.m

    @cached_property
    def loss_expr(self) -> sp.Expr:
        return self.loss.expr.subs(cv.YHAT, self.f_expr)

    @cached_property
    def F_expr(self) -> sp.Matrix:
        """F(r, y) = grad_r l(y, f(r)), an m x 1 SymPy matrix."""
        return sp.Matrix([sp.diff(self.loss_expr, rj) for rj in self.r])

    @cached_property
    def D_expr(self) -> sp.Matrix:
        """D(r, y) = hess_r l(y, f(r)), m x m (DiracDelta terms from kinks dropped: they vanish a.s.)."""

        H = sp.hessian(self.loss_expr, self.r)
        return H.applyfunc(lambda e: drop_dirac(e)[0])

    def lambdified_symbolic(self):
        """(r (N, m), y (N,)) -> (F (N, m), D (N, m, m)) straight from F_expr and D_expr (slow; for checks)."""
        args = list(self.r) + [cv.Y]
        fF = lambdify_safe(args, tuple(self.F_expr), "F")
        fD = lambdify_safe(args, tuple(self.D_expr), "D")

        def g(r, y):
            cols = [r[:, j] for j in range(self.m)] + [y]
            F = np.stack(fF(*cols), axis=1)
            D = np.stack(fD(*cols), axis=1).reshape(len(y), self.m, self.m)
            return F, D

        return g

    # ------------------------------------------------------------------ numeric
    def evaluate(self, r: np.ndarray, y: np.ndarray) -> Derivatives:
        """All per-sample quantities at pre-activations r (N, m) and responses y (N,)."""
        r = np.asarray(r, dtype=float)
        y = np.asarray(y, dtype=float)
        if r.ndim != 2 or r.shape[1] != self.m or y.shape != (r.shape[0],):
            raise TheorykitError(f"expected r of shape (N, {self.m}) and y of shape (N,), got {r.shape}, {y.shape}")
        s0, s1, s2 = self.activation.numpy(r + self.b)
        f = s0 @ self.a / self.m
        l0, l1, l2 = self.loss.numpy(y, f)
        grad_f = s1 * (self.a / self.m)
        F = l1[:, None] * grad_f
        curv = l1[:, None] * s2 * (self.a / self.m)
        return Derivatives(f=f, loss=np.asarray(l0), l1=np.asarray(l1), l2=np.asarray(l2), F=F, grad_f=grad_f,
                           curv=curv)

    def F(self, r, y) -> np.ndarray:
        """(N, m) per-sample gradients in r."""
        return self.evaluate(r, y).F

    def D(self, r, y) -> np.ndarray:
        """(N, m, m) per-sample Hessians in r."""
        return self.evaluate(r, y).D

    def output(self, r) -> np.ndarray:
        r = np.asarray(r, dtype=float)
        return self.activation.numpy(r + self.b)[0] @ self.a / self.m

    def loss_values(self, r, y) -> np.ndarray:
        return self.loss.numpy(np.asarray(y, dtype=float), self.output(r))[0]
