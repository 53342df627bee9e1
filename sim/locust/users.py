"""Locust user classes generated from the workload registry (workloads never import Locust).

A Locust user stands for one dbsim session: Locust counts, places and spawns users (on this
process or across workers) and dbsim runs that many engine sessions there. The user's own
greenlet does nothing but wait — the session's transactions run on the engine's asyncio loop
on its native thread, timed in microseconds, not in a greenlet timed by Locust.

Class names are derived from workload names (``slob`` → ``SlobSession``), the same in every
process, because a Locust master tells its workers which classes to spawn by name.
"""

from __future__ import annotations

import re
from typing import ClassVar

from locust import User, constant, task

from sim import registry

#: How long a user's placeholder task waits between (empty) iterations.
IDLE_S = 3600.0


class DbsimUser(User):
    """One dbsim session, as Locust counts it; the engine runs the session itself."""

    abstract = True
    #: The registry name of the workload this user class stands for.
    workload: ClassVar[str] = ""
    wait_time = constant(IDLE_S)

    @task
    def session(self) -> None:
        """Nothing to do here: the session's transactions run on the engine's thread."""


def class_name(workload: str) -> str:
    """``slob`` → ``SlobSession``, ``eda_blended`` → ``EdaBlendedSession``."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", workload) if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) + "Session"


def user_classes() -> dict[str, type[DbsimUser]]:
    """One user class per registered workload, keyed by class name."""
    classes: dict[str, type[DbsimUser]] = {}
    for name, entry in sorted(registry.workloads().items()):
        cls = type(
            class_name(name),
            (DbsimUser,),
            {
                "__module__": __name__,
                "__doc__": f"{entry.summary} (one dbsim session)",
                "abstract": False,
                "workload": name,
            },
        )
        classes[cls.__name__] = cls
    return classes
