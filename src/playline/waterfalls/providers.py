"""Waterfalls over the real providers (``playline.providers``): ``work_email``,
``linkedin_to_email`` and ``person_to_phone``.

Each is made for the providers a user has: ``pl.waterfalls.work_email(providers=["hunter",
"prospeo", "leadmagic", "dropcontact"], verify="zerobounce", catch_all="verify")``; without a
list, the default providers whose key is set (as a run has those providers' tools), and
without one of them a clear refusal before anything is paid (a step whose tool the run does
not have would fail every row, after the steps before it were paid). The order
is the cheapest expected credits per hit: from the store's history once every step has 50
recorded attempts (``Waterfall(order="cheapest")``), until then from the documented prices
(each finder's declared credits per email found). A found email then meets the catch-all
policy: ``accept`` keeps a catch-all (or unknown) address as found, ``reject`` drops it and
the waterfall goes on, ``verify`` asks the verifier and keeps it only when it says ``valid``.
An ``invalid`` address is never kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import CodeStep, Context, Waterfall
from ..errors import PlayDefinitionError
from ..providers import named
from ..providers._provider import has_key
from ..providers._vocab import INPUTS

__all__ = [
    "EMAIL_FINDERS",
    "LINKEDIN_FINDERS",
    "PHONE_FINDERS",
    "VERIFIERS",
    "linkedin_to_email",
    "person_to_phone",
    "work_email",
]

CatchAll = Literal["accept", "verify", "reject"]
AUTO = "auto"  # the verifier: the first of VERIFIERS whose key is set


@dataclass(frozen=True)
class Finder:
    """A provider's tool for one waterfall: its id, the input fields it needs (all of one of
    the alternatives) and fixed options of its own (FullEnrich: no phone when an email is
    asked for)."""

    tool: str
    needs: tuple[tuple[str, ...], ...]
    options: Mapping[str, Any] = field(default_factory=dict)

    def input(self, given: Mapping[str, Any]) -> dict[str, Any] | None:
        """The fields of ``given`` this tool takes, when set (others would only split its
        receipts); None when none of the alternatives it needs is complete (the step is
        skipped for the row)."""
        takes = {name for need in self.needs for name in need}
        fields = {
            name: value.strip() if isinstance(value, str) else value
            for name in INPUTS
            if name in takes
            and (value := given.get(name)) is not None
            and (not isinstance(value, str) or value.strip())
        }
        if not any(all(n in fields for n in need) for need in self.needs):
            return None
        return {**fields, **self.options}


_NAME = (("first_name", "last_name", "domain"), ("full_name", "domain"))
_NAME_OR_COMPANY = (*_NAME, ("first_name", "last_name", "company"))
_LINKEDIN = (("linkedin_url",),)

# by work email from a name and a company; the reference system's default order
EMAIL_FINDERS: dict[str, Finder] = {
    "hunter": Finder("hunter.email_finder", _NAME_OR_COMPANY),
    "leadmagic": Finder("leadmagic.email_finder", _NAME_OR_COMPANY),
    "pdl": Finder("pdl.person_enrich", (*_NAME_OR_COMPANY, *_LINKEDIN)),
    "dropcontact": Finder("dropcontact.enrich", (*_NAME_OR_COMPANY, *_LINKEDIN)),
    "prospeo": Finder("prospeo.email_finder", (*_NAME_OR_COMPANY, *_LINKEDIN)),
    "apollo": Finder("apollo.people_match", (*_NAME_OR_COMPANY, *_LINKEDIN)),
    "icypeas": Finder("icypeas.email_search", _NAME_OR_COMPANY),
    "fullenrich": Finder("fullenrich.enrich", (*_NAME_OR_COMPANY, *_LINKEDIN), {"phones": False}),
}
LINKEDIN_FINDERS = ("prospeo", "pdl", "apollo", "dropcontact", "fullenrich")
PHONE_FINDERS: dict[str, Finder] = {
    "leadmagic": Finder("leadmagic.mobile_finder", (*_LINKEDIN, ("email",))),
    "fullenrich": Finder("fullenrich.enrich", (*_NAME_OR_COMPANY, *_LINKEDIN)),
    "pdl": Finder("pdl.person_enrich", (*_NAME_OR_COMPANY, *_LINKEDIN, ("email",))),
}
VERIFIERS = {
    "zerobounce": "zerobounce.validate",
    "neverbounce": "neverbounce.verify",
    "hunter": "hunter.email_verifier",
    "leadmagic": "leadmagic.email_validate",
}


def _price(tool: str) -> float:
    """Documented credits per hit of a tool: its declared cost, per found result."""
    provider = named(tool.split(".", 1)[0])
    spec = next((s for s in provider.tools().specs() if s.id == tool), None)  # no key read
    if spec is None:
        return float("inf")
    credits = spec.cost.credits
    return credits if spec.cost.charge == "on_hit" else credits / 0.5  # half found, assumed


def _chosen(
    providers: Sequence[str] | None, table: Mapping[str, Finder], default: Sequence[str], what: str
) -> list[str]:
    """The providers named (checked), or without a list those of ``default`` whose key is
    set, as a run has the tools of those only: cheapest first."""
    if providers is None:
        names = [name for name in default if has_key(named(name))]
        if not names:
            raise PlayDefinitionError(
                f"{what} has no provider: none of {_keys(default)} is set. Export the key of "
                f"one (`playline providers list` says which are set), or name the providers: "
                f"{what}(providers=[...]), -i providers:='[\"{default[0]}\"]' on the "
                "command line."
            )
        return _cheapest(names, table)
    # as pl.providers names them, whatever the case ("Hunter", " hunter")
    names = [n.strip().lower() if isinstance(n, str) else n for n in providers]
    if isinstance(providers, str) or not names:
        raise PlayDefinitionError(
            f"{what}(providers=...): a list of provider names, e.g. {list(default)[:3]}."
        )
    unknown = [n for n in names if n not in table]
    if unknown:
        raise PlayDefinitionError(
            f"{what}(providers={names!r}): {', '.join(map(repr, unknown))} cannot do it; "
            f"choose among {', '.join(table)}."
        )
    return _cheapest(names, table)


def _cheapest(names: Sequence[str], table: Mapping[str, Finder]) -> list[str]:
    # documented prices first; equal prices keep the order given
    return sorted(dict.fromkeys(names), key=lambda n: _price(table[n].tool))


def _keys(names: Sequence[str]) -> str:
    """The variables holding the keys of these providers, for a message."""
    return ", ".join(named(name).key for name in names)


def _verifier(verify: str | None, catch_all: str, what: str) -> str | None:
    """The verifier ``verify`` names; for ``"auto"``, the first of ``VERIFIERS`` whose key is
    set (none: None, unless the policy needs one)."""
    if verify != AUTO:
        return verify
    chosen = next((name for name in VERIFIERS if has_key(named(name))), None)
    if chosen is None and catch_all == "verify":
        raise PlayDefinitionError(
            f"{what}(catch_all='verify') needs a verifier, and none of {_keys(list(VERIFIERS))} "
            "is set: export one, or keep catch-all addresses (catch_all='accept') or drop "
            "them (catch_all='reject'); -i catch_all=accept on the command line."
        )
    return chosen


def _checked_policy(catch_all: str, verify: str | None, what: str) -> str | None:
    """The verifier the policy uses (``verify``, or for ``"auto"`` one whose key is set)."""
    if catch_all not in ("accept", "verify", "reject"):
        raise PlayDefinitionError(
            f"{what}(catch_all={catch_all!r}): 'accept' (keep catch-all addresses), 'verify' "
            "(keep them when the verifier says valid) or 'reject'."
        )
    if verify is not None and verify != AUTO and verify not in VERIFIERS:
        raise PlayDefinitionError(
            f"{what}(verify={verify!r}): one of {', '.join(VERIFIERS)}, 'auto' (the first "
            "of them whose key is set) or None."
        )
    verify = _verifier(verify, catch_all, what)
    if catch_all == "verify" and verify is None:
        raise PlayDefinitionError(
            f"{what}(catch_all='verify') needs a verifier: verify='zerobounce' (or "
            f"{', '.join(v for v in VERIFIERS if v != 'zerobounce')})."
        )
    return verify


def _email_step(name: str, finder: Finder, verify: str | None, catch_all: CatchAll) -> CodeStep:
    async def run(asked: Mapping[str, Any], ctx: Context) -> str | None:
        found = await ctx.tool(finder.tool, dict(asked), key=f"{name}.find")
        email, status = found.get("email"), found.get("status")
        if not isinstance(email, str) or "@" not in email or status == "invalid":
            return None
        sure = status == "valid"
        if not sure and catch_all == "reject":
            return None
        if not sure and catch_all == "verify" and verify is not None:
            check = await ctx.tool(VERIFIERS[verify], {"email": email}, key=f"{name}.verify")
            return email if check.get("status") == "valid" else None
        return email

    checks = (VERIFIERS[verify],) if catch_all == "verify" and verify is not None else ()
    return CodeStep(name, run, tools=(finder.tool, *checks), map_input=finder.input)


def _email_waterfall(
    id: str,
    names: list[str],
    verify: str | None,
    catch_all: CatchAll,
    description: str,
) -> Waterfall:
    """The email waterfall over ``names``; its description says the catch-all policy (and
    which verifier judges)."""
    policy = {
        "accept": "catch-all addresses kept",
        "reject": "catch-all addresses dropped",
        "verify": f"catch-all addresses verified by {verify}",
    }[catch_all]
    finders = [EMAIL_FINDERS[n] for n in names]
    return Waterfall(
        id,
        output="email",
        steps=[_email_step(n, f, verify, catch_all) for n, f in zip(names, finders, strict=True)],
        order="cheapest",
        description=f"{description}: {', '.join(names)}; {policy}; {_reads(finders)}.",
    )


def _reads(finders: Sequence[Finder]) -> str:
    """The fields the finders read, for the description: ``reads first_name, last_name and
    domain, or full_name and domain, or linkedin_url``."""
    needs = dict.fromkeys(need for finder in finders for need in finder.needs)
    spelled = [
        need[0] if len(need) == 1 else f"{', '.join(need[:-1])} and {need[-1]}" for need in needs
    ]
    return f"reads {', or '.join(spelled)}"


def work_email(
    providers: Sequence[str] | None = None,
    *,
    verify: str | None = AUTO,
    catch_all: CatchAll = "verify",
) -> Waterfall:
    """A work email from ``first_name``, ``last_name`` and ``domain`` (or ``full_name``, or
    ``company``), over ``providers`` (default: those of hunter, leadmagic, pdl, dropcontact
    and prospeo whose key is set), cheapest first; ``catch_all`` says what a catch-all or
    unknown address is worth, ``verify`` which verifier judges it (``"auto"``: the first of
    zerobounce, neverbounce, hunter and leadmagic whose key is set)."""
    default = ("hunter", "leadmagic", "pdl", "dropcontact", "prospeo")
    names = _chosen(providers, EMAIL_FINDERS, default, "work_email")
    verify = _checked_policy(catch_all, verify, "work_email")
    return _email_waterfall("work_email", names, verify, catch_all, "Work email")


def linkedin_to_email(
    providers: Sequence[str] | None = None,
    *,
    verify: str | None = AUTO,
    catch_all: CatchAll = "verify",
) -> Waterfall:
    """A work email from a person's ``linkedin_url`` (default: those of prospeo, pdl, apollo,
    dropcontact and fullenrich whose key is set), with the catch-all policy of
    ``work_email``."""
    table = {n: EMAIL_FINDERS[n] for n in LINKEDIN_FINDERS}
    names = _chosen(providers, table, LINKEDIN_FINDERS, "linkedin_to_email")
    verify = _checked_policy(catch_all, verify, "linkedin_to_email")
    return _email_waterfall("linkedin_to_email", names, verify, catch_all, "Email from LinkedIn")


def person_to_phone(providers: Sequence[str] | None = None) -> Waterfall:
    """A person's mobile phone from ``linkedin_url`` or ``email`` (or a name and a company),
    over ``providers`` (default: those of leadmagic, fullenrich and pdl whose key is set),
    cheapest first."""
    names = _chosen(providers, PHONE_FINDERS, tuple(PHONE_FINDERS), "person_to_phone")

    def step(name: str) -> CodeStep:
        finder = PHONE_FINDERS[name]

        async def run(asked: Mapping[str, Any], ctx: Context) -> str | None:
            found = await ctx.tool(finder.tool, dict(asked), key=f"{name}.phone")
            phone = found.get("phone")
            return phone if isinstance(phone, str) and phone.strip() else None

        return CodeStep(name, run, tools=(finder.tool,), map_input=finder.input)

    return Waterfall(
        "person_to_phone",
        output="phone",
        steps=[step(n) for n in names],
        order="cheapest",
        description=(
            f"Mobile phone: {', '.join(names)}; {_reads([PHONE_FINDERS[n] for n in names])}."
        ),
    )
