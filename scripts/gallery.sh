#!/usr/bin/env bash
# Regenerates the figure gallery docs/figures/ (docs/figures/README.md lists each figure with its caption).
# About 18 minutes on 2 cores (success_pr: 11, mostly its finite-d prediction; cached in tables/.cache/gallery).
# Run from the repository root with theorykit installed.
set -euo pipefail
out=docs/figures
# (the finite-d prediction, theorykit.finite_d: per delta and curve one DMFT and a ladder of 16, 10 of its 11 minutes)
theorykit plot success --activations gelu,quad --eta gelu=1,quad=0.05 --link phase-retrieval --d 200 --steps 400 \
    --deltas 3,4,5,6,8,10,12,14 --seeds 12 --mark "gelu:delta_dyn (DMFT)=5.18" --csv-dir tables/.cache/gallery \
    --predict --predict-deltas 4,6,8,10,12 --paths 4096 --replicas 2 --delta-nn-table tables/delta_nn.csv \
    --out $out/success_pr
theorykit plot hessian --activation gelu --link sign-symmetric --loss logistic --delta 9 --eta 1 --t 50 --d 400 \
    --paths 16384 --replicas 4 --out $out/hessian_bounded
theorykit plot delta-star --table tables/delta_nn.csv --out $out/delta_star
theorykit plot escape --table tables/delta_nn.csv --settings bounded --out $out/escape_bounded
theorykit plot escape-d --table tables/thresholds_vs_sim.csv --out $out/escape_vs_d
theorykit plot dmft-vs-sim --activation tanh --link "z+z**2/2" --delta 2 --eta 1 --steps 20 --d 1000 --seeds 24 \
    --paths 16384 --replicas 4 --out $out/dmft_vs_sim
theorykit plot grokking --activation gelu --link sign-symmetric --loss logistic --delta 9 --eta 1 --steps 600 \
    --d 400 --seeds 8 --dmft-steps 60 --paths 8192 --replicas 4 --out $out/grokking_bounded
