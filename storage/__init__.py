"""The system under test and what can be read from it: ``targets`` (database connections and
file trees), ``collectors`` (block devices, NFS client statistics, ONTAP REST, database I/O
views) and ``devices`` (which block device lies under a path)."""
