"""What load is applied, independent of how it is run: one folder per workload.

- ``slob``: SLOB-like physical-I/O benchmark (one row per block, random key ranges).
- ``ssb``: SSB-like SQL storage benchmark (7.4 KB rows in key order, sessions pinned to tables,
  10-operation read/update cycles).

``common.py`` holds what they share: size parsing, DDL helpers and bind ordering;
``naming.py`` how tables are named (``<prefix>_<n>…``, so no two scenarios share a name);
``ownership.py`` the ``dbsim_registry`` registry that records what dbsim created, with each
object's catalogue identity, checked before every write and drop (``registry_sql/``).

Each workload folder holds its parameter model, its schema and loader, its transactions and a
``sql/`` folder of per-dialect statements (``default.sql`` plus overrides).
"""
