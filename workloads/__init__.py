"""What load is applied, independent of how it is run: one folder per workload, each
registered with ``sim.registry`` on import (``sim.registry.BUILTIN_PLUGINS``).

- ``slob``: SLOB-like physical-I/O benchmark (one row per block, random key ranges).
- ``ssb``: SSB-like SQL storage benchmark (7.4 KB rows in key order, sessions pinned to tables,
  10-operation read/update cycles).
- ``eda``: EDA-like file-tree workload (SPEC SFS 2014 EDA / EDA_BLENDED) on a ``filetree``
  target, its sessions on threads or in the native file loop (``eda/native.py``).

What the SQL workloads share: ``sqlkit/`` the kit every SQL workload is written on (the
ownership-safe load, check, verify and drop sequence; the workload supplies tables, rows,
checks and sessions); ``common.py`` size parsing, DDL helpers and bind ordering;
``naming.py`` how tables are named (``<prefix>_<n>…``, so no two scenarios share a name);
``ownership.py`` the ``dbsim_registry`` registry that records what dbsim created, checked
before every write and drop (``registry_sql/``), with ``identity.py`` what identifies an
object in a catalogue (the registry's table, the token written onto it) and
``tablespace.py`` the PostgreSQL tablespace a target asks for, owned the same way.

Each SQL workload folder holds its parameter model, its schema and loader, its transactions
and a ``sql/`` folder of per-dialect statements (``default.sql`` plus overrides); ``eda/``
holds its parameters, the tree, the operations and their dealing, and its ownership marker.
"""
