"""What each simulated provider answers for a (normalised) input.

Whether a provider knows an entity is ``unit(seed, tool, entity) < coverage``: deterministic,
independent across providers (so a waterfall of three finds ~85% where one finds 40-55%, as
published benchmarks report), and unrelated to the order of requests. Inputs that are not in
the world are simply unknown to everyone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._catalog import COVERAGE, GAMMA_GUESS_SHARE
from ._world import PATTERNS, World, email_for, unit


@dataclass(frozen=True, slots=True)
class Answer:
    """A provider's answer to one input: ``completed`` with a result, or ``no_result``."""

    status: Literal["completed", "no_result"]
    result: dict[str, Any] | None

    @property
    def hit(self) -> bool:
        return self.status == "completed"


NO_RESULT = Answer("no_result", None)


def _confidence(world: World, tool: str, index: int, low: float, high: float) -> float:
    return round(low + (high - low) * unit(world.seed, "confidence", tool, index), 2)


def _email_finder(tool: str, low: float) -> Callable[[World, Mapping[str, str]], Answer]:
    coverage = COVERAGE[tool]

    def find(world: World, inp: Mapping[str, str]) -> Answer:
        person = world.person(inp["first_name"], inp["last_name"], inp["domain"])
        if person is None:
            return NO_RESULT
        if unit(world.seed, tool, person.ordinal) < coverage:
            confidence = _confidence(world, tool, person.ordinal, low, 0.99)
            return Answer("completed", {"email": person.email, "confidence": confidence})
        return NO_RESULT

    return find


_gamma_known = _email_finder("sim.email.gamma", 0.6)


def _gamma(world: World, inp: Mapping[str, str]) -> Answer:
    answer = _gamma_known(world, inp)
    if answer.hit:
        return answer
    person = world.person(inp["first_name"], inp["last_name"], inp["domain"])
    if person is None or unit(world.seed, "gamma-guess", person.ordinal) >= GAMMA_GUESS_SHARE:
        return NO_RESULT
    company = world.company(person.domain)
    assert company is not None
    wrong = [p for p in PATTERNS if p != company.pattern]
    pattern = wrong[int(unit(world.seed, "gamma-pattern", person.ordinal) * len(wrong))]
    guess = email_for(pattern, person.first_name, person.last_name, person.domain)
    confidence = _confidence(world, "sim.email.gamma-guess", person.ordinal, 0.3, 0.5)
    return Answer("completed", {"email": guess, "confidence": confidence})


def _company(world: World, inp: Mapping[str, str]) -> Answer:
    company = world.company(inp["domain"])
    if (
        company is None
        or unit(world.seed, "sim.company.enrich", company.ordinal) >= COVERAGE["sim.company.enrich"]
    ):
        return NO_RESULT
    return Answer(
        "completed",
        {
            "domain": company.domain,
            "name": company.name,
            "industry": company.industry,
            "size": company.size,
            "country": company.country,
        },
    )


def _verify(world: World, inp: Mapping[str, str]) -> Answer:
    email = inp["email"]
    _, at, domain = email.rpartition("@")
    company = world.company(domain) if at else None
    if company is not None and company.catch_all:
        status = "catch_all"
    elif email in world.person_by_email:
        status = "valid"
    else:
        status = "invalid"
    return Answer("completed", {"email": email, "status": status})


def _phone(world: World, inp: Mapping[str, str]) -> Answer:
    person = world.person(inp["first_name"], inp["last_name"], inp["domain"])
    if (
        person is None
        or unit(world.seed, "sim.phone.finder", person.ordinal) >= COVERAGE["sim.phone.finder"]
    ):
        return NO_RESULT
    return Answer("completed", {"phone": person.phone})


PROVIDERS: dict[str, Callable[[World, Mapping[str, str]], Answer]] = {
    "sim.email.alpha": _email_finder("sim.email.alpha", 0.8),
    "sim.email.beta": _email_finder("sim.email.beta", 0.75),
    "sim.email.gamma": _gamma,
    "sim.company.enrich": _company,
    "sim.email.verify": _verify,
    "sim.phone.finder": _phone,
}


def answer(tool: str, world: World, inp: Mapping[str, str]) -> Answer:
    """The answer of base tool ``tool`` to the normalised input ``inp``."""
    return PROVIDERS[tool](world, inp)
