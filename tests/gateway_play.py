"""A play whose three rows call the simulator's gateway only on a resume: its column fails
until the file "go" exists beside the play, before its call, so that a first run calls
nothing and its resume calls the gateway for every row (tests of what a resume is given)."""

RESUMED_THROUGH_GATEWAY = """
import pathlib
import playline as pl

GO = pathlib.Path(__file__).with_name("go")
DOMAINS = ["acme.io", "globex.com", "initech.com"]

async def company(row, ctx):
    if not GO.exists():
        raise RuntimeError("not yet: a resume finishes this row")
    return await ctx.tool("sim.company.enrich", {"domain": row["domain"]})

@pl.play
async def companies(ctx, input):
    rows = [{"domain": d} for d in DOMAINS]
    return await ctx.dataset("c", rows, key="domain").with_column("co", company).run()
"""
