"""The simulator's fused GD kernel: one read of X per step (docs/theory.md §7, "Speed").

One GD step needs r = X Theta, the per-sample gradient F(r, y) and X^T F.  With NumPy these are two passes over X
(two matmuls, each streaming the whole (n, d) array from memory) with F evaluated in between.  The step is
memory-bound: with m <= 8 columns a matmul does 2m flops per 8 bytes of X read.  This kernel makes one pass: it
takes X in tiles of 4 rows, computes their pre-activations (four columns of Theta at a time), evaluates sigma,
sigma', l and l' for them (scalar functions compiled from the same SymPy expressions as the NumPy path, with exp and
erf taken from :mod:`theorykit.referee._vecmath` so that the loop over a tile's 4 m pre-activations is vectorised),
and adds their contribution to X^T F while the tile is still in cache.  The same kernel without the last part
gives the test loss (one read of X_test).

Numbers: float64 arithmetic throughout, as the NumPy path; X may be stored in float64 or float32 (simulate's
``storage``: numba compiles one kernel per dtype, each element is widened to float64 as it is loaded); the sums are
taken in another order, so the two paths agree to rounding (tests/test_fused_kernel.py: gradient and losses to 1e-12
relative), not bitwise.  The tiles are split into :data:`CHUNKS` fixed chunks whose partial sums are added in a fixed
order, so a run is reproducible bitwise whatever the number of threads.

It needs numba and scalar versions of the activation and loss that numba compiles (every built-in one does; an
expression with a function numba's math module lacks, e.g. erfinv, does not).  :func:`fused_kernel` says why when it
cannot be used; the simulator then falls back to NumPy and records the reason in ``result.method["kernel"]``.
Before first use the compiled scalar functions are checked against the NumPy ones on a grid of points (agreement to
1e-12 relative, the same NaN and inf pattern); a disagreement also falls back.

Compiled once per machine: for each (activation, loss) the kernel's source (the printed scalar functions and the
template :func:`_kernel`) is written to a module in :func:`kernel_cache_dir` (named by the hash of its text) and
imported, and numba's ``cache=True`` keeps the compiled code beside it, so a later process loads it instead of
compiling.  Where that folder cannot be written the same source is compiled in the process.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import sympy as sp

from .. import conventions as cv

#: fixed number of row chunks (partial gradient sums, added in order): the result does not depend on the thread count
CHUNKS = 8
#: rows per tile (the kernel below is written out for 4)
TILE = 4
#: fastmath flags: reassociation and contraction (vectorised dot products, FMA) but no nnan/ninf, so that NaN and inf
#: propagate to the divergence check
FASTMATH = frozenset({"reassoc", "contract", "nsz", "arcp"})
#: agreement of the compiled scalar functions with the NumPy ones (relative, on CHECK_POINTS)
CHECK_RTOL = 1e-12

#: SymPy functions the math-module printer and numba handle (others are named when compiling fails)
_NUMBA_OK = frozenset({"exp", "log", "erf", "erfc", "tanh", "sinh", "cosh", "sin", "cos", "atan", "Abs", "sign",
                       "Heaviside", "Max", "Min", "sigmoid", "softplus", "Piecewise"})

_cache: dict = {}
_pools: dict = {}


def available_threads() -> int:
    """The CPUs this process may use (os.sched_getaffinity), at most CHUNKS: the kernel's default thread count."""
    import os

    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(CHUNKS, n))


def _pool(workers: int):
    """A thread pool of this process (keyed by pid: a pool inherited through fork has no threads in the child)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    key = (os.getpid(), workers)
    if key not in _pools:
        _pools[key] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="theorykit-gd")
    return _pools[key]


def in_threads(workers: int, fn) -> None:
    """fn(0), ..., fn(workers - 1) at once: fn(0) in the calling thread, the others in :func:`_pool` (one thread
    wake-up fewer per call than a pool of ``workers``; fn must release the GIL to run in parallel)."""
    rest = [_pool(workers - 1).submit(fn, w) for w in range(1, workers)] if workers > 1 else []
    fn(0)
    for f in rest:
        f.result()


def _softplus(u):
    return u + math.log1p(math.exp(-u)) if u > 0 else math.log1p(math.exp(u))


def _sigmoid(u):
    if u >= 0:
        return 1.0 / (1.0 + math.exp(-u))
    e = math.exp(u)
    return e / (1.0 + e)


def _heaviside(u, h0=0.5):
    return 1.0 if u > 0 else (0.0 if u < 0 else h0)


#: the functions the printed activations and losses call that the math module lacks: name -> plain Python source
_EXTRAS = {"softplus": _softplus, "sigmoid": _sigmoid, "Heaviside": _heaviside}


def _math_extras():
    """The names the printed functions may call besides the math module's: the extras, compiled, and the branch-free
    exp and erf of :mod:`theorykit.referee._vecmath` in place of the math module's (vectorised in the kernel)."""
    import numba

    out = {name: numba.njit(error_model="numpy")(f) for name, f in _EXTRAS.items()}
    out.update(_vector_math())
    return out


def _vector_math() -> dict:
    """name -> the branch-free function of :mod:`theorykit.referee._vecmath` the printed functions call instead of
    the math module's."""
    from ._vecmath import erf, exp

    return {"exp": exp, "erf": erf}


def _scalar(args, exprs, extras):
    """numba-compiled scalar function args -> tuple(exprs), from SymPy's math-module printer (with common
    subexpressions shared between the expressions, e.g. GeLU's erf between sigma and sigma')."""
    import numba

    return numba.njit(**SCALAR_OPTIONS)(_lambdified(args, exprs, extras))


def _lambdified(args, exprs, extras):
    return sp.lambdify(args, tuple(exprs), modules=[extras, "math"], cse=True)


def _agree(a, b) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    same_nan = np.array_equal(np.isnan(a), np.isnan(b))
    fin = np.isfinite(a) & np.isfinite(b)
    same_inf = np.array_equal(a[~np.isnan(a) & ~fin], b[~np.isnan(b) & ~fin]) and \
        np.array_equal(np.isfinite(a), np.isfinite(b))
    close = np.all(np.abs(a[fin] - b[fin]) <= CHECK_RTOL * np.maximum(1.0, np.abs(b[fin])))
    return bool(same_nan and same_inf and close)


def _check_points():
    u = np.concatenate([np.linspace(-40.0, 40.0, 801), [0.0, 1e-9, -1e-9, 1e-300, 500.0, -500.0]])
    y = np.array([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0, 7.5])
    Y, F = np.meshgrid(y, np.linspace(-20.0, 20.0, 161))
    return u, Y.ravel(), F.ravel()


class FusedStep:
    """``step(X, y, theta)`` -> (sum_i l(y_i, f_i), X^T F (d, m)) in one read of X; ``loss_sum(X, y, theta)`` -> the
    loss sum alone.  Built by :func:`fused_kernel` for one network (its activation and loss; a and b are arguments)."""

    description = ("fused (numba): one pass over X per step in tiles of 4 rows (pre-activation, sigma, l', X^T F "
                   "while the tile is in cache), float64 arithmetic, 8 fixed chunks")

    def __init__(self, net, kernel, threads: Optional[int] = None):
        self.net, self._kernel = net, kernel
        self.threads = available_threads() if threads is None else max(1, min(CHUNKS, int(threads)))
        self.am = np.ascontiguousarray(np.asarray(net.a, dtype=float) / net.m)
        self.b = np.ascontiguousarray(np.asarray(net.b, dtype=float))
        self._G = None

    def _job(self, X, y, theta, backward):
        """(kernel arguments, chunk bounds per worker, L, G) of one pass over X."""
        n, d = X.shape
        m = theta.shape[1]
        nch = max(1, min(CHUNKS, -(-n // TILE)))
        if backward and (self._G is None or self._G.shape != (nch, m, d)):
            self._G = np.empty((nch, m, d))
        G = self._G if backward else np.empty((1, 1, 1))
        L = np.empty(nch)
        args = (X, y, np.ascontiguousarray(theta.T), self.am, self.b, G, L, nch, backward)
        workers = min(self.threads, nch)
        return args, [round(w * nch / workers) for w in range(workers + 1)], L, G

    def _run(self, *jobs):
        """Each job (X, y, theta, backward) -> (loss sum, X^T F (d, m) or None), all in one dispatch to the threads
        (each thread takes its block of chunks of every job)."""
        prepared = [self._job(*job) for job in jobs]
        workers = max(len(bounds) - 1 for _, bounds, _, _ in prepared)

        def work(w):  # the kernel releases the GIL: one thread per block of chunks, the first in the calling thread
            for args, bounds, _, _ in prepared:
                if w + 1 < len(bounds):
                    self._kernel(*args, bounds[w], bounds[w + 1])

        in_threads(workers, work)
        out = []
        for args, _, L, G in prepared:
            total = 0.0
            for c in range(len(L)):  # fixed order
                total += L[c]
            if not args[-1]:
                out.append((total, None))
                continue
            g = G[0].copy()
            for c in range(1, len(L)):
                g += G[c]
            out.append((total, g.T))
        return out

    def step(self, X, y, theta, test=None):
        """(loss sum, X^T F (d, m)) on (X, y) at theta; with ``test`` = (X_test, y_test, W) also the loss sum of the
        test pre-activations X_test W, in the same dispatch to the threads: (loss sum, X^T F, test loss sum)."""
        if test is None:
            return self._run((X, y, theta, True))[0]
        (total, g), (test_total, _) = self._run((X, y, theta, True), (*test, False))
        return total, g, test_total

    def loss_sum(self, X, y, theta):
        return self._run((X, y, theta, False))[0][0]


def _act(u):
    """Placeholder of the template below: (sigma(u), sigma'(u)), bound per network where the kernel is compiled."""
    raise NotImplementedError("the fused kernel's template is compiled with the network's activation bound")


def _loss(y, f):
    """Placeholder of the template below: (l(y, f), dl/df), bound per network where the kernel is compiled."""
    raise NotImplementedError("the fused kernel's template is compiled with the network's loss bound")


#: numba.njit options of the kernel
KERNEL_OPTIONS = {"nogil": True, "fastmath": set(FASTMATH), "error_model": "numpy"}
#: numba.njit options of the scalar activation and loss: inlined into the kernel's loops (so that the loop over a
#: tile's pre-activations is vectorised where sigma is branch-free)
SCALAR_OPTIONS = {"inline": "always", "fastmath": set(FASTMATH), "error_model": "numpy"}


def _kernel(X, y, thT, am, b, G, L, nch, backward, c0, c1):
    """Chunks c0..c1-1 of the step: the loss sum of chunk c into L[c] and, when backward, its X^T F into G[c] (the
    template: :func:`_build` compiles it with the network's scalar functions bound to _act and _loss)."""
    n, d = X.shape
    m = thT.shape[0]
    ntile = (n + 3) // 4
    per = (ntile + nch - 1) // nch
    for c in range(c0, c1):
        if backward:
            G[c, :, :] = 0.0
        R = np.empty(4 * m)  # the tile's pre-activations, row by row
        S0 = np.empty(4 * m)  # sigma and sigma' of them
        S1 = np.empty(4 * m)
        bias = np.empty(4 * m)
        for q in range(4 * m):
            bias[q] = b[q % m]
        F = np.empty((4, m))
        ls = 0.0
        for t in range(c * per, min(ntile, (c + 1) * per)):
            i = 4 * t
            nr = min(4, n - i)
            # rows past the end repeat the last row; their F is 0 and their loss is not counted
            x0 = X[i]
            x1 = X[i + min(1, nr - 1)]
            x2 = X[i + min(2, nr - 1)]
            x3 = X[i + min(3, nr - 1)]
            # X Theta for the tile: four columns of Theta at a time (16 accumulators), then pairs (an odd m repeats
            # its last column)
            k = 0
            while k + 3 < m:
                ta = thT[k]
                tb = thT[k + 1]
                tc = thT[k + 2]
                td = thT[k + 3]
                a0 = 0.0
                a1 = 0.0
                a2 = 0.0
                a3 = 0.0
                b0 = 0.0
                b1 = 0.0
                b2 = 0.0
                b3 = 0.0
                c0 = 0.0
                c1 = 0.0
                c2 = 0.0
                c3 = 0.0
                d0 = 0.0
                d1 = 0.0
                d2 = 0.0
                d3 = 0.0
                for j in range(d):
                    u = ta[j]
                    v = tb[j]
                    w = tc[j]
                    z = td[j]
                    e0 = x0[j]
                    e1 = x1[j]
                    e2 = x2[j]
                    e3 = x3[j]
                    a0 += e0 * u
                    a1 += e1 * u
                    a2 += e2 * u
                    a3 += e3 * u
                    b0 += e0 * v
                    b1 += e1 * v
                    b2 += e2 * v
                    b3 += e3 * v
                    c0 += e0 * w
                    c1 += e1 * w
                    c2 += e2 * w
                    c3 += e3 * w
                    d0 += e0 * z
                    d1 += e1 * z
                    d2 += e2 * z
                    d3 += e3 * z
                R[0 * m + k] = a0
                R[1 * m + k] = a1
                R[2 * m + k] = a2
                R[3 * m + k] = a3
                R[0 * m + k + 1] = b0
                R[1 * m + k + 1] = b1
                R[2 * m + k + 1] = b2
                R[3 * m + k + 1] = b3
                R[0 * m + k + 2] = c0
                R[1 * m + k + 2] = c1
                R[2 * m + k + 2] = c2
                R[3 * m + k + 2] = c3
                R[0 * m + k + 3] = d0
                R[1 * m + k + 3] = d1
                R[2 * m + k + 3] = d2
                R[3 * m + k + 3] = d3
                k += 4
            while k < m:
                kb = min(k + 1, m - 1)
                ta = thT[k]
                tb = thT[kb]
                a0 = 0.0
                a1 = 0.0
                a2 = 0.0
                a3 = 0.0
                b0 = 0.0
                b1 = 0.0
                b2 = 0.0
                b3 = 0.0
                for j in range(d):
                    u = ta[j]
                    v = tb[j]
                    e0 = x0[j]
                    e1 = x1[j]
                    e2 = x2[j]
                    e3 = x3[j]
                    a0 += e0 * u
                    a1 += e1 * u
                    a2 += e2 * u
                    a3 += e3 * u
                    b0 += e0 * v
                    b1 += e1 * v
                    b2 += e2 * v
                    b3 += e3 * v
                R[0 * m + k] = a0
                R[1 * m + k] = a1
                R[2 * m + k] = a2
                R[3 * m + k] = a3
                R[0 * m + kb] = b0
                R[1 * m + kb] = b1
                R[2 * m + kb] = b2
                R[3 * m + kb] = b3
                k += 2
            # sigma on the tile's 4 m pre-activations in one loop, vectorised where sigma is branch-free (rows past
            # the end are evaluated and not used)
            if not backward:  # the loss alone: sigma' and l' are not used (the compiler drops them)
                for q in range(4 * m):
                    s0, s1 = _act(R[q] + bias[q])
                    S0[q] = s0
                for rr in range(nr):
                    f = 0.0
                    for k in range(m):
                        f += am[k] * S0[rr * m + k]
                    l0, l1 = _loss(y[i + rr], f)
                    ls += l0
                continue
            for q in range(4 * m):
                s0, s1 = _act(R[q] + bias[q])
                S0[q] = s0
                S1[q] = s1
            for rr in range(4):
                if rr < nr:
                    f = 0.0
                    for k in range(m):
                        f += am[k] * S0[rr * m + k]
                    l0, l1 = _loss(y[i + rr], f)
                    ls += l0
                    for k in range(m):
                        F[rr, k] = l1 * am[k] * S1[rr * m + k]
                else:
                    for k in range(m):
                        F[rr, k] = 0.0
            # X^T F: up to four output rows per pass over the tile's four x rows (each x element is loaded once
            # per pass, not once per row of G), then pairs, then one row
            k = 0
            while k + 3 < m:
                ga = G[c, k]
                gb = G[c, k + 1]
                gc = G[c, k + 2]
                gd = G[c, k + 3]
                f0, f1, f2, f3 = F[0, k], F[1, k], F[2, k], F[3, k]
                h0, h1, h2, h3 = F[0, k + 1], F[1, k + 1], F[2, k + 1], F[3, k + 1]
                p0, p1, p2, p3 = F[0, k + 2], F[1, k + 2], F[2, k + 2], F[3, k + 2]
                q0, q1, q2, q3 = F[0, k + 3], F[1, k + 3], F[2, k + 3], F[3, k + 3]
                for j in range(d):
                    e0 = x0[j]
                    e1 = x1[j]
                    e2 = x2[j]
                    e3 = x3[j]
                    ga[j] += f0 * e0 + f1 * e1 + f2 * e2 + f3 * e3
                    gb[j] += h0 * e0 + h1 * e1 + h2 * e2 + h3 * e3
                    gc[j] += p0 * e0 + p1 * e1 + p2 * e2 + p3 * e3
                    gd[j] += q0 * e0 + q1 * e1 + q2 * e2 + q3 * e3
                k += 4
            while k + 1 < m:
                ga = G[c, k]
                gb = G[c, k + 1]
                f0, f1, f2, f3 = F[0, k], F[1, k], F[2, k], F[3, k]
                h0, h1, h2, h3 = F[0, k + 1], F[1, k + 1], F[2, k + 1], F[3, k + 1]
                for j in range(d):
                    e0 = x0[j]
                    e1 = x1[j]
                    e2 = x2[j]
                    e3 = x3[j]
                    ga[j] += f0 * e0 + f1 * e1 + f2 * e2 + f3 * e3
                    gb[j] += h0 * e0 + h1 * e1 + h2 * e2 + h3 * e3
                k += 2
            if k < m:
                ga = G[c, k]
                f0, f1, f2, f3 = F[0, k], F[1, k], F[2, k], F[3, k]
                for j in range(d):
                    ga[j] += f0 * x0[j] + f1 * x1[j] + f2 * x2[j] + f3 * x3[j]
        L[c] = ls


def fused_kernel(net, threads: Optional[int] = None) -> tuple[Optional[FusedStep], str]:
    """(FusedStep, "") for ``net``, or (None, the reason it cannot be used).  Compiled once per (activation, loss) and
    machine (a few seconds; later processes load the compiled code from :func:`kernel_cache_dir`); the compiled scalar
    functions are checked against the NumPy ones first.  threads: how
    many threads run the chunks (default :func:`available_threads`; the result does not depend on it)."""
    key = (str(net.activation.expr), str(net.loss.expr))
    if key not in _cache:
        _cache[key] = _build(net)
    kernel, reason = _cache[key]
    return (FusedStep(net, kernel, threads) if kernel is not None else None), reason


def _build(net):
    try:
        import numba  # noqa: F401
    except ImportError:
        return None, "numba is not installed"
    a, lo = net.activation, net.loss
    try:
        extras = _math_extras()
        act_py = _lambdified([cv.X], (a.expr, a.d1_numeric), extras)
        loss_py = _lambdified([cv.Y, cv.YHAT], (lo.expr, lo.d1_numeric), extras)
        mod = _generated_module(act_py, loss_py)
        if mod is not None:
            act, loss, kernel = mod._act, mod._loss, mod.kernel
        else:  # a name the cached module cannot import: compiled in this process only
            act = numba.njit(**SCALAR_OPTIONS)(act_py)
            loss = numba.njit(**SCALAR_OPTIONS)(loss_py)
            kernel = _bound_kernel(act, loss)
        u, Y, Fv = _check_points()
        got_a = np.array([act(float(v)) for v in u]).T
        got_l = np.array([loss(float(p), float(q)) for p, q in zip(Y, Fv)]).T
    except Exception as exc:  # numba's typing errors are long: the first line says which function failed
        funcs = sorted({type(f).__name__ for e in (a.expr, lo.expr) for f in e.atoms(sp.Function)} - _NUMBA_OK)
        why = f"functions {', '.join(funcs)}" if funcs else (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None, f"the activation or loss does not compile to a numba scalar function ({why[:160]})"
    want_a = a.numpy(u)[:2]
    want_l = lo.numpy(Y, Fv)[:2]
    if not all(_agree(g, w) for g, w in zip(got_a, want_a)):
        return None, "the compiled activation disagrees with the NumPy one on the check grid"
    if not all(_agree(g, w) for g, w in zip(got_l, want_l)):
        return None, "the compiled loss disagrees with the NumPy one on the check grid"
    return kernel, ""


def _bound_kernel(act, loss):
    """The template :func:`_kernel` compiled in this process with ``act`` and ``loss`` bound (no disk cache)."""
    import builtins
    import types

    import numba

    glob = {"np": np, "_act": act, "_loss": loss, "__builtins__": builtins}
    return numba.njit(**KERNEL_OPTIONS)(types.FunctionType(_kernel.__code__, glob, "_kernel"))


# ------------------------------------------------------------------------------------- compiled-code cache
#: environment variable naming the folder of the kernels' generated modules and numba's compiled code beside them
#: (default: $XDG_CACHE_HOME/theorykit/kernels, i.e. ~/.cache/theorykit/kernels)
CACHE_ENV = "THEORYKIT_KERNEL_CACHE"
_MISSING = object()


def kernel_cache_dir() -> str:
    """The folder of the compiled-kernel cache: $THEORYKIT_KERNEL_CACHE, else $XDG_CACHE_HOME/theorykit/kernels
    (XDG_CACHE_HOME defaults to ~/.cache)."""
    import os

    env = os.environ.get(CACHE_ENV)
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "theorykit", "kernels")


def module_source(act_py, loss_py, cache: bool = True) -> Optional[str]:
    """The Python source of a module that defines the fused kernel for one network: the printed activation and loss
    (``act_py``, ``loss_py``: SymPy's lambdify output) as _act and _loss, the math-module extras they call, and the
    template :func:`_kernel` as ``kernel``, each wrapped in numba.njit (with ``cache``: numba keeps the compiled code
    beside the module's file, so a later process loads it instead of compiling).  None when a name the printed
    functions use is neither the math module's, a builtin nor one of the extras."""
    import builtins
    import inspect

    from ._vecmath import SOURCE_DIGEST

    vector = _vector_math()
    from_math, from_vector, parts = set(), set(), []
    for f, name in ((act_py, "_act"), (loss_py, "_loss")):
        for nm in f.__code__.co_names:
            obj = f.__globals__.get(nm, _MISSING)
            if nm in _EXTRAS:
                continue
            if nm in vector and obj is vector[nm]:
                from_vector.add(nm)
                continue
            if obj is not _MISSING and obj is getattr(math, nm, _MISSING):
                from_math.add(nm)
            elif obj is _MISSING and hasattr(builtins, nm) or obj is getattr(builtins, nm, _MISSING):
                continue
            else:
                return None
        try:
            src = inspect.getsource(f)
        except (OSError, TypeError):
            return None
        if not src.startswith("def _lambdifygenerated("):
            return None
        parts.append(src.replace("def _lambdifygenerated(", f"def {name}_py(", 1).rstrip() + "\n\n\n"
                     f"{name} = numba.njit(inline=\"always\", error_model=\"numpy\", fastmath=FASTMATH, "
                     f"cache=CACHE)({name}_py)\n")
    opts = f"nogil=True, fastmath=FASTMATH, error_model={KERNEL_OPTIONS['error_model']!r}, cache=CACHE"
    head = ['"""The fused GD kernel of theorykit for one network, generated by theorykit.referee._fused (do not '
            'edit:', 'the file name is the hash of this text; numba keeps the compiled code in __pycache__ '
            'beside it)."""', "import math", "", "import numba", "import numpy as np"]
    if from_math:
        head.append(f"from math import {', '.join(sorted(from_math))}")
    if from_vector:  # with the hash of its source: a changed _vecmath gives a new module, so no stale compiled code
        head.append(f"from theorykit.referee._vecmath import {', '.join(sorted(from_vector))}  # {SOURCE_DIGEST}")
    head += ["", f"FASTMATH = set({sorted(FASTMATH)!r})", f"CACHE = {bool(cache)!r}", "", ""]
    extras = [inspect.getsource(f).rstrip() + "\n\n\n" for f in _EXTRAS.values()]
    extras.append("".join(f"{nm} = numba.njit(error_model=\"numpy\", cache=CACHE)({f.__name__})\n"
                          for nm, f in _EXTRAS.items()) + "\n\n")
    kernel = inspect.getsource(_kernel).rstrip() + f"\n\n\nkernel = numba.njit({opts})(_kernel)\n"
    return "\n".join(head) + "".join(extras) + "\n\n".join(parts) + "\n\n" + kernel


def _generated_module(act_py, loss_py):
    """The module of :func:`module_source`, written once to the cache folder (its name is the hash of its text) and
    imported, so that numba's cache=True keeps the compiled kernel for every later process; where the folder cannot
    be written, the same source compiled in this process only.  None when :func:`module_source` is."""
    import hashlib
    import importlib.util
    import os
    import sys
    import types

    src = module_source(act_py, loss_py)
    if src is None:
        return None
    name = "theorykit_fused_" + hashlib.sha256(src.encode()).hexdigest()[:20]
    if name in sys.modules:
        return sys.modules[name]
    folder = kernel_cache_dir()
    path = os.path.join(folder, name + ".py")
    try:
        if not os.path.exists(path):  # written once: rewriting would change its time stamp, numba's cache key
            os.makedirs(folder, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(src)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise OSError(f"cannot import {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    except OSError:  # a read-only cache folder: compile in this process
        sys.modules.pop(name, None)
        mod = types.ModuleType(name)
        exec(compile(module_source(act_py, loss_py, cache=False) or "", f"<{name}>", "exec"), mod.__dict__)
    return mod
