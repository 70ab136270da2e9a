"""A run on PostgreSQL goes on when its store's connections are terminated or the server
restarts: a store call lost with its connection, before it wrote anything, is made again on a
new one (``StoreIO``), so the run completes without a resume and pays each call once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg

import playline as pl
from playline.sim import serve
from services import PostgresServer, run_postgres

PEOPLE = 60
_FAULTS = threading.Lock()  # rows run at once: one fault at a time, none cut by another


def _terminate_store_connections(url: str) -> int:
    with _FAULTS, psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid != pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _restart(server: PostgresServer) -> None:
    with _FAULTS:
        server.restart()


def test_a_run_completes_through_killed_connections_and_a_server_restart() -> None:
    with run_postgres() as server, serve(seed=7, latency_ms=0) as sim:
        sim.faults(tools={"sim.email.beta": {"rate_per_second": 1_000_000, "burst": 1_000_000}})
        url = server.new_database()
        done: list[str] = []
        killed: list[int] = []
        registry = pl.ToolRegistry()

        @registry.tool("fault.at")
        async def fault_at(input: dict[str, Any]) -> dict[str, Any]:
            """Row 10 and 25 terminate the store's connections, row 40 restarts the server:
            the rows in flight beside them find their connections gone."""
            n = input["n"]
            if n in (10, 25):
                killed.append(await asyncio.to_thread(_terminate_store_connections, url))
            elif n == 40:
                await asyncio.to_thread(_restart, server)
            done.append(str(n))
            return {"n": n}

        @pl.play(name="through-faults")
        async def play(ctx: pl.Context, input: Any) -> Any:
            rows = [{**p, "n": n} for n, p in enumerate(input["people"])]
            return await (
                ctx.dataset("people", rows, key="n")
                .with_column("fault", lambda row, ctx: ctx.tool("fault.at", {"n": row["n"]}))
                .with_column(
                    "email",
                    lambda row, ctx: ctx.tool(
                        "sim.email.beta",
                        {k: row[k] for k in ("first_name", "last_name", "domain")},
                    ),
                )
                .run()
            )

        people = [
            {k: p[k] for k in ("first_name", "last_name", "domain")}
            for p in sim.people(limit=PEOPLE)
        ]
        result = pl.run(
            play,
            {"people": people},
            store=url,
            tools=[registry, pl.Gateway(sim.url, token=sim.token)],
        )

        assert result.status == "completed", result.error
        assert result.stats.rows == PEOPLE and not result.stats.cell_errors
        assert len(killed) == 2 and sum(killed) > 0  # connections were there to kill
        assert sorted(done, key=int) == [str(n) for n in range(PEOPLE)]  # each fault once
        ledger = sim.ledger()
        assert ledger["duplicate_charges"] == 0, ledger["inputs"]
        assert all(n == 1 for inputs in ledger["inputs"].values() for n in inputs.values())


def test_a_run_waits_out_an_outage_longer_than_its_pool_timeout() -> None:
    """The server is down for longer than the pool waits for a connection (pool_timeout):
    that wait's end is a connection lost before anything was written, made again until the
    server is back (within ``RECONNECT_WITHIN``), not the end of the run."""
    with run_postgres() as server, serve(seed=7, latency_ms=0) as sim:
        url = server.new_database() + "?pool_timeout=0.5"
        registry = pl.ToolRegistry()

        @registry.tool("outage.at")
        async def outage_at(input: dict[str, Any]) -> dict[str, Any]:
            if input["n"] == 5:
                await asyncio.to_thread(server.restart, down_for=2.0)
            return {"n": input["n"]}

        @pl.play(name="through-an-outage")
        async def play(ctx: pl.Context, input: Any) -> Any:
            rows = [{"n": n} for n in range(20)]
            return await (
                ctx.dataset("rows", rows, key="n")
                .with_column("at", lambda row, ctx: ctx.tool("outage.at", {"n": row["n"]}))
                .with_column(
                    "email",
                    lambda row, ctx: ctx.tool(
                        "sim.email.beta",
                        {"first_name": "a", "last_name": str(row["n"]), "domain": "x.com"},
                    ),
                )
                .run()
            )

        result = pl.run(play, store=url, tools=[registry, pl.Gateway(sim.url, token=sim.token)])

        assert result.status == "completed", result.error
        assert result.stats.rows == 20 and not result.stats.errors
        assert sim.ledger()["duplicate_charges"] == 0
