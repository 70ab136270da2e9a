"""The tools the simulator serves and the metadata it publishes for them.

A provider tool (``sim.email.beta``) may own operations: a bulk variant
(``sim.email.beta.bulk``) that shares its rate bucket and cost rule, or a poll endpoint
(``sim.phone.finder.poll``) for its async jobs. Every tool and operation is a :class:`ToolSpec`;
``ToolSpec.meta()`` is the JSON the gateway publishes at ``GET /api/v2/integrations`` (with
the rate and idempotency in force, which faults may change).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

VERSION = "2026-01"

# Which share of the world each provider knows (``_providers`` decides who, per seed).
COVERAGE = {
    "sim.email.alpha": 0.55,
    "sim.email.beta": 0.45,
    "sim.email.gamma": 0.36,
    "sim.company.enrich": 0.90,
    "sim.phone.finder": 0.35,
}
# Gamma guesses the company's pattern for a share of the people it does not know; the guess
# uses a wrong pattern, so the verifier calls it invalid (unless the domain is catch-all).
GAMMA_GUESS_SHARE = 0.08

Kind = Literal["single", "bulk", "poll"]
# how each input field compares (``_inputs.py``), published as the runtime's normalize kinds
PUBLISHED = {"first_name": "name", "last_name": "name", "domain": "domain", "email": "email"}
Charge = Literal["on_hit", "per_call"]
ON_HIT: Charge = "on_hit"
PER_CALL: Charge = "per_call"


@dataclass(frozen=True, kw_only=True, slots=True)
class Rate:
    """Token-bucket parameters: sustained ``per_second``, up to ``burst`` at once."""

    per_second: float
    burst: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Cost:
    """``credits`` charged per item, either only when data comes back or on every call."""

    credits: float
    charge: Charge

    @property
    def milli(self) -> int:
        # The ledger counts thousandths of a credit so 0.2 * 5 is exactly 1.
        return round(self.credits * 1000)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """One executable tool or operation."""

    id: str
    description: str
    kind: Kind
    base: str
    rate: Rate
    concurrency: int
    cost: Cost
    required: tuple[str, ...]
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    lists: Mapping[str, str] = field(default_factory=dict)
    retry_safe: bool = True
    batch_max: int | None = None
    is_async: bool = False
    transient_rate: float = 0.0
    """Built-in share of requests that fail with a transient 503 (deterministic per seed)."""
    coverage: float | None = None
    """The share of the world's inputs it answers, as a provider publishes it."""

    @property
    def bucket_id(self) -> str:
        """Whose token bucket a request takes from: a bulk call spends its base tool's."""
        return self.base if self.kind == "bulk" else self.id

    @property
    def has_bulk(self) -> bool:
        """Whether bulk requests reach this tool's work: it is, or it owns, a bulk operation."""
        return self.kind == "bulk" or (self.kind == "single" and self.batch_max is not None)

    def meta(
        self, *, rate: Rate | None = None, header_keys: bool = True, item_keys: bool = True
    ) -> dict[str, Any]:
        """The published metadata; ``rate`` overrides the catalog's, and ``header_keys`` /
        ``item_keys`` say whether ``Idempotency-Key`` headers and bulk item keys are honoured
        (never for polls, which are reads; item keys only where a bulk operation exists)."""
        rate = rate or self.rate
        meta: dict[str, Any] = {
            "id": self.id,
            "description": self.description,
            "rate": {"per_second": rate.per_second, "burst": rate.burst},
            "concurrency": self.concurrency,
            "cost": {"credits": self.cost.credits, "charge": self.cost.charge},
            "batch": (
                {"operation": f"{self.id}.bulk", "max_size": self.batch_max}
                if self.batch_max is not None and self.kind == "single"
                else None
            ),
            "outputs": {name: list(paths) for name, paths in self.outputs.items()},
            "lists": dict(self.lists),
            "version": VERSION,
            "retry_safe": self.retry_safe,
            "async": {"poll": f"{self.id}.poll"} if self.is_async else None,
            "input": {
                "required": list(self.required),
                "optional": [],
                "normalize": {f: PUBLISHED[f] for f in self.required if f in PUBLISHED},
            },
            "coverage": self.coverage,
            "idempotency": {
                "header": header_keys and self.kind != "poll",
                "bulk_items": item_keys and self.has_bulk,
            },
        }
        if self.kind == "bulk":
            meta["bulk_of"] = self.base
            meta["max_size"] = self.batch_max
        elif self.kind == "poll":
            meta["poll_of"] = self.base
        return meta


_PERSON = ("first_name", "last_name", "domain")
_EMAIL_OUT = {"email": ("email",), "confidence": ("confidence",)}


def _tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            id="sim.email.alpha",
            description="Work email from name and company domain (broad coverage, fast).",
            kind="single",
            base="sim.email.alpha",
            rate=Rate(per_second=20.0, burst=20),
            concurrency=8,
            cost=Cost(credits=1.0, charge=ON_HIT),
            required=_PERSON,
            outputs=_EMAIL_OUT,
        ),
        ToolSpec(
            id="sim.email.beta",
            description="Work email from name and company domain; bulk endpoint up to 50.",
            kind="single",
            base="sim.email.beta",
            rate=Rate(per_second=10.0, burst=10),
            concurrency=4,
            cost=Cost(credits=1.0, charge=ON_HIT),
            required=_PERSON,
            outputs=_EMAIL_OUT,
            batch_max=50,
        ),
        ToolSpec(
            id="sim.email.gamma",
            description=(
                "Work email from name and company domain; charges every call, sometimes "
                "returns a pattern guess, 5% transient 503s (safe to retry)."
            ),
            kind="single",
            base="sim.email.gamma",
            rate=Rate(per_second=5.0, burst=5),
            concurrency=4,
            cost=Cost(credits=2.0, charge=PER_CALL),
            required=_PERSON,
            outputs=_EMAIL_OUT,
            transient_rate=0.05,
        ),
        ToolSpec(
            id="sim.company.enrich",
            description="Firmographics from a company domain; bulk endpoint up to 100.",
            kind="single",
            base="sim.company.enrich",
            rate=Rate(per_second=50.0, burst=50),
            concurrency=16,
            cost=Cost(credits=1.0, charge=ON_HIT),
            required=("domain",),
            outputs={
                "name": ("name",),
                "industry": ("industry",),
                "size": ("size",),
                "country": ("country",),
                "domain": ("domain",),
            },
            batch_max=100,
        ),
        ToolSpec(
            id="sim.email.verify",
            description="Deliverability of an address: valid, invalid or catch_all.",
            kind="single",
            base="sim.email.verify",
            rate=Rate(per_second=50.0, burst=50),
            concurrency=16,
            cost=Cost(credits=0.2, charge=PER_CALL),
            required=("email",),
            outputs={"status": ("status",), "email": ("email",)},
            batch_max=200,
        ),
        ToolSpec(
            id="sim.phone.finder",
            description=(
                "Direct phone from name and company domain. Async: execute submits a job "
                "(charged at submit when the phone will be found); poll sim.phone.finder.poll."
            ),
            kind="single",
            base="sim.phone.finder",
            rate=Rate(per_second=5.0, burst=5),
            concurrency=4,
            cost=Cost(credits=5.0, charge=ON_HIT),
            required=_PERSON,
            outputs={"phone": ("phone",)},
            # A retried submit is a second job and a second charge.
            retry_safe=False,
            is_async=True,
        ),
    ]


def _operations(tool: ToolSpec) -> list[ToolSpec]:
    ops: list[ToolSpec] = []
    if tool.batch_max is not None:
        ops.append(
            ToolSpec(
                id=f"{tool.id}.bulk",
                description=f"Bulk {tool.id}: payload {{'items': [input, ...]}}, at most "
                f"{tool.batch_max}, with optional per-item 'idempotency_keys' (aligned); results "
                f"align with items. Shares {tool.id}'s rate bucket.",
                kind="bulk",
                base=tool.id,
                rate=tool.rate,
                concurrency=max(1, tool.concurrency // 2),
                cost=tool.cost,
                required=("items",),
                outputs={"results": ("results",)},
                lists={"results": "results"},
                retry_safe=tool.retry_safe,
                batch_max=tool.batch_max,
            )
        )
    if tool.is_async:
        ops.append(
            ToolSpec(
                id=f"{tool.id}.poll",
                description=f"Poll a {tool.id} job: payload {{'job_id'}}; free.",
                kind="poll",
                base=tool.id,
                rate=Rate(per_second=200.0, burst=200),
                concurrency=16,
                cost=Cost(credits=0.0, charge=PER_CALL),
                required=("job_id",),
                outputs=tool.outputs,
            )
        )
    return ops


def _coverage() -> dict[str, float]:
    """The share of the world's people (or companies) each provider answers, as published:
    its coverage, gamma's guesses included, and the verifier answers every address."""
    gamma = COVERAGE["sim.email.gamma"]
    answers = {**COVERAGE, "sim.email.gamma": gamma + (1 - gamma) * GAMMA_GUESS_SHARE}
    answers["sim.email.verify"] = 1.0
    return {tool: round(share, 4) for tool, share in answers.items()}


def build_catalog() -> dict[str, ToolSpec]:
    """Every tool and operation by id, tools first, each followed by its operations."""
    catalog: dict[str, ToolSpec] = {}
    coverage = _coverage()
    for tool in _tools():
        tool = replace(tool, coverage=coverage.get(tool.id))
        catalog[tool.id] = tool
        for op in _operations(tool):
            catalog[op.id] = op
    return catalog
