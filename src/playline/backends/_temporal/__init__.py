"""The Temporal backend's parts; ``playline.backends.temporal`` is their facade.

- ``_messages``: the dataclasses that cross into Temporal's history (ids, counts, times);
- ``_workflow``: the deterministic loop of one run (no user code, no I/O);
- ``_activity``: one attempt (``run_attempt``), its clock, heartbeats and drain;
- ``_worker``: a worker process's loop and its cooperative shutdown;
- ``_submit``: starting a run as a workflow and following it through the store;
- ``_doorbell``: signalling the workflows of runs that wait for an event just sent;
- ``_connect``: addresses, clients and the one-line errors about them.
"""
