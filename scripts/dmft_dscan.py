#!/usr/bin/env python
"""Finite-d gap of GD against the DMFT scanned over d: writes tables/dmft_dscan.{csv,md} (``--help`` for options).

The logic lives in theorykit.validation.dscan (its docstring has the definitions, fits and verdicts); hand-written notes
on a table go in ``<out>_notes.md``, which regenerating the table never touches.

    python scripts/dmft_dscan.py --quick                    # < 2 min, writes /tmp/dmft_dscan_quick.{csv,md}
    python scripts/dmft_dscan.py                            # the full scan (about 40 min on one core)
    python scripts/dmft_dscan.py --settings gelu_pm_4 --d 500,1000 --seeds 64 --paths 262144
"""
from theorykit.validation import dscan

if __name__ == "__main__":
    dscan.main()
