"""Reports built on the theory and the referee: ``table`` (one row per setting, the ``theorykit table`` command),
``figures`` (the ``theorykit plot`` kinds) and ``writer`` (the one table writer: CSV + Markdown whose header states
the regenerating command, date, machine and wall time; used by the table command, the validation studies and the
benchmarks)."""
