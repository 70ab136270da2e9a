"""Waterfalls: try steps in order until each row holds enough values (SEMANTICS.md 20-23).

A waterfall is a plain coroutine per row: each ``ToolStep`` is ``await ctx.tool(...)``. Inside
a column every row runs its own copy at the same time, so the rows waiting on the same step
queue their calls together and the dispatcher sends them as one batched pass; a row that a
step satisfied stops there, so later steps are never called for it. Receipts make a re-run
free. Outside a column the same code runs with direct calls.

Per cell, the provenance (which step won; each step's status, provider and cost) goes into
the cell metadata under ``"waterfall"`` (see ``DatasetRun._set``). Per run, the steps' tallies
are read with ``ctx.waterfall_stats()``.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._arity import takes_ctx
from ._context import Context, Tools
from ._scope import current_row
from .errors import PlayDefinitionError, ToolError
from .tools import ToolResult, dotted, is_value

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = [
    "CodeStep",
    "StepStats",
    "ToolStep",
    "Waterfall",
    "WaterfallStats",
    "get_waterfall",
    "register_waterfall",
    "run_waterfall",
    "waterfall_stats",
]

StepStatus = Literal["completed", "not_found", "skipped", "failed"]


def _check_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise PlayDefinitionError(f"{what} must be a non-empty string, not {value!r}.")


@dataclass(frozen=True)
class ToolStep:
    """A step calling ``tool``; ``map_input(input)`` makes its input (None: skip this row)."""

    id: str
    tool: str
    map_input: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None

    def __post_init__(self) -> None:
        _check_id(self.id, "ToolStep id")
        _check_id(self.tool, f"ToolStep {self.id!r}: the tool id")
        if self.map_input is not None and not callable(self.map_input):
            raise PlayDefinitionError(
                f"ToolStep {self.id!r}: map_input must be a function input -> dict, not "
                f"{self.map_input!r}."
            )


@dataclass(frozen=True)
class CodeStep:
    """A step running ``run(input, ctx)`` (sync or async); its return value is the result.

    ``run`` may call ``ctx.tool`` (the calls are batched with other rows' and their cost is
    the step's), and may return a ``ToolResult``, which is read like a tool step's.
    """

    id: str
    run: Callable[..., Any]

    def __post_init__(self) -> None:
        _check_id(self.id, "CodeStep id")
        takes_ctx(self.run, f"CodeStep {self.id!r}: run", "(input) or (input, ctx)", unknown=True)


Step = ToolStep | CodeStep


@dataclass(frozen=True)
class Waterfall:
    """Steps tried in order until a row holds ``min_results`` values of ``output``.

    ``accept(value)`` or ``accept(value, ctx)`` (sync or async; it may call tools, e.g. a
    paid verification) decides whether a found value counts. The value of a row is the first
    value when ``min_results`` is 1, else the list of values; None when no step satisfied it.
    Equal values found by several steps count once.
    """

    id: str
    _: KW_ONLY
    output: str
    steps: Sequence[Step]
    min_results: int = 1
    accept: Callable[..., Any] | None = None
    description: str = ""
    _accept_takes_ctx: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        _check_id(self.id, "Waterfall id")
        where = f"Waterfall {self.id!r}"
        _check_id(self.output, f"{where}: output (the value to find, e.g. 'email')")
        if isinstance(self.steps, str | bytes | Mapping) or not isinstance(self.steps, Iterable):
            raise PlayDefinitionError(
                f"{where}: steps must be a list of pl.ToolStep / pl.CodeStep, not "
                f"{type(self.steps).__name__}."
            )
        steps = tuple(self.steps)
        if not steps:
            raise PlayDefinitionError(
                f"{where} has no steps; give it at least one, e.g. "
                "steps=[pl.ToolStep('alpha', 'sim.email.alpha')]."
            )
        seen: set[str] = set()
        for step in steps:
            if not isinstance(step, ToolStep | CodeStep):
                raise PlayDefinitionError(
                    f"{where}: {step!r} is not a step; use pl.ToolStep(id, tool) or "
                    "pl.CodeStep(id, run)."
                )
            if step.id in seen:
                raise PlayDefinitionError(
                    f"{where} has two steps named {step.id!r}; give each step its own id."
                )
            seen.add(step.id)
        object.__setattr__(self, "steps", steps)
        if (
            isinstance(self.min_results, bool)
            or not isinstance(self.min_results, int)
            or self.min_results < 1
        ):
            raise PlayDefinitionError(
                f"{where}: min_results={self.min_results!r} must be a whole number >= 1."
            )
        if self.accept is not None:
            takes = takes_ctx(
                self.accept, f"{where}: accept", "(value) or (value, ctx)", unknown=True
            )
            object.__setattr__(self, "_accept_takes_ctx", takes)


# registered waterfalls

_registry: dict[str, Waterfall] = {}
_shipped_loaded = False


def register_waterfall(spec: Waterfall, *, replace: bool = False) -> Waterfall:
    """Make ``spec`` callable by name: ``ctx.waterfall(spec.id, input)``. Returns ``spec``."""
    if not isinstance(spec, Waterfall):
        raise PlayDefinitionError(
            f"register_waterfall needs a pl.Waterfall, not {type(spec).__name__}."
        )
    _load_shipped()
    current = _registry.get(spec.id)
    if current is not None and current != spec and not replace:
        raise PlayDefinitionError(
            f"A different waterfall is already registered as {spec.id!r}. Pick another id, "
            "or pass replace=True to replace it."
        )
    _registry[spec.id] = spec
    return spec


def get_waterfall(name: str) -> Waterfall:
    """The waterfall registered as ``name`` (the shipped ones included)."""
    _load_shipped()
    spec = _registry.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, list(_registry), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise PlayDefinitionError(
            f"No waterfall is registered as {name!r}.{hint} Register it with "
            "pl.register_waterfall(pl.Waterfall(...)), or pass the pl.Waterfall itself."
        )
    return spec


def _load_shipped() -> None:
    global _shipped_loaded
    if not _shipped_loaded:
        _shipped_loaded = True
        from . import waterfalls  # noqa: F401  (registers the shipped specs)


# statistics


@dataclass(frozen=True, kw_only=True)
class StepStats:
    """One step over a run: rows it ran for, rows it satisfied or helped, credits it cost."""

    id: str
    attempts: int = 0  # rows the step ran for
    hits: int = 0  # of those, rows it gave at least one accepted value
    not_found: int = 0
    failed: int = 0
    skipped: int = 0  # rows already satisfied, or whose map_input returned None
    credits: float = 0.0

    @property
    def credits_per_hit(self) -> float | None:
        return self.credits / self.hits if self.hits else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "credits_per_hit": self.credits_per_hit}


@dataclass(frozen=True, kw_only=True)
class WaterfallStats:
    """One waterfall over a run (every dataset and direct call): rows, hits, credits."""

    id: str
    rows: int = 0
    satisfied: int = 0
    credits: float = 0.0
    steps: tuple[StepStats, ...] = ()

    @property
    def credits_per_hit(self) -> float | None:
        return self.credits / self.satisfied if self.satisfied else None

    @property
    def coverage(self) -> float | None:
        return self.satisfied / self.rows if self.rows else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rows": self.rows,
            "satisfied": self.satisfied,
            "coverage": self.coverage,
            "credits": self.credits,
            "credits_per_hit": self.credits_per_hit,
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(slots=True)
class _StepCount:
    attempts: int = 0
    hits: int = 0
    not_found: int = 0
    failed: int = 0
    skipped: int = 0
    credits: float = 0.0


class _Tally:
    """A waterfall's running counts in one run (every dataset and direct call)."""

    def __init__(self, spec: Waterfall) -> None:
        self.id = spec.id
        self.rows = 0
        self.satisfied = 0
        self.steps = {s.id: _StepCount() for s in spec.steps}

    def step(self, step_id: str, status: StepStatus, cost: float) -> None:
        count = self.steps.setdefault(step_id, _StepCount())  # a same-id spec, other steps
        if status == "completed":
            count.hits += 1
        elif status == "not_found":
            count.not_found += 1
        elif status == "failed":
            count.failed += 1
        else:
            count.skipped += 1
        if status != "skipped":
            count.attempts += 1
        count.credits += cost

    def snapshot(self) -> WaterfallStats:
        steps = tuple(
            StepStats(
                id=step_id,
                attempts=c.attempts,
                hits=c.hits,
                not_found=c.not_found,
                failed=c.failed,
                skipped=c.skipped,
                credits=round(c.credits, 6),
            )
            for step_id, c in self.steps.items()
        )
        return WaterfallStats(
            id=self.id,
            rows=self.rows,
            satisfied=self.satisfied,
            credits=round(sum(s.credits for s in steps), 6),
            steps=steps,
        )


def waterfall_stats(runtime: Runtime) -> dict[str, WaterfallStats]:
    """The run's waterfalls so far, by id."""
    return {wid: t.snapshot() for wid, t in runtime.waterfalls.items()}


def _tally(runtime: Runtime, spec: Waterfall) -> _Tally:
    tally: _Tally | None = runtime.waterfalls.get(spec.id)
    if tally is None:
        tally = runtime.waterfalls[spec.id] = _Tally(spec)
    return tally


# running


class _RecordingTools(Tools):
    def __init__(self, runtime: Runtime, sink: list[ToolResult]) -> None:
        super().__init__(runtime)
        self._sink = sink

    def execute(self, **kwargs: Any) -> Awaitable[ToolResult]:
        return _recorded(super().execute(**kwargs), self._sink)


class _StepContext(Context):
    """The ``ctx`` a code step or ``accept`` sees: the play's, noting the results it gets."""

    def __init__(self, base: Context, sink: list[ToolResult]) -> None:
        self.__dict__.update(base.__dict__)  # the play's runtime, secrets and anything else
        self.tools = _RecordingTools(base._rt, sink)
        self._sink = sink

    def tool(self, tool: str, input: Mapping[str, Any], **kwargs: Any) -> Awaitable[ToolResult]:
        # the call is queued now (batched with other rows'); only the result is awaited later
        return _recorded(super().tool(tool, input, **kwargs), self._sink)


async def _recorded(call: Awaitable[ToolResult], sink: list[ToolResult]) -> ToolResult:
    result = await call
    sink.append(result)
    return result


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


async def run_waterfall(runtime: Runtime, spec: Waterfall, input: Mapping[str, Any]) -> Any:
    """Run ``spec`` for one input (one row); returns the value, or None."""
    row = current_row.get()
    tally = _tally(runtime, spec)
    tally.rows += 1
    held: list[Any] = []
    steps: dict[str, dict[str, Any]] = {}
    winner: str | None = None
    provider: str | None = None
    for step in spec.steps:
        if winner is not None:
            steps[step.id] = {"status": "skipped"}
            tally.step(step.id, "skipped", 0.0)
            continue
        outcome = await _run_step(runtime, spec, step, input, held)
        steps[step.id] = outcome.meta()
        tally.step(step.id, outcome.status, steps[step.id]["cost"])
        if len(held) >= spec.min_results:
            winner, provider = step.id, outcome.provider
            tally.satisfied += 1
    provenance: dict[str, Any] = {"id": spec.id, "winner": winner, "steps": steps}
    if provider is not None:
        provenance["provider"] = provider
    if winner is None:
        provenance["reason"] = _reason(spec, held, steps)
    if row is not None:  # folded into the cell's metadata when the column settles
        row.notes["waterfall"] = provenance
    if winner is None:
        return None
    return held[0] if spec.min_results == 1 else held


def _reason(spec: Waterfall, held: list[Any], steps: Mapping[str, Mapping[str, Any]]) -> str:
    tried = ", ".join(f"{sid} {meta['status']}" for sid, meta in steps.items())
    if held:
        return (
            f"Waterfall {spec.id!r} found {len(held)} of the {spec.min_results} values it "
            f"needs ({tried})."
        )
    return f"No step of waterfall {spec.id!r} found a value ({tried})."


async def _run_step(
    runtime: Runtime, spec: Waterfall, step: Step, input: Mapping[str, Any], held: list[Any]
) -> _StepOutcome:
    outcome = _StepOutcome("not_found")
    ctx = _StepContext(runtime.ctx, outcome.results)
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
            found: Any = await ctx.tool(step.tool, payload, key=f"{spec.id}.{step.id}")
        else:
            found = await _maybe_await(step.run(input, ctx))
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
    else:
        outcome.status = "completed" if outcome.values else "not_found"
    if outcome.provider is None and outcome.results:
        outcome.provider = outcome.results[0].tool
    return outcome


def resolve(spec: Waterfall | str) -> Waterfall:
    if isinstance(spec, Waterfall):
        return spec
    if isinstance(spec, str):
        return get_waterfall(spec)
    raise PlayDefinitionError(
        f"ctx.waterfall needs a pl.Waterfall or the name of a registered one, not "
        f"{type(spec).__name__}."
    )
