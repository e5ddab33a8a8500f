#!/usr/bin/env python
"""DMFT against the finite-d simulator: writes tables/dmft_vs_sim.{csv,md} (``--help`` for the options).

The logic lives in theorykit.validation.vs_sim (its docstring describes the parts and definitions); hand-written notes
on a table go in ``<out>_notes.md``, which regenerating the table never touches.

    python scripts/dmft_vs_sim.py --quick            # a few minutes: one setting per part, fewer seeds
    python scripts/dmft_vs_sim.py                    # everything (about 30-40 min on 2 busy cores)
    python scripts/dmft_vs_sim.py --parts 1 --seeds 16 --d 2000
"""
from theorykit.validation import vs_sim

if __name__ == "__main__":
    vs_sim.main()
