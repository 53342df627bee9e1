"""Storage samples of several workers merged into one view per interval.

The rule, from each collector's declared scope (:class:`sim.registry.CollectorEntry`): a
host-local view (block devices, NFS client counters, host CPU) is taken once per host, from the
lowest-numbered worker on that host — two workers on one machine see the same disk, and adding
their views would double its IOPS — except per-process figures (dbsim's CPU), which are summed
over that host's workers. A view of a shared system (the array's ONTAP counters, a database
server's statistics) is taken once for the whole run. With workers on several hosts,
host-local entities are named ``<host>/<entity>`` (unless the entity names the host already).

Outside :mod:`sim.locust` (whose import monkey-patches sockets with gevent), so the rule is
tested in the test process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sim import registry
from sim.protocols import Sample
from sim.registry import COLLECTOR_SCOPE_SHARED


def merge_samples(by_worker: Iterable[tuple[int, str, Sequence[Sample]]]) -> list[Sample]:
    """Merge the storage samples of several workers for one interval (see the module
    docstring). ``by_worker``: (worker index, host name, samples)."""
    ordered = sorted(by_worker, key=lambda item: item[0])
    hosts = {host for _, host, _ in ordered}
    taken: dict[tuple[str, str], int] = {}  # (scope, source) -> worker index whose view counts
    merged: dict[tuple[str, str], Sample] = {}
    for index, host, samples in ordered:
        for sample in samples:
            entry = registry.collector(sample.source)
            shared = entry is not None and entry.scope == COLLECTOR_SCOPE_SHARED
            scope = "*" if shared else host
            owner = taken.setdefault((scope, sample.source), index)
            entity = sample.entity
            if len(hosts) > 1 and not shared and not (entry and entry.entity_names_host):
                entity = f"{host}/{entity}"
            key = (sample.source, entity)
            if owner == index:
                # A host-local view says whose host it is (the time series' and /metrics'
                # ``host`` label); its ``t`` stays that worker's own interval end.
                meta = sample.meta if shared else {**sample.meta, "host": host}
                merged[key] = Sample(
                    sample.source,
                    entity,
                    dict(sample.values),
                    sample.t,
                    meta,
                    sample.gap,
                    sample.detail,
                )
                continue
            if sample.gap:
                continue  # another worker's gap in a view already taken: nothing to add
            # Another worker's view of the same host: only its own process's figures add up.
            existing = merged.get(key)
            if existing is None or existing.gap:
                continue
            values = dict(existing.values)
            for figure in (entry.per_process if entry else frozenset()) & set(sample.values):
                values[figure] = values.get(figure, 0.0) + sample.values[figure]
            merged[key] = Sample(
                existing.source, existing.entity, values, existing.t, existing.meta
            )
    return list(merged.values())
