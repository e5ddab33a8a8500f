#!/usr/bin/env python
"""Finite-d thresholds and escape times, the DMFT against GD: writes tables/thresholds_vs_sim.md and .csv.

    python scripts/thresholds_vs_sim.py            # every setting (hours on 2 cores; finished cases are kept)
    python scripts/thresholds_vs_sim.py --quick    # one tiny case (tables/thresholds_vs_sim_quick)

What it computes: theorykit/validation/thresholds_vs_sim.py."""
import os
import sys

from theorykit.validation.thresholds_vs_sim import main

if __name__ == "__main__":
    main(sys.argv[1:], prog="python scripts/thresholds_vs_sim.py",
         root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
