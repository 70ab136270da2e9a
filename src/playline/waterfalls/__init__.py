"""Waterfalls that ship with Playline.

- ``work_email`` (by name: ``ctx.waterfall("work_email", input)``): a person's work email
  from ``first_name``, ``last_name`` and ``domain`` over the simulator's three email finders
  (see ``simulated.py`` for the order and why).
- Over the real providers (``providers.py``), made for the providers you have:
  ``work_email(providers=[...], verify=..., catch_all=...)``, ``linkedin_to_email(...)`` and
  ``person_to_phone(...)``, each a ``pl.Waterfall`` to pass to ``ctx.waterfall``.
"""

from .providers import linkedin_to_email, person_to_phone, work_email
from .simulated import WORK_EMAIL

__all__ = ["WORK_EMAIL", "linkedin_to_email", "person_to_phone", "work_email"]
