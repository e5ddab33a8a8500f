"""How a DMFT is solved, as opposed to what is solved (the :class:`theorykit.Problem`): the numerical options of
:func:`theorykit.dynamics.solver.dmft` in one frozen record, checked in one place (docs/theory.md §3, numerics)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from .. import defaults
from .._checks import check_int, check_number
from ..errors import TheorykitError

#: a replica averages over its own paths: fewer than this is no average (and thousands of one-path replicas cost
#: thousands of solves for nothing)
MIN_PATHS_PER_REPLICA = 2


@dataclass(frozen=True)
class DMFTNumerics:
    """The numerical options of one DMFT solve, with the meanings and defaults of :func:`dmft`'s keywords: paths and
    replicas, the latent rule (latent, order), the response estimator (response, response_paths, window, fine_lags),
    the Gaussian process' sampler and jitter, the seed, the parallel processes, what is kept (kernels, keep_law_at),
    the bias check, a common path exclusion (exclude), the start (init and the spectral_* options of the spectral
    start), the innovations' horizon, whether the hard process is solved, and the finite sample whose latent tail is
    truncated: d (n = delta d), or reach (n itself; the solver's own check of a divergence uses it); whether the
    latent nodes mirrored along the hard direction share their driving normals (mirror); and when a replica stops
    early, its overlap with a latent direction held (stop_overlap).

    :meth:`checked` validates the options a solve of T steps needs before planning and returns them normalised;
    latent, response, window, sampler, bias_check and fine_lags are checked where 'auto' is resolved
    (:func:`theorykit.dynamics.plan.make_plan`)."""

    paths: int = defaults.DMFT_PATHS
    replicas: int = defaults.DMFT_REPLICAS
    latent: str = defaults.DMFT_LATENT
    order: Optional[int] = None
    response_paths: Optional[int] = None
    jitter: float = defaults.DMFT_JITTER
    sampler: str = defaults.DMFT_SAMPLER
    response: str = defaults.DMFT_RESPONSE
    window: int = defaults.DMFT_WINDOW
    seed: int = defaults.DMFT_SEED
    processes: Optional[int] = None
    kernels: bool = False
    progress: bool = False
    bias_check: Any = "auto"
    keep_law_at: Any = ()
    exclude: Any = None
    init: str = "random"
    spectral_T: Any = None
    spectral_steps: int = 100
    spectral_eta: float = 1.0
    spectral_m0: float = 1e-2
    horizon: Optional[int] = None
    hard_process: bool = True
    fine_lags: Any = "auto"
    d: Optional[int] = None
    reach: Optional[int] = None
    mirror: bool = False
    stop_overlap: Any = None

    def checked(self, T: int) -> "DMFTNumerics":
        """These options checked for a solve of T GD steps (one-line errors), normalised: integers as int,
        keep_law_at a sorted tuple of times in 0..T, horizon >= T."""
        paths = check_int("paths", self.paths, 2)
        replicas = check_int("replicas", self.replicas, 2)
        if paths // replicas < MIN_PATHS_PER_REPLICA:  # paths is the total over replicas
            raise TheorykitError(f"paths = {paths} over replicas = {replicas} leaves {paths // replicas} path(s) per "
                                 f"replica (at least {MIN_PATHS_PER_REPLICA}): raise paths or lower replicas")
        seed = check_int("seed", self.seed, 0)
        if not (isinstance(self.jitter, (int, float)) and 0 <= self.jitter < 1e-3):
            raise TheorykitError(f"jitter must be in [0, 1e-3), got {self.jitter!r}")
        order = None if self.order is None else check_int("order", self.order, 1, 1000)
        if self.init not in ("random", "spectral"):
            raise TheorykitError(f"init must be 'random' or 'spectral', got {self.init!r}")
        spectral = {}
        if self.init == "spectral":
            spectral = dict(spectral_steps=check_int("spectral_steps", self.spectral_steps, 1),
                            spectral_eta=check_number("spectral_eta", self.spectral_eta, lambda v: v > 0, "> 0"),
                            spectral_m0=check_number("spectral_m0", self.spectral_m0, lambda v: 0 < v < 1,
                                                     "in (0, 1)"))
        keep = self.keep_law_at
        try:
            keep = sorted({int(v) for v in np.atleast_1d(np.asarray(keep if keep is not None else (), dtype=float))})
        except (TypeError, ValueError):
            raise TheorykitError(f"keep_law_at must be a list of time indices, got {self.keep_law_at!r}") from None
        if any(v < 0 or v > T for v in keep):
            raise TheorykitError(f"keep_law_at: times must lie in 0..{T}, got {keep}")
        if self.exclude is not None and (len(self.exclude) != replicas):
            raise TheorykitError(f"exclude must hold one path mask per replica ({replicas}), got {len(self.exclude)}")
        if not isinstance(self.hard_process, bool):
            raise TheorykitError(f"hard_process must be True or False, got {self.hard_process!r}")
        horizon = None if self.horizon is None else check_int("horizon", self.horizon, T)
        d = None if self.d is None else check_int("d", self.d, 1)
        reach = None if self.reach is None else check_int("reach", self.reach, 1)
        if d is not None and reach is not None:
            raise TheorykitError("give d or reach, not both")
        if not isinstance(self.mirror, bool):
            raise TheorykitError(f"mirror must be True or False, got {self.mirror!r}")
        stop = self.stop_overlap
        if stop is not None:
            try:
                e, level, hold = stop
                e = tuple(float(v) for v in np.atleast_1d(np.asarray(e, dtype=float)))
            except (TypeError, ValueError):
                raise TheorykitError("stop_overlap must be (e, level, hold): a unit latent vector, a number in (0, 1) "
                                     f"and an integer >= 1, got {stop!r}") from None
            if not (isinstance(level, (int, float)) and 0 < level < 1) or not np.all(np.isfinite(e)):
                raise TheorykitError(f"stop_overlap's level must be in (0, 1) and e finite, got {stop!r}")
            stop = (e, float(level), check_int("stop_overlap's hold", hold, 1))
        return replace(self, paths=paths, replicas=replicas, seed=seed, order=order, keep_law_at=tuple(keep),
                       horizon=horizon, d=d, reach=reach, stop_overlap=stop, **spectral)
