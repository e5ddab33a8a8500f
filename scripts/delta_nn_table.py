#!/usr/bin/env python
"""delta*(t) sequences, delta_NN and the dynamical criterion: writes tables/delta_nn.md and .csv.

    python scripts/delta_nn_table.py            # the full table (~20-30 min on 2 cores)
    python scripts/delta_nn_table.py --quick    # one tiny case per part (tables/delta_nn_quick)

What it computes: theorykit/validation/delta_nn_table.py."""
import os
import sys

from theorykit.validation.delta_nn_table import main

if __name__ == "__main__":
    main(sys.argv[1:], prog="python scripts/delta_nn_table.py",
         root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
