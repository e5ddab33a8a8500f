"""Figures (matplotlib, Agg): each function takes plain data (dicts, DataFrames) and returns a Figure, so that the
``theorykit plot`` command, the examples and a user's notebook draw the same picture.  :func:`save` writes PNG and
PDF.  What each figure shows, and the data it needs, is in its docstring; the gallery is docs/figures/."""
from __future__ import annotations

import math
import os
from typing import Optional, Sequence

import numpy as np


def pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend (unless one is already chosen)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save(fig, stem: str) -> list:
    """Write ``stem.png`` (150 dpi) and ``stem.pdf``; returns the two paths."""
    d = os.path.dirname(os.path.abspath(stem))
    os.makedirs(d, exist_ok=True)
    paths = [stem + ".png", stem + ".pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    pyplot().close(fig)
    return paths


def delta_range(deltas) -> tuple:
    """The x range :func:`success` draws for these deltas: their span, padded by 4% on each side."""
    lo, hi = float(min(deltas)), float(max(deltas))
    pad = 0.04 * (hi - lo) if hi > lo else 0.5
    return lo - pad, hi + pad


def mark(name: str, label: str, m) -> tuple:
    """(delta, legend text) of one mark of :func:`success`: m is a number (text "NAME (LABEL) = DELTA") or
    {"delta": x, "text": legend text}."""
    x, text = (m.get("delta"), m.get("text")) if isinstance(m, dict) else (m, None)
    return x, text or (f"{name} ({label}) = {x:.3g}" if x is not None else f"{name} ({label})")


def success(curves: dict, marks: Optional[dict] = None, title: str = "", predictions: Optional[dict] = None,
            notes: Sequence[str] = (), xlim: Optional[tuple] = None):
    """Success probability of finite-d GD against delta.  curves: label -> DataFrame of
    ``theorykit.referee.sweeps.summarise`` (delta, success_probability, low, high); predictions: label -> list of
    {delta, probability, low, high} (:func:`theorykit.finite_d` at the horizon; NaN points skipped), drawn dashed
    with a hatched band in the curve's colour; marks: label -> {name: delta, or {"delta": x, "text": legend text}}
    (vertical lines, e.g. delta_alg, delta_NN), drawn in the curve's colour.  The x range is ``xlim`` (default
    :func:`delta_range` of the curves' and predictions' deltas); a mark outside it (infinite included) is a
    labelled arrow at the nearer edge pointing out of the range, its text in the legend with "off scale".  Predictions
    whose m_star is noise-limited are open squares.  The legend is right of the axes; notes: lines written under the
    axes (e.g. why a curve has no prediction)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    styles = ["--", ":", "-.", (0, (5, 1)), (0, (1, 1))]
    if xlim is None:
        xs = [float(x) for s in curves.values() for x in s["delta"]]
        xs += [p["delta"] for pts in (predictions or {}).values() for p in pts]
        xlim = delta_range(xs)
    outside = 0  # off-scale marks so far (arrowheads stacked down from the top)
    for i, (label, s) in enumerate(curves.items()):
        line, = ax.plot(s["delta"], s["success_probability"], "o-", label=label)
        colour = line.get_color()
        ax.fill_between(s["delta"], s["low"], s["high"], color=colour, alpha=0.2, lw=0)
        pts = [p for p in (predictions or {}).get(label) or [] if math.isfinite(p["probability"])]
        if pts:
            x = [p["delta"] for p in pts]
            ax.plot(x, [p["probability"] for p in pts], "s--", color=colour, ms=4, lw=1.2,
                    label=f"finite-d prediction, DMFT ({label})")
            noisy = [p for p in pts if p.get("noise_limited")]
            if noisy:
                ax.plot([p["delta"] for p in noisy], [p["probability"] for p in noisy], "s", ms=6, mfc="white",
                        color=colour, label=f"open: noise-limited m_star, unreliable ({label})")
            ax.fill_between(x, [p["low"] for p in pts], [p["high"] for p in pts], facecolor="none", edgecolor=colour,
                            hatch="///", lw=0, alpha=0.6)
        for j, (name, m) in enumerate(((marks or {}).get(label) or {}).items()):
            x, text = mark(name, label, m)
            if x is None or math.isnan(x):
                continue
            if xlim[0] <= x <= xlim[1]:
                ax.axvline(x, color=colour, ls=styles[j % len(styles)], lw=1.2, label=text)
                continue
            left = x < xlim[0]
            # a labelled arrow pointing out of the range at the nearer edge (not a bare marker, which would read as
            # a data point); the full text in the legend through a line-less proxy
            edge, y = (xlim[0] if left else xlim[1]), 0.95 - 0.07 * outside
            span = 0.12 * (xlim[1] - xlim[0])
            rel = ">=" if ">=" in text else "="  # a lower bound (delta_NN not converged) stays one
            short = f"{name} {rel} {x:.4g}" if math.isfinite(x) else f"{name} = {'-' if left else ''}inf"
            ax.annotate(short, xy=(edge, y), xytext=(edge + span if left else edge - span, y),
                        xycoords=ax.get_xaxis_transform(), textcoords=ax.get_xaxis_transform(), color=colour,
                        fontsize=7, va="center", ha="left" if left else "right",
                        arrowprops=dict(arrowstyle="->", color=colour, lw=1.2))
            ax.plot([], [], ls="none", marker=r"$\leftarrow$" if left else r"$\rightarrow$", color=colour, ms=9,
                    label=f"{text}: off scale, {'below' if left else 'above'} the range (labelled arrow)")
            outside += 1
    ax.set_xlim(*xlim)
    ax.axhline(0.5, color="grey", lw=0.6)
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel("P(success): hard overlap > 1/2 by the horizon")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if notes:
        ax.annotate("\n".join(notes), xy=(0, -0.16), xycoords="axes fraction", va="top", fontsize=6.5)
    return fig


def hessian(density: dict, eigenvalues: Sequence[float], outliers: Sequence[dict], edge: float, title: str = "",
            spikes: Sequence[dict] = ()):
    """The finite-d Hessian's eigenvalues (histogram, density-normalised) over the predicted bulk density, with the
    predicted bulk edge, the hard outliers (and, at finite d, the predicted single-sample spikes) marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ev = np.asarray(eigenvalues, dtype=float)
    lam, rho = np.asarray(density.get("lambda", []), dtype=float), np.asarray(density.get("rho", []), dtype=float)
    lo = min([ev.min() if ev.size else 0.0] + [o["lambda"] for o in outliers if o.get("lambda") is not None])
    hi = max([ev.max() if ev.size else 0.0] + ([lam.max()] if lam.size else [])) or 1.0
    bins = np.linspace(lo - 0.02 * (hi - lo), hi, 80)
    ax.hist(ev, bins=bins, density=True, color="C0", alpha=0.5, label=f"finite d: {ev.size} eigenvalues")
    if lam.size:
        ax.plot(lam, rho, "C1", lw=1.5, label="predicted bulk density")
    if edge is not None and math.isfinite(edge):
        ax.axvline(edge, color="C1", ls=":", lw=1, label=f"predicted edge {edge:.3g}")
    for o in outliers:
        if o.get("lambda") is not None:
            ax.axvline(o["lambda"], color="C3", lw=1.5,
                       label=f"predicted hard outlier {o['lambda']:.3g} "
                             f"(overlap² {o.get('overlap2', float('nan')):.2f})")
    if ev.size:  # the lowest finite-d eigenvalues, one mark each (a histogram bar of one eigenvalue is easy to miss)
        low = np.sort(ev)[:5]
        ax.plot(low, np.full(low.size, 0.05), "kx", ms=6, label=f"lowest finite-d eigenvalues ({low[0]:.3g}, ...)")
    for s in [s for s in spikes if s.get("lambda") is not None][:3]:
        ax.axvline(s["lambda"], color="C2", ls="--", lw=0.8)
    ax.set_yscale("symlog", linthresh=1e-2)
    ax.set_xlabel(r"eigenvalue $\lambda$ of the empirical risk's Hessian")
    ax.set_ylabel("density")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return fig


def delta_star(rows: Sequence[dict], title: str = ""):
    """delta*(t) against t (log scale), one line per setting, with 2-se error bars; rows: {setting, t, delta_star,
    delta_star_se} (tables/delta_nn.csv, part "nn")."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for s in sorted({r["setting"] for r in rows}, key=str):
        rs = sorted([r for r in rows if r["setting"] == s and r.get("delta_star") is not None
                     and math.isfinite(r["delta_star"])], key=lambda r: r["t"])
        if not rs:
            continue
        t = [r["t"] for r in rs]
        v = [r["delta_star"] for r in rs]
        e = [2 * (r.get("delta_star_se") or 0.0) if math.isfinite(r.get("delta_star_se") or math.nan) else 0.0
             for r in rs]
        ax.errorbar(t, v, yerr=e, marker="o", capsize=3, label=s)
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)  # (a replica split can give a 2-se bar reaching below 0: it is cut at 0)
    ax.set_xlabel("GD time t")
    ax.set_ylabel(r"$\delta^*(t)$ (spectral: hard outlier below the bulk)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return fig


def escape(rows: Sequence[dict], title: str = ""):
    """Escape time against delta, one line per d: the median over runs that escaped by the horizon, bars from the
    quartiles, and the number that escaped; rows: {delta, d, escape_median, escape_q25, escape_q75, escaped, runs}
    (tables/delta_nn.csv, part "escape")."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for d in sorted({int(r["d"]) for r in rows}):
        rs = sorted([r for r in rows if int(r["d"]) == d], key=lambda r: r["delta"])
        x = [r["delta"] for r in rs if r.get("escape_median") is not None and math.isfinite(r["escape_median"])]
        sel = [r for r in rs if r.get("escape_median") is not None and math.isfinite(r["escape_median"])]
        med = np.array([r["escape_median"] for r in sel])
        lo = med - np.array([r["escape_q25"] for r in sel])
        hi = np.array([r["escape_q75"] for r in sel]) - med
        bar = ax.errorbar(x, med, yerr=[lo, hi], marker="o", capsize=3, label=f"d = {d}")
        for r in rs:
            if r.get("escape_median") is not None and math.isfinite(r["escape_median"]):
                ax.annotate(f"{int(r['escaped'])}/{int(r['runs'])}", (r["delta"], r["escape_median"]), fontsize=6,
                            xytext=(3, 3), textcoords="offset points", color=bar[0].get_color())
    ax.set_yscale("log")
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel("escape time (steps): median, quartiles; escaped/runs")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return fig


def escape_vs_d(rows: Sequence[dict], title: str = ""):
    """Escape time against d (log scale), one panel per setting and one colour per delta: GD's median escape time
    over all runs (markers, quartile bars) and the DMFT's predicted t_1/2 (dashed, its band shaded); rows:
    tables/thresholds_vs_sim.csv (d, delta, setting, t_pred, t_pred_early, t_pred_late, t_sim_median, t_sim_q25,
    t_sim_q75).  Growth like ln d is a straight line."""
    plt = pyplot()
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.8), squeeze=False)

    def val(v):
        return float(v) if v is not None and v != "" and math.isfinite(float(v)) else math.nan

    for ax, s in zip(axes[0], settings):
        sub = [r for r in rows if r["setting"] == s]
        for dl in sorted({float(r["delta"]) for r in sub}):
            rs = sorted((r for r in sub if float(r["delta"]) == dl), key=lambda r: float(r["d"]))
            d = np.array([float(r["d"]) for r in rs])
            med = np.array([val(r.get("t_sim_median")) for r in rs])
            q25 = np.array([val(r.get("t_sim_q25")) for r in rs])
            q75 = np.array([val(r.get("t_sim_q75")) for r in rs])
            ok = np.isfinite(med)
            line = ax.errorbar(d[ok], med[ok], yerr=[med[ok] - q25[ok], np.where(np.isfinite(q75[ok]), q75[ok],
                               med[ok]) - med[ok]], marker="o", ls="none", capsize=3, label=f"delta = {dl:g}: GD")
            col = line[0].get_color()
            tp = np.array([val(r.get("t_pred")) for r in rs])
            lo = np.array([val(r.get("t_pred_early")) for r in rs])
            hi = np.array([val(r.get("t_pred_late")) for r in rs])
            okp = np.isfinite(tp)
            ax.plot(d[okp], tp[okp], ls="--", color=col, label=f"delta = {dl:g}: DMFT t_1/2")
            band = okp & np.isfinite(lo) & np.isfinite(hi)
            if band.any():
                ax.fill_between(d[band], lo[band], hi[band], color=col, alpha=0.15, lw=0)
        ax.set_xscale("log")
        ax.set_xticks(sorted({float(r["d"]) for r in sub}))
        ax.set_xticklabels([f"{int(v)}" for v in sorted({float(r["d"]) for r in sub})])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_xlabel("d")
        ax.set_ylabel("escape time (steps)")
        ax.set_title(s, fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    return fig


def dmft_vs_sim(dmft: dict, sims: Sequence[dict], title: str = ""):
    """DMFT against finite-d GD: M_t (first latent row, first neuron), (Theta^T Theta)_11, train and test loss,
    each DMFT curve with a 2-se band and the simulator's seed mean with a 2-se band.  dmft: {t, M, gram,
    train_loss, test_loss, stderr: {...}} (DMFTResult.as_dict()); sims: SimulationResult.as_dict() per seed."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(8.4, 6.0))
    pick = {"M_t[0, 0]": lambda r: np.asarray(r["M"], dtype=float)[:, 0, 0],
            "gram[0, 0]": lambda r: np.asarray(r["gram"], dtype=float)[:, 0, 0],
            "train loss": lambda r: np.asarray(r["train_loss"], dtype=float),
            "test loss": lambda r: np.asarray(r["population_test_loss"] if r.get("population_test_loss") is not None
                                             else r["test_loss"], dtype=float)}
    se_key = {"M_t[0, 0]": "M", "gram[0, 0]": "gram", "train loss": "train_loss", "test loss": "test_loss"}
    for ax, (name, get) in zip(axes.ravel(), pick.items()):
        T = len(dmft["t"])
        y = get(dmft)[:T]
        se = np.asarray(dmft["stderr"][se_key[name]], dtype=float)
        se = se[:, 0, 0] if se.ndim == 3 else se
        t = np.asarray(dmft["t"])
        ax.plot(t, y, "C1", label="DMFT (d → ∞)")
        ax.fill_between(t, y - 2 * se[:T], y + 2 * se[:T], color="C1", alpha=0.25, lw=0)
        arr = np.array([get(s)[:T] for s in sims if len(s["t"]) >= T])
        if arr.size:
            m, s_ = arr.mean(0), arr.std(0, ddof=1) / math.sqrt(len(arr)) if len(arr) > 1 else np.zeros(T)
            ax.plot(t, m, "C0", ls="--", label=f"GD, {len(arr)} seeds")
            ax.fill_between(t, m - 2 * s_, m + 2 * s_, color="C0", alpha=0.25, lw=0)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("t")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def grokking(sims: Sequence[dict], dmft: Optional[dict] = None, title: str = ""):
    """Train and test loss against t for finite-d GD near the threshold (one thin line per seed, the median bold),
    with the hard overlap below: the train loss falls long before the test loss, which drops when the hard direction
    is found (the escape).  dmft: the DMFT's train and test loss over its (shorter) horizon, for comparison."""
    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    T = min(len(s["t"]) for s in sims)
    t = np.arange(T)
    tr = np.array([np.asarray(s["train_loss"], dtype=float)[:T] for s in sims])
    te = np.array([np.asarray(s["population_test_loss"] if s.get("population_test_loss") is not None
                              else s["test_loss"], dtype=float)[:T] for s in sims])
    ov = np.array([np.asarray(s["overlap"], dtype=float)[:T] if "overlap" in s else np.full(T, np.nan) for s in sims])
    for i in range(len(sims)):
        ax.plot(t, tr[i], "C0", lw=0.4, alpha=0.5)
        ax.plot(t, te[i], "C3", lw=0.4, alpha=0.5)
        ax2.plot(t, ov[i], "C2", lw=0.4, alpha=0.6)
    ax.plot(t, np.median(tr, 0), "C0", lw=2, label="train loss (median over seeds)")
    ax.plot(t, np.median(te, 0), "C3", lw=2, label="test loss (population, median)")
    if dmft is not None:
        td = np.asarray(dmft["t"])
        ax.plot(td, dmft["train_loss"], "k--", lw=1, label="DMFT train (d → ∞)")
        ax.plot(td, dmft["test_loss"], "k:", lw=1, label="DMFT test (d → ∞)")
    esc = [s.get("escape_time") for s in sims if s.get("escape_time") is not None]
    for e in esc:
        ax2.axvline(e, color="grey", lw=0.3)
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(0, T - 1)
    ax.set_ylabel("loss")
    ax.legend(fontsize=7)
    ax2.axhline(0.5, color="grey", lw=0.6)
    ax2.set_ylabel("hard overlap (cos²)")
    ax2.set_xlabel(f"GD step t ({len(esc)}/{len(sims)} seeds escaped)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
