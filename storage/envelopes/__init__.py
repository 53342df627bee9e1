"""Published service-level envelopes, transcribed from the seed documents, and sizing against
them.

Data: ``data/*.yaml``, one file per vendor (validated by :mod:`.schema`). Model: :mod:`.model`
(interpolation in read mix and request size), :mod:`.scaling` (capacity, service level,
caps), :mod:`.sizing` (fits, binding limit, headroom, smallest capacity or level).

Envelopes by name:

======================== ================================================================
``gcnv-flex-custom-nfsv3`` Google Cloud NetApp Volumes, Flex File custom performance, NFSv3
``gcnv-extreme-nfsv3``     Google Cloud NetApp Volumes, Extreme, NFSv3 (Premium by rule)
``gcnv-extreme-smb``       Google Cloud NetApp Volumes, Extreme, SMB (Premium by rule)
``gcnv-flex-unified-iscsi`` Google Cloud NetApp Volumes, Flex Unified custom performance, iSCSI
``gcnv-iscsi-slob``        Google Cloud NetApp Volumes over iSCSI, Oracle SLOB points
``gcnv-iscsi-ssb``         Google Cloud NetApp Volumes over iSCSI, SQL Server SSB points
``gcnv-large-volume-eda``  Google Cloud NetApp Volumes large volume, EDA maxima
``anf-linux-volume``       Azure NetApp Files, one volume, Linux scale-out
``anf-nfsv3-single-client`` Azure NetApp Files, one D32s_v4 client with nconnect
``oci-bv-balanced``        OCI Block Volume, Balanced elastic performance
``aff-a800-nvmeof``        NetApp AFF A800, NVMe over FC, four-corners peaks
``aff-a800-nvmeof-sql``    NetApp AFF A800, NVMe over FC, vdBench SQL 90-10 / 80-20 peaks
``aff-a800-nvmeof-oracle`` NetApp AFF A800, NVMe over FC, vdBench Oracle 90-10 / 80-20 peaks
======================== ================================================================
"""

from __future__ import annotations

from sim.errors import ConfigError
from storage.envelopes.model import DATA_DIR, Envelope, Flag, Limit, load_all
from storage.envelopes.sizing import SizingAnswer, Workload, size

ENVELOPE_NAMES = (
    "gcnv-flex-custom-nfsv3",
    "gcnv-extreme-nfsv3",
    "gcnv-extreme-smb",
    "gcnv-flex-unified-iscsi",
    "gcnv-iscsi-slob",
    "gcnv-iscsi-ssb",
    "gcnv-large-volume-eda",
    "anf-linux-volume",
    "anf-nfsv3-single-client",
    "oci-bv-balanced",
    "aff-a800-nvmeof",
    "aff-a800-nvmeof-sql",
    "aff-a800-nvmeof-oracle",
)


def envelopes() -> dict[str, Envelope]:
    """Every envelope, by name, in the order of :data:`ENVELOPE_NAMES` (then any others)."""
    found = load_all()
    order = [n for n in ENVELOPE_NAMES if n in found] + sorted(set(found) - set(ENVELOPE_NAMES))
    return {name: found[name] for name in order}


def get_envelope(name: str) -> Envelope:
    """One envelope; ConfigError (exit 2 at the CLI) naming the known ones otherwise."""
    found = load_all()
    if name not in found:
        known = ", ".join(envelopes())
        raise ConfigError(f"unknown envelope {name!r} (known: {known}; see dbsim size --list)")
    return found[name]


__all__ = [
    "DATA_DIR",
    "ENVELOPE_NAMES",
    "Envelope",
    "Flag",
    "Limit",
    "SizingAnswer",
    "Workload",
    "envelopes",
    "get_envelope",
    "size",
]
