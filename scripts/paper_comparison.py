#!/usr/bin/env python
"""Phase retrieval midpoints under the paper's conventions: writes tables/paper_comparison.md and .csv.

    python scripts/paper_comparison.py            # every case (~1.5 h on one core; finished cases are kept)
    python scripts/paper_comparison.py --quick    # one tiny case (tables/paper_comparison_quick)

What it computes: theorykit/validation/paper_comparison.py."""
import os
import sys

from theorykit.validation.paper_comparison import main

if __name__ == "__main__":
    main(sys.argv[1:], prog="python scripts/paper_comparison.py",
         root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
