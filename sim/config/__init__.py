"""Configuration: the validated scenario models, resolving a scenario file with the
environment and ``--set`` overrides, and the scenario reference generated from the models."""
