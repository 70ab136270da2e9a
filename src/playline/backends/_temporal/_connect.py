"""Where a Temporal server is, and connecting to it with errors that say what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from ...errors import PlayDefinitionError, PlaylineError

__all__ = ["DEFAULT_NAMESPACE", "DEFAULT_TASK_QUEUE", "Endpoint", "connect", "endpoint"]

DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "playline"


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """A Temporal server, namespace and task queue: where a run's workflow lives. Recorded
    with the run (``options["temporal"]``) so that sending an event can ring it."""

    target: str
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE

    def to_dict(self) -> dict[str, str]:
        return {"target": self.target, "namespace": self.namespace, "task_queue": self.task_queue}

    @classmethod
    def of(cls, options: dict[str, Any]) -> Endpoint | None:
        """The endpoint recorded in a run's options, if it runs on Temporal."""
        found = options.get("temporal")
        if not isinstance(found, dict) or not isinstance(found.get("target"), str):
            return None
        return cls(
            target=found["target"],
            namespace=str(found.get("namespace") or DEFAULT_NAMESPACE),
            task_queue=str(found.get("task_queue") or DEFAULT_TASK_QUEUE),
        )


def endpoint(
    temporal: str | Client, *, namespace: str | None = None, task_queue: str | None = None
) -> Endpoint:
    """An endpoint from ``HOST:PORT`` (or a connected client); a clear error for a bad one."""
    if isinstance(temporal, Client):
        target = temporal.service_client.config.target_host
        namespace = namespace or temporal.namespace
    elif isinstance(temporal, str):
        target = temporal.strip()
        host, sep, port = target.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise PlayDefinitionError(
                f"Temporal address {temporal!r} is not HOST:PORT. Give the server's frontend "
                "address, e.g. --temporal 127.0.0.1:7233."
            )
    else:
        raise PlayDefinitionError(
            f"temporal={temporal!r}: give 'HOST:PORT' or a temporalio.client.Client."
        )
    for name, value in (("namespace", namespace), ("task queue", task_queue)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise PlayDefinitionError(f"The Temporal {name} must be a non-empty name.")
    return Endpoint(
        target=target,
        namespace=namespace or DEFAULT_NAMESPACE,
        task_queue=task_queue or DEFAULT_TASK_QUEUE,
    )


async def connect(temporal: str | Client, where: Endpoint) -> Client:
    """A client for ``where``: the one given, or a new connection."""
    if isinstance(temporal, Client):
        return temporal
    try:
        return await Client.connect(where.target, namespace=where.namespace)
    except Exception as exc:  # the SDK raises RuntimeError for refused connections
        raise PlaylineError(
            f"Cannot reach the Temporal server at {where.target} (namespace "
            f"{where.namespace!r}): {' '.join(str(exc).split())[:200]}. Start it (`temporal "
            "server start-dev` for development) or fix --temporal."
        ) from None
