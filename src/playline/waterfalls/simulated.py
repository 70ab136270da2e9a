"""``work_email``: first name, last name and company domain -> a work email.

Order, cheapest first (credits per email found), then by throughput:

1. ``sim.email.beta`` (45% coverage, 1 credit per hit, bulk endpoint of 50): a miss is free,
   and every row goes out in 1/50th of the requests.
2. ``sim.email.alpha`` (55% coverage, 1 credit per hit, single calls at 20/s): also free on a
   miss. With both charging only on a hit, every email these two find costs exactly one credit
   whichever goes first; beta first means alpha's slow single calls only see beta's misses.
3. ``sim.email.gamma`` (36% coverage, 2 credits per call, hit or miss, 5% transient 503s):
   the dearest, so only the rows both others missed reach it. It sometimes answers with a
   pattern guess (confidence below 0.6); a guess is checked with ``sim.email.verify`` (0.2
   credits) and kept only when the address is ``valid`` — paid validation as part of the step.

Coverage and credits per hit on 2,000 simulated people: ``python -m bench waterfall_coverage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import CodeStep, Context, ToolStep, Waterfall

__all__ = ["WORK_EMAIL"]

_FIELDS = ("first_name", "last_name", "domain")
GUESS_BELOW = 0.6  # gamma's confidence in the addresses it knows is 0.6 or more


def person(input: Mapping[str, Any]) -> dict[str, Any] | None:
    """Just the finder's fields (other keys would change the receipt key); None if one is blank."""
    fields = {name: input.get(name) for name in _FIELDS}
    if not all(isinstance(v, str) and v.strip() for v in fields.values()):
        return None
    return fields


async def gamma_verified(input: Mapping[str, Any], ctx: Context) -> str | None:
    """Gamma's email; a low-confidence guess counts only when the verifier says ``valid``."""
    who = person(input)
    if who is None:
        return None
    found = await ctx.tool("sim.email.gamma", who, key="work_email.gamma")
    email = found.get("email")
    if not isinstance(email, str) or not email.strip():
        return None
    confidence = found.get("confidence")
    if isinstance(confidence, int | float) and confidence >= GUESS_BELOW:
        return email
    check = await ctx.tool("sim.email.verify", {"email": email}, key="work_email.verify")
    return email if check.get("status") == "valid" else None


WORK_EMAIL = Waterfall(
    "work_email",
    output="email",
    steps=[
        ToolStep("beta", "sim.email.beta", map_input=person),
        ToolStep("alpha", "sim.email.alpha", map_input=person),
        CodeStep("gamma", gamma_verified),
    ],
    description="Work email from name and company domain: beta, alpha, then gamma.",
)
