"""The core that runs a scenario: the engine and its sessions (coroutines on one asyncio loop, or
session threads for blocking drivers), the metrics they record, the events the console and the
Locust integration listen to, the storage sampler, the runner that wires a run together from a
scenario, and loading the dataset."""
