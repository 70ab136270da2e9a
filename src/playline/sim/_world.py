"""The simulated world: companies and the people who work there, derived from a seed.

Entity ``i`` is a pure function of ``(seed, i)`` (a BLAKE2 digest sliced into choices), so
two simulators with the same seed agree on every company, person, email and phone, and the
whole world builds in a fraction of a second. Which provider knows which entity is decided
elsewhere (``_providers``) with :func:`unit`, again a pure function of the seed.
"""

from __future__ import annotations

import functools
import hashlib
from typing import NamedTuple

from ._inputs import normalize_text

N_COMPANIES = 20_000
N_PEOPLE = 50_000

_SYLLABLES = (
    "ac", "al", "an", "ar", "ax", "bel", "bri", "cal", "cor", "dex", "dyn", "el", "en", "fin",
    "flo", "gal", "gen", "hel", "hex", "in", "ion", "jet", "kai", "kin", "lum", "lux", "mar",
    "me", "mod", "nex", "no", "nov", "ob", "om", "or", "pax", "pi", "pro", "qua", "ra", "rev",
    "ri", "sol", "sta", "sy", "tal", "ter", "tri", "tro", "ul", "um", "va", "vel", "ver", "vi",
    "wex", "xo", "yo", "zen", "zo",
)  # fmt: skip
_SUFFIXES = (
    "", "", "", "", "labs", "systems", "data", "cloud", "health", "works", "soft", "bio",
    "logic", "ly", "hq", "ai", "pay", "grid", "stack", "ware",
)  # fmt: skip
_INDUSTRIES = (
    "Software", "Financial Services", "Healthcare", "Manufacturing", "Retail", "Logistics",
    "Education", "Media", "Energy", "Telecommunications", "Biotechnology", "Real Estate",
    "Consulting", "Security", "Marketing",
)  # fmt: skip
_SIZES = ("1-10", "11-50", "51-200", "201-500", "501-1000", "1001-5000", "5001+")
_SIZE_WEIGHTS = (18, 30, 25, 12, 7, 5, 3)
# country, weight, calling code, local TLD (None: generic TLDs only)
_COUNTRIES = (
    ("US", 45, "1", None),
    ("GB", 12, "44", ".co.uk"),
    ("DE", 10, "49", ".de"),
    ("FR", 8, "33", ".fr"),
    ("CA", 6, "1", ".ca"),
    ("NL", 5, "31", ".nl"),
    ("AU", 5, "61", ".com.au"),
    ("IN", 5, "91", ".in"),
    ("SE", 4, "46", ".se"),
)
_GENERIC_TLDS = (".com", ".com", ".com", ".com", ".io", ".co", ".ai", ".net")
# Email patterns, weighted: real companies standardise on one.
PATTERNS = ("first.last", "flast", "first", "firstlast")
_PATTERN_WEIGHTS = (50, 25, 15, 10)
_CATCH_ALL_SHARE = 0.12

_FIRST = (
    "Aaron", "Abigail", "Adam", "Adrian", "Aisha", "Alan", "Alex", "Alice", "Amara", "Amelia",
    "Amir", "Ana", "Andrea", "Andrew", "Anna", "Arjun", "Ava", "Ben", "Bianca", "Brian",
    "Carla", "Carlos", "Caroline", "Chen", "Chloe", "Chris", "Claire", "Daniel", "David",
    "Diana", "Diego", "Dmitri", "Elena", "Eli", "Elif", "Emily", "Emma", "Eric", "Ethan",
    "Eva", "Fatima", "Felix", "Fiona", "Gabriel", "Grace", "Hannah", "Hana", "Hugo", "Ian",
    "Ines", "Isaac", "Isabel", "Ivan", "Jack", "James", "Jana", "Jasper", "Javier", "Jin",
    "Joanna", "John", "Jonas", "Julia", "Karen", "Karim", "Kate", "Kenji", "Laura", "Leah",
    "Leo", "Liam", "Lina", "Lucas", "Lucy", "Luis", "Maya", "Marco", "Maria", "Mark",
    "Marta", "Mateo", "Max", "Mei", "Mia", "Michael", "Mohammed", "Nadia", "Nathan", "Nina",
    "Noah", "Nora", "Oliver", "Olivia", "Omar", "Oscar", "Paul", "Paula", "Pedro", "Priya",
    "Rachel", "Rahul", "Rosa", "Ryan", "Sam", "Sara", "Sebastian", "Sofia", "Sophie",
    "Stefan", "Tara", "Thomas", "Tom", "Valentina", "Victor", "Yara", "Yuki", "Zoe",
)  # fmt: skip
_LAST = (
    "Abbott", "Adeyemi", "Ahmed", "Alvarez", "Andersen", "Bailey", "Baker", "Banerjee",
    "Becker", "Bianchi", "Brooks", "Brown", "Carter", "Castro", "Chen", "Clarke", "Cohen",
    "Costa", "Cruz", "Dubois", "Dunn", "Eriksson", "Evans", "Fischer", "Fernandez", "Fox",
    "Garcia", "Gonzalez", "Gray", "Green", "Gupta", "Hall", "Hansen", "Harris", "Hayes",
    "Hoffmann", "Hughes", "Ivanova", "Jansen", "Johnson", "Jones", "Kaur", "Kelly", "Khan",
    "Kim", "Klein", "Kowalski", "Kumar", "Larsen", "Laurent", "Lee", "Lewis", "Lopez",
    "Martin", "Meyer", "Miller", "Moreau", "Morris", "Muller", "Murphy", "Nakamura", "Nguyen",
    "Novak", "O'Brien", "Okafor", "Olsen", "Park", "Patel", "Perez", "Petrov", "Reed",
    "Reyes", "Ricci", "Roberts", "Rossi", "Russo", "Santos", "Sato", "Schmidt", "Schneider",
    "Shah", "Silva", "Singh", "Smith", "Smith-Jones", "Suzuki", "Tanaka", "Taylor", "Thomas",
    "Torres", "Turner", "Van Dijk", "Wagner", "Walker", "Wang", "Ward", "Weber", "White",
    "Williams", "Wilson", "Wong", "Wright", "Yilmaz", "Young", "Zhang", "Zimmermann",
)  # fmt: skip
_TITLES = (
    "CEO", "CTO", "CFO", "COO", "VP Sales", "VP Marketing", "VP Engineering",
    "Head of Growth", "Head of Data", "Head of People", "Sales Director",
    "Marketing Manager", "Engineering Manager", "Product Manager", "Account Executive",
    "Software Engineer", "Data Analyst", "Operations Manager", "Founder", "RevOps Lead",
)  # fmt: skip


class Company(NamedTuple):
    """A company of the simulated world (a NamedTuple: the world build creates thousands)."""

    ordinal: int
    domain: str
    name: str
    industry: str
    size: str
    country: str
    pattern: str
    catch_all: bool

    def public(self) -> dict[str, object]:
        return {
            "domain": self.domain,
            "name": self.name,
            "industry": self.industry,
            "size": self.size,
            "country": self.country,
            "email_pattern": self.pattern,
            "catch_all": self.catch_all,
        }


class Person(NamedTuple):
    """A person of the simulated world; ``email`` and ``phone`` are the ground truth."""

    ordinal: int
    first_name: str
    last_name: str
    title: str
    domain: str
    email: str
    phone: str

    def public(self) -> dict[str, object]:
        return {
            "first_name": self.first_name,
            "last_name": self.last_name,
            "title": self.title,
            "domain": self.domain,
            "email": self.email,
            "phone": self.phone,
        }


_TWO_64 = float(2**64)


def unit(*parts: object) -> float:
    """A uniform float in [0, 1) that is a pure function of ``parts``."""
    key = "|".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / _TWO_64


def _digest(*parts: object) -> bytes:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=24).digest()


def _weighted(byte_pair: bytes, weights: tuple[int, ...]) -> int:
    point = int.from_bytes(byte_pair, "big") % sum(weights)
    for i, weight in enumerate(weights):
        if point < weight:
            return i
        point -= weight
    raise AssertionError("unreachable")


def _alnum(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalnum())


def _local_part(pattern: str, first: str, last: str) -> str:
    if pattern == "first.last":
        return f"{first}.{last}"
    if pattern == "flast":
        return f"{first[0]}{last}"
    if pattern == "first":
        return first
    return f"{first}{last}"


def email_for(pattern: str, first: str, last: str, domain: str) -> str:
    """The address ``pattern`` gives ``first last`` at ``domain``."""
    return f"{_local_part(pattern, _alnum(first), _alnum(last))}@{domain}"


# (display, normalised, email-safe) per name: precomputed because the world build is hot.
_FIRST_FORMS = tuple((n, normalize_text(n), _alnum(n)) for n in _FIRST)
_LAST_FORMS = tuple((n, normalize_text(n), _alnum(n)) for n in _LAST)
_CALLING_CODES = {c[0]: c[2] for c in _COUNTRIES}
_COUNTRY_WEIGHTS = tuple(c[1] for c in _COUNTRIES)


def _company(seed: int, i: int, attempt: int) -> Company:
    d = _digest(seed, "company", i, attempt)
    n_syllables = 2 + d[0] % 2
    stem = "".join(_SYLLABLES[d[1 + k] % len(_SYLLABLES)] for k in range(n_syllables))
    suffix = _SUFFIXES[d[4] % len(_SUFFIXES)]
    country, _, _, local_tld = _COUNTRIES[_weighted(d[5:7], _COUNTRY_WEIGHTS)]
    tld = local_tld if local_tld and d[7] < 128 else _GENERIC_TLDS[d[8] % len(_GENERIC_TLDS)]
    if len(suffix) > 2:
        name = f"{stem.capitalize()} {suffix.capitalize()}"
    else:
        name = stem.capitalize() + (suffix if suffix == "ly" else suffix.upper())
    return Company(
        ordinal=i,
        domain=f"{stem}{suffix}{tld}",
        name=name,
        industry=_INDUSTRIES[d[9] % len(_INDUSTRIES)],
        size=_SIZES[_weighted(d[10:12], _SIZE_WEIGHTS)],
        country=country,
        pattern=PATTERNS[_weighted(d[12:14], _PATTERN_WEIGHTS)],
        catch_all=int.from_bytes(d[14:16], "big") / 65536 < _CATCH_ALL_SHARE,
    )


class World:
    """Every company and person of one seed, with the indexes providers look up by content."""

    def __init__(self, seed: int, *, companies: int = N_COMPANIES, people: int = N_PEOPLE):
        self.seed = seed
        self.companies: list[Company] = []
        self.company_by_domain: dict[str, Company] = {}
        for i in range(companies):
            attempt = 0
            company = _company(seed, i, attempt)
            while company.domain in self.company_by_domain:
                attempt += 1
                company = _company(seed, i, attempt)
            self.companies.append(company)
            self.company_by_domain[company.domain] = company

        self.people: list[Person] = []
        self.person_by_key: dict[tuple[str, str, str], Person] = {}
        self.person_by_email: dict[str, Person] = {}
        self._add_people(people)

    def _add_people(self, people: int) -> None:
        # The hot loop of the build: locals and positional tuples keep it near 4 us a person.
        seed, companies, n_companies = self.seed, self.companies, len(self.companies)
        by_key, by_email, out = self.person_by_key, self.person_by_email, self.people
        firsts, lasts, titles, codes = _FIRST_FORMS, _LAST_FORMS, _TITLES, _CALLING_CODES
        n_first, n_last, n_titles, blake2b = len(firsts), len(lasts), len(titles), hashlib.blake2b
        for i in range(people):
            attempt = 0
            while True:
                d = blake2b(f"{seed}|person|{i}|{attempt}".encode(), digest_size=24).digest()
                first, first_norm, f = firsts[(d[0] << 8 | d[1]) % n_first]
                last, last_norm, la = lasts[(d[2] << 8 | d[3]) % n_last]
                company = companies[int.from_bytes(d[4:8], "big") % n_companies]
                domain, pattern = company.domain, company.pattern
                key = (first_norm, last_norm, domain)
                if pattern == "first.last":
                    email = f"{f}.{la}@{domain}"
                elif pattern == "flast":
                    email = f"{f[0]}{la}@{domain}"
                elif pattern == "first":
                    email = f"{f}@{domain}"
                else:
                    email = f"{f}{la}@{domain}"
                if key not in by_key and email not in by_email:
                    break
                attempt += 1
            code = codes[company.country]
            number = int.from_bytes(d[9:17], "big")
            if code == "1":
                phone = f"+1{200 + number % 800}{number // 800 % 10_000_000:07d}"
            else:
                phone = f"+{code}{number % 1_000_000_000:09d}"
            person = Person(i, first, last, titles[d[8] % n_titles], domain, email, phone)
            out.append(person)
            by_key[key] = person
            by_email[email] = person

    def person(self, first_name: str, last_name: str, domain: str) -> Person | None:
        """The person with these *normalised* fields, if the world has one."""
        return self.person_by_key.get((first_name, last_name, domain))

    def company(self, domain: str) -> Company | None:
        """The company at this *normalised* domain, if the world has one."""
        return self.company_by_domain.get(domain)


@functools.lru_cache(maxsize=4)
def world_for(seed: int) -> World:
    """The world of ``seed``, built once per process (it is read-only once built)."""
    return World(seed)
