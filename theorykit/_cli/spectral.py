"""theorykit spectral --link L --preprocess EXPR(y, delta) --delta D [--json]

JSON keys: top_eigenvalue, overlap2, delta_u (null with delta_u_reason), link, preprocess, delta, and the prediction's
fields; for a k-index link (k = 2, 3) also k, eigenvalues, overlap2 per outlier, directions, subspace_overlap2,
outliers, margins, and thresholds [{direction, delta_u, error, bracket, note}] (theorykit.spectra.multi); for a matrix
preprocessing (--preprocess '[[T11, T12], [T21, T22]]', k x k) also k, eigenvalues, overlap2 per outlier, directions
(each outlier's latent part A, k x k row-major), outliers, margin, margins, error, preprocessing ("matrix") and
thresholds [{outlier, delta_u, error, bracket, note}] (theorykit.spectra.matrix_preprocessing)."""
import math

from ..errors import TheorykitError
from ..symbolic.admissible import check_preprocessing
from ..spectra import spectral_prediction, spectral_threshold


def _positive(text, name="--delta"):
    try:
        v = float(text)
    except ValueError:
        raise TheorykitError(f"{name}: expected a number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise TheorykitError(f"{name}: expected a positive finite number, got {text!r}")
    return v


def add_parser(sub):
    p = sub.add_parser("spectral", help="top eigenvalue, overlap and threshold delta_u of the spectral method "
                                        "(1/n) sum T(y_i) x_i x_i^T",
                       description="Top eigenvalue, overlap and threshold delta_u of the spectral method "
                                   "(1/n) sum T(y_i) x_i x_i^T.",
                       epilog="example: theorykit spectral --link phase-retrieval --preprocess "
                              "'(y-1)/(y+sqrt(2*delta)-1)' --delta 2")
    p.add_argument("--link", required=True, help="link: preset (phase-retrieval, ...) or expression in z (or "
                                                 "z1..zk, k <= 3) and eps")
    p.add_argument("--preprocess", required=True, metavar="EXPR",
                   help="preprocessing T as an expression in y and delta, e.g. '(y-1)/(y+sqrt(2*delta)-1)'; for a "
                        "k-index link also a symmetric k x k matrix of such expressions, e.g. "
                        "'[[tanh(y), tanh(y)**2], [tanh(y)**2, 0]]'")
    p.add_argument("--delta", required=True, help="sample ratio n/d, a finite number > 0")
    p.add_argument("--delta-range", nargs=2, default=("1e-3", "1e3"), metavar=("LO", "HI"),
                   help="range 0 < LO < HI scanned for the threshold delta_u (default 1e-3 1e3)")
    return p


def run(args) -> dict:
    delta = _positive(args.delta)
    lo, hi = (_positive(v, "--delta-range") for v in args.delta_range)
    if not lo < hi:
        raise TheorykitError(f"--delta-range: expected LO < HI, got {args.delta_range[0]} {args.delta_range[1]}")
    from ..symbolic.ingredients import link as make_link

    if args.preprocess.strip().startswith("["):
        return _run_matrix(args, delta, lo, hi, make_link(args.link).k)
    if make_link(args.link).k > 1:
        return _run_multi(args, delta, lo, hi)
    # T's admissibility (finite, no pole in the support of y, bounded above, sup T > 0): the same check, hence the
    # same verdict, as the spectral initialisation of simulate, sweep and dmft (--init spectral --spectral-T)
    check_preprocessing(args.link, args.preprocess, delta)
    pred = spectral_prediction(args.link, args.preprocess, delta)
    try:
        thr = spectral_threshold(args.link, args.preprocess, delta_range=(lo, hi)).as_dict()
    except TheorykitError as e:  # no outlier in the range (or already at its low end): delta_u unknown -> null
        thr = {"delta_u": None, "error": None, "case": None, "domain_edge": False, "bracket": None,
               "method": "scan failed", "notes": [str(e)]}
        thr["delta_u_reason"] = (f"no outlier for any delta in --delta-range [{lo:g}, {hi:g}]: delta_u > {hi:g}, "
                                 "or it does not exist (infinite)" if "no outlier" in str(e) else
                                 f"an outlier already exists at delta = {lo:g}: delta_u < {lo:g} (lower --delta-range)"
                                 if "already exists" in str(e) else f"the threshold scan failed: {e}")
    # JSON has no NaN or infinity: say explicitly what the non-finite numbers of the threshold mean
    if thr.get("margins") is not None and not all(math.isfinite(v) for v in thr["margins"]):
        thr["margins"] = [v if math.isfinite(v) else None for v in thr["margins"]]
        thr["margins_note"] = ("null: T is not admissible (pole / unbounded) at that end of the bracket, so the margin "
                               "is undefined there (the threshold is the edge of T's admissible range)")
    if thr.get("error") is not None and not math.isfinite(thr["error"]):
        thr["error"] = None
        thr["error_note"] = ("null: unbounded -- the halved quadrature disagrees on the outlier at the edge of T's "
                             "admissible range")
    out = {"top_eigenvalue": pred.top_eigenvalue, "overlap2": pred.overlap2, "delta_u": thr["delta_u"],
           "link": args.link, "preprocess": args.preprocess, "delta": delta}
    if thr["delta_u"] is None:
        out["delta_u_reason"] = thr["delta_u_reason"]
    elif thr["domain_edge"]:  # the outlier is there as soon as T is defined: the true threshold is below this edge
        margins = [m for m in (thr.get("margins") or []) if m is not None]
        out["delta_u_reason"] = (f"below the validity edge: T is not admissible for delta < {thr['delta_u']:.6g} and "
                                 f"already has an outlier there (margin {margins[-1]:.3g}" if margins else
                                 f"below the validity edge: T is not admissible for delta < {thr['delta_u']:.6g} and "
                                 "already has an outlier there (margin > 0")
        out["delta_u_reason"] += "), so delta_u is where T becomes valid, not where its outlier appears"
    out.update({k: v for k, v in pred.as_dict().items() if k not in ("top_eigenvalue", "overlap2", "delta")})
    out["threshold"] = thr
    return out


def _run_multi(args, delta, lo, hi) -> dict:
    """A link with k > 1 latent directions (theorykit.spectra.multi)."""
    from ..spectra.multi import multi_spectral_prediction, multi_spectral_thresholds

    pred = multi_spectral_prediction(args.link, args.preprocess, delta)
    thr = multi_spectral_thresholds(args.link, args.preprocess, delta_range=(lo, hi))
    found = [t["delta_u"] for t in thr if t["delta_u"] is not None]
    out = {"top_eigenvalue": pred.eigenvalues[0] if pred.outliers else pred.bulk_edge,
           "overlap2": pred.overlap2[0] if pred.outliers else 0.0,
           "delta_u": min(found) if found else None, "link": args.link, "preprocess": args.preprocess,
           "delta": delta, "k": len(pred.margins)}
    if not found:
        out["delta_u_reason"] = "; ".join(f"direction {t['direction']}: {t['note']}" for t in thr)
    out.update({k: v for k, v in pred.as_dict().items() if k != "delta"})
    out["thresholds"] = thr
    return out


def split_top(text: str, what: str) -> list:
    """The comma-separated items of ``text`` at bracket depth 0 (commas inside f(a, b) or [..] stay)."""
    items, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "(["
        depth -= ch in ")]"
        if depth < 0:
            raise TheorykitError(f"{what}: unbalanced brackets in {text!r}")
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise TheorykitError(f"{what}: unbalanced brackets in {text!r}")
    return items + ([cur.strip()] if cur.strip() else [])


def parse_matrix(text: str) -> list:
    """'[[a, b], [c, d]]' -> [['a', 'b'], ['c', 'd']] (entries are expressions, parsed later by the whitelist
    parser)."""
    t = text.strip()
    if not (t.startswith("[") and t.endswith("]")):
        raise TheorykitError(f"--preprocess: a matrix is written [[T11, T12], [T21, T22]], got {text!r}")
    rows = split_top(t[1:-1], "--preprocess")
    if not rows or any(not (r.startswith("[") and r.endswith("]")) for r in rows):
        raise TheorykitError(f"--preprocess: a matrix is written [[T11, T12], [T21, T22]], got {text!r}")
    return [split_top(r[1:-1], "--preprocess") for r in rows]


def _run_matrix(args, delta, lo, hi, k) -> dict:
    """A symmetric k x k matrix preprocessing (theorykit.spectra.matrix_preprocessing)."""
    from ..spectra.matrix_preprocessing import matrix_spectral_prediction, matrix_spectral_thresholds

    T = parse_matrix(args.preprocess)
    pred = matrix_spectral_prediction(args.link, T, delta)
    thr = matrix_spectral_thresholds(args.link, T, delta_range=(lo, hi))
    first = thr[0] if thr else {"delta_u": None, "note": "the law has no hard directions"}
    out = {"top_eigenvalue": pred.eigenvalues[0] if pred.outliers else pred.bulk_edge,
           "overlap2": pred.overlap2[0] if pred.outliers else 0.0, "delta_u": first["delta_u"], "link": args.link,
           "preprocess": args.preprocess, "preprocessing": "matrix", "delta": delta, "k": k}
    if first["delta_u"] is None:
        out["delta_u_reason"] = first["note"]
    out.update({key: v for key, v in pred.as_dict().items() if key not in ("delta", "k")})
    out["thresholds"] = thr
    return out


def text(r) -> str:
    if r.get("preprocessing") == "matrix":
        lines = [f"spectral method: T(y) = {r['preprocess']} (a {r['k']} x {r['k']} matrix) on link {r['link']}, "
                 f"delta = {r['delta']:g}",
                 f"  bulk edge {r['bulk_edge']:.10g}; {r['outliers']} outlier(s); margin {r['margin']:.4g} "
                 "(> 0: an outlier)"]
        for ev, ov in zip(r["eigenvalues"], r["overlap2"]):
            lines.append(f"  outlier {ev:.10g}: overlap^2 with the latent subspace {ov:.6g}")
        lines.append(f"  error (the coarser quadrature's change): top {r['error']['top']:.1e}, margin "
                     f"{r['error']['margin']:.1e}")
        for t in r["thresholds"]:
            lines.append(f"  outlier {t['outlier']}: delta_u = {t['delta_u']:.8g} +/- {t['error']:.1e}"
                         if t["delta_u"] is not None else f"  outlier {t['outlier']}: {t['note']}")
        lines.append(f"  method: {r['method']}")
        return "\n".join(lines)
    if "thresholds" in r:  # k > 1
        lines = [f"spectral method: T(y) = {r['preprocess']} on link {r['link']} (k = {r['k']}), "
                 f"delta = {r['delta']:g}",
                 f"  bulk edge {r['bulk_edge']:.10g}; {r['outliers']} outlier(s)"]
        for ev, ov, u in zip(r["eigenvalues"], r["overlap2"], r["directions"]):
            lines.append(f"  outlier {ev:.10g}: overlap^2 with the latent subspace {ov:.6g}, along "
                         f"({', '.join(f'{c:.4g}' for c in u)})")
        lines.append(f"  margins (eigenvalues of the k x k margin at the edge; > 0: an outlier): "
                     f"{', '.join(f'{m:.4g}' for m in r['margins'])}")
        for t in r["thresholds"]:
            lines.append(f"  direction {t['direction']}: delta_u = {t['delta_u']:.8g} +/- {t['error']:.1e}"
                         if t["delta_u"] is not None else f"  direction {t['direction']}: {t['note']}")
        lines.append(f"  method: {r['method']}")
        return "\n".join(lines)
    th = r["threshold"]
    lines = [f"spectral method: T(y) = {r['preprocess']} on link {r['link']}, delta = {r['delta']:g}",
             f"  top eigenvalue -> {r['top_eigenvalue']:.10g}   (bulk edge {r['bulk_edge']:.10g})",
             f"  overlap^2      -> {r['overlap2']:.10g}",
             f"  case: {r['case']}   (lam_bar = {r['lam_bar']:.10g}, tau = {r['tau']:.10g}"
             + (f", lam* = {r['lam_star']:.10g})" if r["lam_star"] is not None else ")"),
             (f"  delta_u = {r['delta_u']:.10g} +/- "
              + (f"{th['error']:.1e}" if th["error"] is not None else "(unknown)") + f"   ({th['case']}"
              + (f"; {r['delta_u_reason']}" if th["domain_edge"] else "") + ")"
              if r["delta_u"] is not None else f"  delta_u: not found ({r.get('delta_u_reason', 'see note')})"),
             f"  method: {r['method']}",
             f"  threshold method: {th['method']}"]
    lines += [f"  note: {n}" for n in r["notes"] + th["notes"]]
    return "\n".join(lines)
