"""Waterfalls: try steps in order until each row holds enough values (SEMANTICS.md 20-23).

This module holds what a play author writes and reads: the specs (``Waterfall``,
``ToolStep``, ``CodeStep``), the registry of named waterfalls (the shipped ones are found by
name when first asked for), and the statistics types. How a waterfall runs is the engine's
(``_engine/waterfalls.py``).

A waterfall is a plain coroutine per row: each ``ToolStep`` is ``await ctx.tool(...)``. Inside
a column every row runs its own copy at the same time, so the rows waiting on the same step
queue their calls together and the dispatcher sends them as one batched pass; a row that a
step satisfied stops there, so later steps are never called for it. Receipts make a re-run
free. Outside a column the same code runs with direct calls.

Per cell, the provenance (which step won; each step's status, provider and cost) goes into
the cell metadata under ``"waterfall"`` (see ``DatasetRun._set``). Per run, the steps' tallies,
each row counted once from its stored cell (``_engine/tallies.py``), are read with
``ctx.waterfall_stats()``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Any, Literal

from ._arity import check_args, takes_ctx
from ._secrets import check_stored_name
from .errors import PlayDefinitionError

__all__ = [
    "CodeStep",
    "StepStats",
    "ToolStep",
    "Waterfall",
    "WaterfallStats",
    "get_waterfall",
    "register_waterfall",
    "resolve",
]

StepStatus = Literal["completed", "not_found", "skipped", "failed"]


def _check_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise PlayDefinitionError(f"{what} must be a non-empty string, not {value!r}.")
    check_stored_name(value, what)  # ids are stored: in cells, events and the run's stats


@dataclass(frozen=True)
class ToolStep:
    """A step calling ``tool``; ``map_input(input)`` makes its input (None: skip this row)."""

    id: str
    tool: str
    map_input: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None

    def __post_init__(self) -> None:
        _check_id(self.id, "ToolStep id")
        _check_id(self.tool, f"ToolStep {self.id!r}: the tool id")
        if self.map_input is not None:
            check_args(self.map_input, 1, f"ToolStep {self.id!r}: map_input", "(input) -> dict")


@dataclass(frozen=True)
class CodeStep:
    """A step running ``run(input)`` or ``run(input, ctx)`` (sync or async); its return value
    is the result.

    ``run`` may call ``ctx.tool`` (the calls are batched with other rows' and their cost is
    the step's), and may return a ``ToolResult``, which is read like a tool step's.
    ``tools`` names the tools ``run`` may call: a run without one of them stops when the
    waterfall first runs, before any of its steps is paid. ``map_input(input)``, as a tool
    step's, makes what ``run`` receives (None: skip this row).
    """

    id: str
    run: Callable[..., Any]
    tools: Sequence[str] = ()
    map_input: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None
    _takes_ctx: bool = field(init=False, repr=False, compare=False, default=True)

    def __post_init__(self) -> None:
        _check_id(self.id, "CodeStep id")
        if isinstance(self.tools, str | bytes) or not isinstance(self.tools, Iterable):
            raise PlayDefinitionError(
                f"CodeStep {self.id!r}: tools must be a list of tool ids, e.g. "
                f"tools=['hunter.email_finder'], not {self.tools!r}."
            )
        object.__setattr__(self, "tools", tuple(self.tools))
        for tool in self.tools:
            _check_id(tool, f"CodeStep {self.id!r}: a tool id")
        if self.map_input is not None:
            check_args(self.map_input, 1, f"CodeStep {self.id!r}: map_input", "(input) -> dict")
        takes = takes_ctx(
            self.run, f"CodeStep {self.id!r}: run", "(input) or (input, ctx)", unknown=True
        )
        object.__setattr__(self, "_takes_ctx", takes)


Step = ToolStep | CodeStep


@dataclass(frozen=True)
class Waterfall:
    """Steps tried in order until a row holds ``min_results`` values of ``output``.

    ``accept(value)`` or ``accept(value, ctx)`` (sync or async; it may call tools, e.g. a
    paid verification) decides whether a found value counts. The value of a row is the first
    value when ``min_results`` is 1, else the list of values; None when no step satisfied it.
    Equal values found by several steps count once.

    ``order="cheapest"`` runs the steps in the order with the lowest expected credits per hit
    that the store's history supports (each step's recorded hit rate and credits per attempt
    over its newest runs), once every step has 50 recorded attempts; until then, and with
    ``order="declared"`` (the default), the steps run as listed.
    """

    id: str
    _: KW_ONLY
    output: str
    steps: Sequence[Step]
    min_results: int = 1
    accept: Callable[..., Any] | None = None
    description: str = ""
    order: Literal["declared", "cheapest"] = "declared"
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
        if self.order not in ("declared", "cheapest"):
            raise PlayDefinitionError(
                f'{where}: order={self.order!r} must be "declared" (the steps as listed) or '
                '"cheapest" (by the recorded credits per hit, once there is enough history).'
            )
        if self.accept is not None:
            takes = takes_ctx(
                self.accept, f"{where}: accept", "(value) or (value, ctx)", unknown=True
            )
            object.__setattr__(self, "_accept_takes_ctx", takes)


# registered waterfalls

_registry: dict[str, Waterfall] = {}
# The waterfalls that ship with Playline: module and attribute, imported when first named.
SHIPPED = {"work_email": ("playline.waterfalls.simulated", "WORK_EMAIL")}


def register_waterfall(spec: Waterfall, *, replace: bool = False) -> Waterfall:
    """Make ``spec`` callable by name: ``ctx.waterfall(spec.id, input)``. Returns ``spec``."""
    if not isinstance(spec, Waterfall):
        raise PlayDefinitionError(
            f"register_waterfall needs a pl.Waterfall, not {type(spec).__name__}."
        )
    current = _registry.get(spec.id) or _shipped(spec.id)
    if current is not None and current != spec and not replace:
        raise PlayDefinitionError(
            f"A different waterfall is already registered as {spec.id!r}. Pick another id, "
            "or pass replace=True to replace it."
        )
    _registry[spec.id] = spec
    return spec


def _shipped(name: str) -> Waterfall | None:
    where = SHIPPED.get(name)
    if where is None:
        return None
    spec = getattr(importlib.import_module(where[0]), where[1])
    assert isinstance(spec, Waterfall)
    return spec


def get_waterfall(name: str) -> Waterfall:
    """The waterfall registered as ``name``, or shipped with Playline under that name."""
    spec = _registry.get(name) or _shipped(name)
    if spec is None:
        known = sorted({*_registry, *SHIPPED})
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise PlayDefinitionError(
            f"No waterfall is registered as {name!r}.{hint} Register it with "
            "pl.register_waterfall(pl.Waterfall(...)), or pass the pl.Waterfall itself."
        )
    return spec


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
    cached: int = 0  # attempts answered wholly from receipts (they cost nothing now)

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
    no_input: int = 0  # rows no step had an input for (every map_input returned None)
    credits: float = 0.0
    steps: tuple[StepStats, ...] = ()
    # the step order with the lowest expected credits per hit, from the store's history and
    # this run (None: not enough history yet; ``order_note`` says what is missing)
    suggested_order: tuple[str, ...] | None = None
    order_note: str = ""

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
            "no_input": self.no_input,
            "coverage": self.coverage,
            "credits": self.credits,
            "credits_per_hit": self.credits_per_hit,
            "steps": [s.to_dict() for s in self.steps],
            "suggested_order": None if self.suggested_order is None else list(self.suggested_order),
            "order_note": self.order_note,
        }


def resolve(spec: Waterfall | str) -> Waterfall:
    if isinstance(spec, Waterfall):
        return spec
    if isinstance(spec, str):
        return get_waterfall(spec)
    raise PlayDefinitionError(
        f"ctx.waterfall needs a pl.Waterfall or the name of a registered one, not "
        f"{type(spec).__name__}."
    )
