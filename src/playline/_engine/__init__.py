"""The machinery of an attempt (as anyio keeps ``_core/``): nothing here imports the facade.

``attempt`` wires the parts together and holds ``run_attempt()``, the seam where an attempt
runs; ``datasets``/``dispatch``/``calls``/``commits`` move rows and tool calls; ``boundaries``,
``children`` and ``waterfalls`` are the durable steps, child plays and waterfalls;
``governance``, ``ledger``, ``events``, ``drain`` and ``supervise`` count, charge, report, stop
and keep leases. Modules import what they use directly; this package re-exports nothing.
"""
