"""How a waterfall runs (SEMANTICS.md 20-23): a plain coroutine per row.

Each ``ToolStep`` is a tool call. Inside a column every row runs its own copy at the same
time, so the rows waiting on the same step queue their calls together and the dispatcher
sends them as one batched pass; a row that a step satisfied stops there, so later steps are
never called for it. Receipts make a re-run free. Outside a column the same code runs with
direct calls.

A step learns what its calls returned (and cost) through ``result_sink``: a code step gets
the play's own context and nothing wraps it. Per cell, the provenance (which step won; each
step's status, provider and cost) goes into the cell's metadata under ``"waterfall"`` (and
each one's under ``"waterfalls"``, when a column runs several). A row
that no step satisfied while a step *failed* (a 5xx, a 401, a timeout) fails with that cause,
so a resume tries it again; a row every step answered "not found" is not found. The run's
tallies are folded from these provenances, each row once (``tallies.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._waterfall import Step, StepStatus, ToolStep, Waterfall
from ..errors import PlayDefinitionError, ToolError
from ..tools import ToolResult, dotted, is_value
from .scope import current_row, result_sink

__all__ = ["extract", "run_waterfall"]

CallTool = Callable[..., Awaitable[ToolResult]]
Count = Callable[[dict[str, Any]], None]


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def extract(result: Any, output: str) -> list[Any]:
    """The values a step's result holds for ``output`` (SEMANTICS.md 21), lists spread.

    A ``ToolResult``: its declared getters for ``output``, then the dotted path; other
    results: the dotted path. When the path is there its value decides (a blank one is
    nothing); when it is not, the whole result counts.
    """
    if isinstance(result, ToolResult):
        found = result.get(output)
        if is_value(found):
            return _spread(found)
        result = result.data
    if isinstance(result, Mapping | list) and _has_path(result, output):
        found = dotted(result, output)
        return _spread(found) if is_value(found) else []
    return _spread(result) if is_value(result) else []


def _has_path(data: Any, path: str) -> bool:
    head, _, last = path.rpartition(".")
    parent = dotted(data, head) if head else data
    if isinstance(parent, Mapping):
        return last in parent
    if isinstance(parent, list) and last.lstrip("-").isdigit():
        return -len(parent) <= int(last) < len(parent)
    return False


def _spread(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [v for v in value if is_value(v)]
    return [value]


@dataclass(slots=True)
class _StepOutcome:
    status: StepStatus
    values: list[Any] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    rejected: int = 0
    provider: str | None = None
    note: str | None = None
    error: ToolError | None = None

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"status": self.status, "cost": sum(r.cost for r in self.results)}
        if self.provider is not None:
            meta["provider"] = self.provider
        if self.results:
            meta["cached"] = all(r.execution.cached for r in self.results)
        if self.values:
            meta["values"] = len(self.values)
        if self.rejected:
            meta["rejected"] = self.rejected
        if self.note is not None:
            meta["error" if self.status == "failed" else "reason"] = self.note
        return meta


async def run_waterfall(
    spec: Waterfall,
    input: Mapping[str, Any],
    *,
    ctx: object,
    call_tool: CallTool,
    count: Count,
    order: Sequence[Step] | None = None,
) -> Any:
    """Run ``spec`` for one input (one row); returns the value, or None.

    ``ctx`` is the play's context (what code steps and ``accept`` receive), ``call_tool`` the
    attempt's ``call_tool``, ``count`` takes the provenance once the waterfall has run (a
    waterfall cut off, by a budget or a stop, is not counted: its row is not stored either),
    ``order`` the steps in the order to try them (default: as declared; ``order="cheapest"``
    gives another).
    """
    row = current_row.get()
    held: list[Any] = []
    steps: dict[str, dict[str, Any]] = {}
    winner: str | None = None
    provider: str | None = None
    failure: _StepOutcome | None = None
    for step in spec.steps if order is None else order:
        if winner is not None:
            steps[step.id] = {"status": "skipped"}
            continue
        outcome = await _run_step(spec, step, input, held, ctx, call_tool)
        steps[step.id] = outcome.meta()
        if outcome.error is not None and failure is None:
            failure = outcome
        if len(held) >= spec.min_results:
            winner, provider = step.id, outcome.provider
    provenance: dict[str, Any] = {"id": spec.id, "winner": winner, "steps": steps}
    if provider is not None:
        provenance["provider"] = provider
    if winner is None:
        provenance["reason"] = _reason(spec, held, steps)
    if row is not None:  # folded into the cell's metadata when the column settles or fails
        row.notes.setdefault("waterfalls", []).append(provenance)
    count(provenance)
    if winner is None and failure is not None:
        raise _unsatisfied(spec, failure)
    if winner is None:
        return None
    return held[0] if spec.min_results == 1 else held


def _unsatisfied(spec: Waterfall, failure: _StepOutcome) -> ToolError:
    """No step found a value and one failed: the cell fails with that cause (not found
    would hide it, and a resume would not try the row again)."""
    error = failure.error
    assert error is not None
    return ToolError(
        error.tool,
        f"waterfall {spec.id!r} found no value, and {error.tool} failed: {error.provider_message}",
        status=error.status,
        code=error.code,
        request_id=error.request_id,
    )


def _reason(spec: Waterfall, held: list[Any], steps: Mapping[str, Mapping[str, Any]]) -> str:
    tried = ", ".join(f"{sid} {meta['status']}" for sid, meta in steps.items())
    if held:
        return (
            f"Waterfall {spec.id!r} found {len(held)} of the {spec.min_results} values it "
            f"needs ({tried})."
        )
    return f"No step of waterfall {spec.id!r} found a value ({tried})."


async def _run_step(
    spec: Waterfall,
    step: Step,
    input: Mapping[str, Any],
    held: list[Any],
    ctx: object,
    call_tool: CallTool,
) -> _StepOutcome:
    outcome = _StepOutcome("not_found")
    token = result_sink.set(outcome.results)  # the step's calls report here
    try:
        if isinstance(step, ToolStep):
            outcome.provider = step.tool
            payload = step.map_input(input) if step.map_input is not None else input
            if payload is None:
                outcome.status, outcome.note = "skipped", "map_input gave no input for this row"
                return outcome
            if not isinstance(payload, Mapping):
                raise PlayDefinitionError(
                    f"Waterfall {spec.id!r}, step {step.id!r}: map_input returned "
                    f"{type(payload).__name__}; return a dict (or None to skip the row)."
                )
            found: Any = await call_tool(step.tool, payload, label=f"{spec.id}.{step.id}")
        else:
            found = await _maybe_await(step.run(input, ctx) if step._takes_ctx else step.run(input))
        for value in extract(found, spec.output):
            if len(held) >= spec.min_results:
                break  # satisfied: the rest need no (possibly paid) acceptance check
            if value in held:
                continue
            if spec.accept is not None:
                verdict = spec.accept(value, ctx) if spec._accept_takes_ctx else spec.accept(value)
                if not await _maybe_await(verdict):
                    outcome.rejected += 1
                    continue
            held.append(value)
            outcome.values.append(value)
    except ToolError as exc:  # this row's step failed; the waterfall goes on
        outcome.status, outcome.note = "failed", str(exc) or type(exc).__name__
        outcome.error = exc
    else:
        outcome.status = "completed" if outcome.values else "not_found"
    finally:
        result_sink.reset(token)
    if outcome.provider is None and outcome.results:
        outcome.provider = outcome.results[0].tool
    return outcome
