"""Properties of input normalisation: the ledger key must not depend on spelling."""

from __future__ import annotations

import string

import orjson
from hypothesis import given
from hypothesis import strategies as st

from playline.sim._inputs import canonical_json, normalize_domain, normalize_text

# ASCII only: Unicode case is not a round trip ("ı".upper().casefold() == "i").
words = st.lists(
    st.text(st.sampled_from(string.ascii_letters + string.digits), min_size=1), min_size=1
)
spaces = st.text(" \t\n", min_size=1)


@given(words, spaces, st.booleans())
def test_normalize_text_ignores_case_and_whitespace(
    parts: list[str], gap: str, upper: bool
) -> None:
    plain = " ".join(parts)
    messy = gap + gap.join(parts) + gap
    messy = messy.upper() if upper else messy
    assert normalize_text(messy) == normalize_text(plain)
    assert normalize_text(normalize_text(plain)) == normalize_text(plain)


# "www.com" is a domain whose first label reads as URL dressing: not one to test with
@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}\.(com|io|co\.uk)", fullmatch=True).filter(
        lambda d: not d.startswith("www.")
    )
)
def test_normalize_domain_strips_url_dressing(domain: str) -> None:
    for dressed in (domain, domain.upper(), f"https://www.{domain}/about", f" http://{domain}/ "):
        assert normalize_domain(dressed) == domain


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.text()))
def test_canonical_json_is_order_free_and_round_trips(fields: dict[str, str]) -> None:
    reversed_fields = dict(reversed(list(fields.items())))
    assert canonical_json(fields) == canonical_json(reversed_fields)
    assert orjson.loads(canonical_json(fields)) == fields
