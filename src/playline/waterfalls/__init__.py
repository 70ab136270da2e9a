"""Waterfalls that ship with Playline, found by name by ``ctx.waterfall(name, input)``.

- ``work_email``: a person's work email from ``first_name``, ``last_name`` and ``domain``,
  over the simulator's three email finders (see ``work_email.py`` for the order and why).
"""

from .work_email import WORK_EMAIL

__all__ = ["WORK_EMAIL"]
