#!/usr/bin/env python
"""The Hessian theory against finite-d Hessians: writes tables/hessian_vs_finite_d.md and .csv.

    python scripts/hessian_vs_finite_d.py            # the full table (spectrum cases and thresholds)
    python scripts/hessian_vs_finite_d.py --quick    # 4 spectrum cases, 1 seed (tables/hessian_vs_finite_d_quick)

What it compares and the pass criteria: theorykit/validation/hessian_check.py."""
import os
import sys

from theorykit.validation.hessian_check import main

if __name__ == "__main__":
    main(sys.argv[1:], prog="python scripts/hessian_vs_finite_d.py",
         root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
