"""What the web UI's start form may point a run at: which hosts, which password variables.

A scenario file is written by whoever runs dbsim; the start form is filled by whoever reaches
the page. Without a limit, the form could name any variable of the UI's environment as
``target.password_env`` (``DBSIM_WEB_LOGIN``, a cloud key) and any ``target.host``: dbsim
would connect there and hand the value to a server that asks for a cleartext password. So the
form may use only

* the variables the scenario ``dbsim ui`` was started with names (every ``password_env`` in
  ``target`` and ``collectors``) and those of ``dbsim ui --allow-env NAME``;
* the scenario's own ``target.host`` and those of ``dbsim ui --allow-host HOST``, compared as
  written (case aside): ``db1`` does not allow ``db1.example.com`` or its address.

The refusal is a ``path: message`` line like any validation line, so it is shown under the
field, and it comes before the variable is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from sim import registry
from sim.config.scenario import ScenarioBase
from sim.field_errors import short_value
from sim.secrets import ENV_NAME


def _password_variables(model: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(model, BaseModel):
        for name in type(model).model_fields:
            value = getattr(model, name)
            if name == "password_env" and isinstance(value, str):
                found.add(value)
            else:
                found |= _password_variables(value)
    return found


@dataclass(frozen=True)
class Allowance:
    """The variable names and hosts a submitted form may use."""

    env_names: frozenset[str]
    hosts: frozenset[str]

    @classmethod
    def of(
        cls, scenario: ScenarioBase, env_names: Iterable[str] = (), hosts: Iterable[str] = ()
    ) -> Allowance:
        """The scenario's own variables and host, plus the operator's ``env_names``/``hosts``."""
        target = scenario.target  # type: ignore[attr-defined]
        collectors = scenario.collectors
        names = _password_variables(target) | _password_variables(collectors) | set(env_names)
        own_host = getattr(target, "host", None)
        allowed = {h.lower() for h in hosts} | ({own_host.lower()} if own_host else set())
        return cls(frozenset(names), frozenset(allowed))

    def problems(self, target: Mapping[str, Any]) -> list[str]:
        """Lines for what ``target`` (the scenario data's section, before validation) uses
        beyond the allowance; a value of the wrong type is left to the validation."""
        entry = registry.targets().get(str(target.get("kind")))
        if entry is None:
            return []
        model = entry.settings_model
        lines = []
        if "host" in model.model_fields:
            host = target.get("host", _default(model, "host"))
            if isinstance(host, str) and host.lower() not in self.hosts:
                allowed = ", ".join(sorted(self.hosts)) or "none"
                lines.append(
                    f"target.host: {short_value(host)} is not a host this web UI may connect "
                    f"to (allowed: {allowed}; dbsim ui --allow-host HOST adds one)"
                )
        variable = target.get("password_env")
        # A value that is no variable name may be a pasted password: the validation refuses
        # it without repeating it, and so must this line.
        named = isinstance(variable, str) and ENV_NAME.match(variable)
        if named and variable not in self.env_names:
            allowed = ", ".join(sorted(self.env_names)) or "none"
            lines.append(
                f"target.password_env: {variable} is not a variable this web UI may read "
                f"(allowed: {allowed}; dbsim ui --allow-env NAME adds one)"
            )
        return lines


def _default(model: type[BaseModel], name: str) -> Any:
    default = model.model_fields[name].default
    return None if default is PydanticUndefined else default
