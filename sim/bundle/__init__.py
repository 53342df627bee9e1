"""The run bundle: :mod:`sim.bundle.writer` writes it while a run goes (crash-safe, atomic
renames), :mod:`sim.bundle.reader` reads it back, bounded and validated, for every command."""
