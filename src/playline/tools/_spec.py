"""How a tool is described: its rate, cost, batching and outputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .._limits import is_amount
from ..errors import PlayDefinitionError

if TYPE_CHECKING:
    from ._normalize import Normalize

__all__ = ["Batch", "Cost", "JobState", "Jobs", "Rate", "ToolSpec", "Transport"]


@dataclass(frozen=True, kw_only=True)
class Rate:
    """How fast a tool may be called: requests per second (a token bucket with ``burst``),
    calls in flight, and requests per minute, hour and day, any of them at once (Hunter: 15 a
    second and 500 a minute). A window is sliding: at most its limit in any span of its
    length, so it never sends more than the provider's fixed or rolling window allows.
    ``per_record``: the provider counts each input of a bulk request as a request, so the
    rate, the windows and ``concurrency`` count inputs, and a bulk request carries no more
    inputs than they let out at once.

    ``tokens_per_minute`` and ``output_tokens_per_minute`` (an LLM's TPM, or Anthropic's
    ITPM and OTPM) are token buckets, as the providers count: each holds its limit and
    refills it every minute (and a second). Before a call goes out, the tool's estimate of
    its tokens (``HttpTool(tokens=...)``: an int, counted against ``tokens_per_minute``, or
    ``(input, output)``, the output against ``output_tokens_per_minute``) is taken from
    them, waiting for it; after its answer the count is corrected by what the answer says it
    used (``tokens_used=``): up when it used more, down when it used less unless
    ``tokens_returned=False`` says the provider keeps its estimate whatever was used. A
    call answered 429 is counted as nothing (the provider counted nothing); any other
    failure keeps its estimate (a 5xx or a timeout may have been counted). Tokens are
    counted by each process, also on a store that processes share
    (``docs/guide/http-tools.md``)."""

    per_second: float | None = None
    burst: int | None = None
    concurrency: int | None = None
    per_minute: int | None = None
    per_hour: int | None = None
    per_day: int | None = None
    per_record: bool = False  # a bulk request counts one request per input in it (Prospeo)
    tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None
    tokens_returned: bool = True  # tokens estimated but not used go back to the buckets

    @property
    def windows(self) -> tuple[tuple[float, int], ...]:
        """``(seconds, requests)`` of each window declared."""
        spans = ((60.0, self.per_minute), (3600.0, self.per_hour), (86400.0, self.per_day))
        return tuple((seconds, limit) for seconds, limit in spans if limit is not None)

    @property
    def token_limits(self) -> tuple[int | None, int | None]:
        """``(tokens_per_minute, output_tokens_per_minute)``, each None when not declared."""
        return (self.tokens_per_minute, self.output_tokens_per_minute)

    def __post_init__(self) -> None:
        if self.per_second is not None and not is_amount(self.per_second, positive=True):
            raise PlayDefinitionError(
                f"Rate(per_second={self.per_second!r}) must be a positive number; "
                "leave it unset for no limit."
            )
        if self.per_record is not True and self.per_record is not False:
            raise PlayDefinitionError(
                f"Rate(per_record={self.per_record!r}): True when the provider counts each "
                "input of a bulk request as a request, else False."
            )
        if self.tokens_returned is not True and self.tokens_returned is not False:
            raise PlayDefinitionError(
                f"Rate(tokens_returned={self.tokens_returned!r}): True when the provider "
                "gives back the estimated tokens a call did not use, False when it keeps them."
            )
        for name in (
            "burst",
            "concurrency",
            "per_minute",
            "per_hour",
            "per_day",
            "tokens_per_minute",
            "output_tokens_per_minute",
        ):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise PlayDefinitionError(
                    f"Rate({name}={value!r}) must be a whole number >= 1; leave it unset for "
                    "the default."
                )


@dataclass(frozen=True)
class Cost:
    """What a call costs: ``credits`` of ``unit`` (``"credits"``, the providers' own, or
    ``"usd"``, money) per call (``charge="per_call"``) or only when found (``"on_hit"``).

    ``worst``, a function of a call's input, says the most that one call may cost when it
    differs by input (an LLM call: its prompt's tokens and ``max_tokens`` at the model's
    prices); budgets hold that much for it while it is in flight. Without it, the most a
    call may cost is ``credits``."""

    credits: float = 0.0
    charge: Literal["per_call", "on_hit"] = "per_call"
    unit: Literal["credits", "usd"] = "credits"
    worst: Callable[[Mapping[str, Any]], float] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.credits, int | float) and math.isfinite(self.credits)) or (
            self.credits < 0
        ):
            raise PlayDefinitionError(f"Cost({self.credits!r}) must be a number >= 0.")
        if self.charge not in ("per_call", "on_hit"):
            raise PlayDefinitionError(
                f'Cost(charge={self.charge!r}) must be "per_call" or "on_hit".'
            )
        if self.unit not in UNITS:
            raise PlayDefinitionError(
                f'Cost(unit={self.unit!r}) must be "credits" (the provider\'s own) or "usd".'
            )
        if self.worst is not None and not callable(self.worst):
            raise PlayDefinitionError(
                "Cost(worst=...) is a function of a call's input giving the most it may cost."
            )

    def charged(self, found: bool) -> float:
        return float(self.credits) if found or self.charge == "per_call" else 0.0

    def most(self, input: Mapping[str, Any]) -> float:
        """The most one call with ``input`` may cost."""
        if self.worst is None:
            return float(self.credits)
        return max(float(self.credits), float(self.worst(input)))

    @property
    def priced(self) -> bool:
        """Whether a call may cost anything."""
        return bool(self.credits) or self.worst is not None


UNITS = ("credits", "usd")  # what costs are counted in: budgets are per unit


@dataclass(frozen=True, kw_only=True)
class Batch:
    """Calls to this tool are sent in bulk, ``max_size`` inputs at a time.

    Without ``via`` the tool's own function takes a list of inputs and returns an aligned
    list; with ``via`` the bulk call goes through that other (batch) tool. ``max_wait``
    (seconds) holds a partial batch up to that long for more calls: fewer, fuller requests
    for some latency.
    """

    max_size: int
    via: str | None = None
    max_wait: float | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_size, bool)
            or not isinstance(self.max_size, int)
            or self.max_size < 1
        ):
            raise PlayDefinitionError(
                f"Batch(max_size={self.max_size!r}) must be a whole number >= 1."
            )
        if self.via is not None and (not isinstance(self.via, str) or not self.via.strip()):
            raise PlayDefinitionError(
                f"Batch(via={self.via!r}) names the batch tool the calls go through, e.g. "
                "via='acme.lookup_bulk', or is None."
            )
        if self.max_wait is not None and not is_amount(self.max_wait):
            raise PlayDefinitionError(
                f"Batch(max_wait={self.max_wait!r}) is the seconds a partial batch may wait "
                "for more calls: a number >= 0, or None."
            )


class Transport(Protocol):
    """Sends one call (a chunk of inputs) to where a tool runs.

    Returns one raw result per input, aligned with ``inputs``: the result's JSON data, or
    None for "not found". Raises ``ToolError`` when the call as a whole failed. ``keys`` are
    the inputs' idempotency keys (derived from their receipts): a transport whose provider
    honours them sends them, so a call repeated after a crash is not paid twice.

    A transport may also have ``remaining() -> (requests left, seconds until reset) | None``:
    what its provider's latest answer said is left of the account's window, which the
    engine's gate keeps within (``HttpTool`` reads it from ``RateLimit-Remaining`` and the
    like).

    And ``tokens(input) -> int | (input, output)``: a call's estimated tokens, which the
    gate's token buckets count before it goes out (``Rate(tokens_per_minute=...)``,
    ``_tokens.py``); what an answer says was used, and the providers' token headers, are
    reported with ``playline.tools._tokens.heard`` while the call is sent (``HttpTool``
    does it with ``tokens_used=``).
    """

    # True when ``call`` never waits (a plain function): requests are then made one after
    # the other, with no task each.
    inline: bool

    async def call(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> list[Any]: ...


@dataclass(frozen=True, kw_only=True)
class JobState:
    """Where an async tool call stands: ``done`` with its ``result``, or pending as ``job``
    (a JSON value the provider gave to poll with), to be polled again after ``wait`` seconds
    when the provider said how long (else the tool's ``poll_interval``)."""

    done: bool
    result: Any = None
    job: Any = None
    wait: float | None = None


class Jobs(Protocol):
    """Async tools: a call is submitted, then polled until done. The engine records the
    submitted job on the call's receipt, so a resumed run polls it instead of paying again.

    Polls are ``poll_interval`` seconds apart, unless an answer says how long to wait
    (``JobState.wait``); a jobs object may also have ``poll_backoff`` (each wait that many
    times the one before) and ``poll_max_interval`` (the longest wait)."""

    poll_interval: float

    async def submit(
        self, spec: ToolSpec, input: Mapping[str, Any], key: str | None = None
    ) -> JobState: ...

    async def poll(self, spec: ToolSpec, job: Any, input: Mapping[str, Any]) -> JobState:
        """Where ``job`` (submitted for ``input``) stands."""
        ...


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """Everything the engine needs to call a tool."""

    id: str
    transport: Transport = field(repr=False, compare=False)
    rate: Rate = Rate()
    cost: Cost = Cost()
    batch: Batch | None = None
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    lists: Mapping[str, str] = field(default_factory=dict)
    version: str = "1"
    retry_safe: bool = False
    # A call whose request may have reached the provider (a crash, a timeout, a 5xx) is sent
    # again with the same idempotency key ("resend": the provider recognises the repeat and
    # does not charge twice) or failed, to be bought again only when the user asks ("fail").
    in_doubt: Literal["resend", "fail"] = "resend"
    auth_scope: str = "local"
    description: str = ""
    jobs: Jobs | None = field(default=None, repr=False, compare=False)
    # what the input holds (a gateway publishes it; empty when not declared)
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    # the share of inputs the provider says it finds (its published coverage), if it says
    coverage: float | None = None
    # how inputs compare: applied before an input is keyed and sent (``_normalize.py``)
    normalize: Normalize | None = field(default=None, repr=False, compare=False)

    @property
    def max_batch(self) -> int:
        return self.batch.max_size if self.batch else 1

    def cost_basis(self) -> str:
        """How a call is charged, in words: ``"1 credit per input found (on_hit); a batch
        request of up to 50 inputs is charged per input"``."""
        if self.cost.unit == "usd":
            return (
                "in dollars, what each call's tokens cost at the model's prices (reserved at its "
                "worst case: its prompt and max_tokens)"
                if self.cost.worst is not None
                else f"${self.cost.credits:g} per call"
            )
        credits = f"{self.cost.credits:g} credit{'' if self.cost.credits == 1 else 's'}"
        if self.cost.credits == 0:
            text = "free"
        elif self.cost.charge == "on_hit":
            text = f"{credits} per input found (on_hit; a miss is free)"
        else:
            text = f"{credits} per input, found or not (per_call)"
        if self.batch is not None and self.cost.credits:
            text += (
                f"; a batch request of up to {self.batch.max_size} inputs is charged per "
                "input, not per request"
            )
        return text

    def describe(self) -> dict[str, Any]:
        """The tool's metadata as JSON (the gateway's metadata shape)."""
        return {
            "id": self.id,
            "description": self.description,
            "rate": {"per_second": self.rate.per_second, "burst": self.rate.burst},
            "concurrency": self.rate.concurrency,
            "cost": {"credits": self.cost.credits, "charge": self.cost.charge}
            | ({} if self.cost.unit == "credits" else {"unit": self.cost.unit}),
            "batch": (
                {
                    "operation": self.batch.via or self.id,
                    "max_size": self.batch.max_size,
                    "max_wait": self.batch.max_wait,
                }
                if self.batch
                else None
            ),
            "outputs": {k: list(v) for k, v in self.outputs.items()},
            "lists": dict(self.lists),
            "version": self.version,
            "retry_safe": self.retry_safe,
            "in_doubt": self.in_doubt,
            "input": {
                "required": list(self.required),
                "optional": list(self.optional),
                **({"normalize": self.normalize.described} if self.normalize else {}),
            },
            "coverage": self.coverage,
        }


def normalise_outputs(
    outputs: Mapping[str, str | Sequence[str]] | None,
) -> dict[str, tuple[str, ...]]:
    """``outputs=``: each named output's dotted paths, tried in order."""
    if outputs is not None and not isinstance(outputs, Mapping):
        raise PlayDefinitionError(
            f"outputs={outputs!r} must map output names to dotted paths, e.g. "
            '{"domain": ["domain", "company.domain"]}.'
        )
    result: dict[str, tuple[str, ...]] = {}
    for name, paths in (outputs or {}).items():
        if isinstance(paths, str):
            paths = (paths,)
        if (
            not isinstance(paths, Sequence)
            or not paths
            or not all(isinstance(p, str) and p for p in paths)
        ):
            raise PlayDefinitionError(
                f"outputs[{name!r}] must be a dotted path or a list of them, e.g. "
                '{"domain": ["domain", "company.domain"]}.'
            )
        result[str(name)] = tuple(paths)
    return result


def normalise_lists(lists: Mapping[str, str] | None) -> dict[str, str]:
    """``lists=``: each named list output's dotted path."""
    if lists is None:
        return {}
    if not isinstance(lists, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in lists.items()
    ):
        raise PlayDefinitionError(
            f'lists={lists!r} must map list names to dotted paths, e.g. {{"emails": "emails"}}.'
        )
    return dict(lists)
