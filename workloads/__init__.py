"""What load is applied, independent of how it is run: one folder per workload.

- ``slob``: SLOB-like physical-I/O benchmark (one row per block, random key ranges).

Each workload folder holds its parameter model, its schema and loader, its transactions and a
``sql/`` folder of per-dialect statements (``default.sql`` plus overrides).
"""
