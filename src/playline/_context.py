"""The ``ctx`` a play sees: a thin facade over the engine's attempt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ._dataset import DatasetBuilder, revive
from ._engine.attempt import Attempt
from ._engine.boundaries import FetchResponse
from ._engine.rows import KeySpec, OnBadKey, RowKey
from ._engine.scope import current_row
from ._llm import Ask, ask, build
from ._play import Play, PlayFn, get_play
from ._secrets import Secret, Secrets, check_stored_name
from ._waterfall import Waterfall, WaterfallStats, resolve
from .errors import PlayDefinitionError
from .tools import ToolResult

if TYPE_CHECKING:
    from pathlib import Path

    from ._csv import CsvRows

__all__ = ["Context", "Tools"]


class Tools:
    """``ctx.tools``: ``execute(id=..., tool=..., input=...)`` is ``ctx.tool`` by keywords."""

    def __init__(self, attempt: Attempt) -> None:
        self._rt = attempt

    def execute(
        self,
        *,
        tool: str,
        input: Mapping[str, Any],
        id: str | None = None,
        force: bool = False,
        stale_after: int | None = None,
        description: str | None = None,
    ) -> Awaitable[ToolResult]:
        return self._rt.call_tool(
            tool, input, label=id or description, force=force, stale_after=stale_after
        )


class Context:
    """What a play and its resolvers use: datasets, tools, waterfalls, durable steps, logs."""

    def __init__(self, attempt: Attempt) -> None:
        self._attempt = attempt
        self.tools = Tools(attempt)
        self.secrets = Secrets()

    @property
    def _rt(self) -> Attempt:
        """The attempt this context belongs to, while it runs: a ``ctx`` kept past its run's
        end would hang on a closed store, or write to a run that has ended."""
        attempt = self._attempt
        if attempt.ended:
            raise PlayDefinitionError(
                f"This ctx belongs to run {attempt.run_id}, whose attempt has ended: use the "
                "ctx the play is given while it runs, not one kept from an earlier run."
            )
        return attempt

    @property
    def run_id(self) -> str:
        return self._rt.run_id

    @property
    def play_name(self) -> str:
        return self._rt.play_name

    def dataset(
        self,
        name: str,
        rows: Iterable[Any],
        *,
        key: KeySpec = None,
        mode: Literal["all", "net_new"] = "all",
        on_bad_key: OnBadKey = "error",
    ) -> DatasetBuilder:
        """A dataset over ``rows`` (dicts, other items, or a DataFrame); add columns, then run.

        ``key`` names each row: a column, a list of columns, or ``fn(row)`` /
        ``fn(row, index)``; by default a digest of the row. Keys are compared as given (case
        and spaces count): ``Maya`` and ``MAYA`` are two rows, whose tool calls share receipts
        where the tool says how its inputs compare (``normalize=``).

        ``on_bad_key`` says what becomes of a row with no key (its key column blank, None,
        NaN or missing, or ``key=`` returning nothing): ``"error"`` (the default) fails the run
        with one error naming every such row (its number from 1, a CSV file's line, and why),
        and no row runs when they are among the first ``row_window`` (1,000) rows; ``"skip"``
        sets them aside, each in the run's log and counted in ``stats.rows_set_aside``
        (``playline show`` lists them), and the other rows run.

        ``mode="net_new"`` runs only the rows whose key no earlier run of this play completed
        in a dataset of this name (the others are left out of this run's rows and counted in
        ``stats.rows_seen``); ``"all"`` (the default) runs every row."""
        if not isinstance(name, str) or not name.strip():
            raise PlayDefinitionError(
                "ctx.dataset needs a non-empty name, e.g. ctx.dataset('leads', rows)."
            )
        check_stored_name(name, "A dataset name")
        if current_row.get() is not None:
            raise PlayDefinitionError(
                f"Dataset {name!r} was started inside a column. Datasets cannot be nested: "
                "flatten the work into columns of one dataset, or run it before."
            )
        if name in self._rt.datasets:
            self._rt.claim_dataset_name(name)  # raises with the explanation
        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
            raise PlayDefinitionError(
                f"Dataset {name!r}: rows must be a list or iterable of rows, not "
                f"{type(rows).__name__}. To read a file, use ctx.csv(path)."
            )
        if mode not in ("all", "net_new"):
            raise PlayDefinitionError(
                f"Dataset {name!r}: mode={mode!r}; use 'all' (every row, the default) or "
                "'net_new' (only rows whose key no earlier run of this play completed)."
            )
        if on_bad_key not in ("error", "skip"):
            raise PlayDefinitionError(
                f"Dataset {name!r}: on_bad_key={on_bad_key!r}; use 'error' (a row with no key "
                "stops the run, with an error naming every such row: the default) or 'skip' "
                "(such rows are set aside and reported, and the other rows run)."
            )
        return DatasetBuilder(self._rt, name, rows, RowKey(key, on_bad_key), mode=mode)

    def tool(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        key: str | None = None,
        force: bool = False,
        stale_after: int | None = None,
        description: str | None = None,
    ) -> Awaitable[ToolResult]:
        """Call a tool; await the result. In a column the call is batched with other rows'."""
        return self._rt.call_tool(
            tool, input, label=key or description, force=force, stale_after=stale_after
        )

    def llm(
        self,
        prompt: str | Sequence[Mapping[str, str]],
        *,
        model: str,
        schema: Any = None,
        temperature: float = 0,
        max_tokens: int | None = None,
        system: str | None = None,
        key: str | None = None,
        batch: bool = False,
        force: bool = False,
        provider: str | None = None,
    ) -> Awaitable[ToolResult]:
        """Ask a model; await a ``ToolResult`` whose ``data`` is the answer: its text, or
        with ``schema`` the object, validated (an instance of a pydantic model class, or a
        dict for a JSON Schema dict). See the guide, AI columns.

        ``prompt`` is text (one user message) or the conversation (``[{"role": "user" |
        "assistant", "content": text}, ...]``); ``system`` the system prompt. The tool is the
        run's ``openai.chat`` (``anthropic.messages`` for ``claude-*`` models;
        ``provider="ollama"`` for another prefix), or its ``.batch`` with ``batch=True``.

        The request (model, messages, system, schema, ``temperature``, ``max_tokens``) is
        the receipt key: asked again, it is answered by its receipt at no cost, also with
        ``temperature > 0``; ``force=True`` asks again. An answer that does not match the
        schema is asked again with the error (at most twice, each attempt a call of its
        own); then the cell fails with ``pl.LlmAnswerError``, as it does at once for a
        refusal or an answer ``max_tokens`` cut.

        ``cost`` is what this ``ctx.llm`` was charged now, its re-asks included (the tool's
        unit: dollars for the LLM providers; 0 when receipts answered); ``usage`` the tokens
        of its answers (``input_tokens``, ``output_tokens``, and ``attempts``); ``raw`` the
        last answer's text. ``key=`` names the call, as ``ctx.tool``'s does.
        """
        request = build(
            prompt,
            tools=self._rt.services.tools,
            model=model,
            schema=schema,
            temperature=temperature,
            max_tokens=max_tokens,
            system=system,
            key=key,
            batch=batch,
            force=force,
            provider=provider,
        )
        return self._llm(request)

    async def _llm(self, request: Ask) -> ToolResult:
        made: list[ToolResult] = []

        async def call(tool: str, input: Mapping[str, Any], **options: Any) -> ToolResult:
            result = await self._rt.call_tool(tool, input, **options)
            made.append(result)
            return result

        one = await ask(call, request)
        row = current_row.get()
        if row is not None:  # the cell counts the attempts as this one result (its cost)
            attempts = {id(result) for result in made}
            row.results[:] = [r for r in row.results if id(r) not in attempts]
            row.results.append(one)
        return one

    def waterfall(self, waterfall: Waterfall | str, input: Mapping[str, Any]) -> Awaitable[Any]:
        """Run a waterfall (a ``pl.Waterfall`` or a registered name) for ``input``.

        Returns the value (a list when ``min_results > 1``) or None. In a column, the rows
        waiting on the same step send their calls as one batched pass; which step won, and
        each step's status and cost, go into the cell's metadata (``"waterfall"``; a column
        that runs several keeps each one's in ``"waterfalls"``, in the order they ran).
        """
        spec = resolve(waterfall)
        if not isinstance(input, Mapping):
            raise PlayDefinitionError(
                f"ctx.waterfall({spec.id!r}, ...): the input must be a dict, not "
                f"{type(input).__name__}."
            )
        return self._rt.waterfalls.run(spec, input)

    def waterfall_stats(self) -> dict[str, WaterfallStats]:
        """Per waterfall of this run so far (by id): rows, rows satisfied, credits, and per
        step attempts, hits, not found, failed, skipped, credits and credits per hit.

        Read it after the datasets ran, e.g. ``return ctx.waterfall_stats()["work_email"]
        .to_dict()`` or log it; each cell also keeps its own provenance in the store. Each row
        counts once: on a resume, the rows this attempt ran and those it reused as stored.
        """
        return self._rt.waterfalls.stats()

    async def step(self, key: str, fn: Callable[[], Any], *, stale_after: int | None = None) -> Any:
        """Run ``fn`` once; its JSON result is checkpointed and replayed on resume."""
        return await self._rt.boundaries.step(key, fn, stale_after=stale_after)

    async def sleep(self, seconds: float) -> None:
        """Wait durably: a long sleep suspends the run, which resumes when it is due."""
        await self._rt.boundaries.sleep(seconds)

    async def fetch(
        self,
        key: str,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str | Secret] | None = None,
        json: Any = None,
        data: Any = None,
    ) -> FetchResponse:
        """An HTTP request whose response is stored and replayed (not inside a column). A
        header may hold a secret: the server gets its value, the store never does."""
        return await self._rt.boundaries.fetch(
            key, url, method=method, headers=headers, json=json, data=data
        )

    async def wait_for_event(self, key: str, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """The payload of the event ``key`` (``pl.send_event``); the run (or, in a column,
        the row) waits for it. Raises ``pl.EventTimeout`` after ``timeout`` seconds."""
        return await self._rt.boundaries.wait_for_event(key, timeout=timeout)

    async def run_play(self, key: str, play: Play | PlayFn | str, input: Any = None) -> Any:
        """Run a child play (a function or a registered name) and return its result."""
        output = await self._rt.run_play(key, get_play(play), input)
        return revive(self._rt.store, output)

    def log(self, message: str) -> None:
        """Add a line to the run's log."""
        row = current_row.get()
        self._rt.events.log(str(message), **({"row_key": row.row_key} if row else {}))

    def csv(
        self,
        path: str | Path,
        *,
        columns: Iterable[str] | None = None,
        rename: Mapping[str, str] | None = None,
        required: Iterable[str] | None = None,
        on_bad_line: Literal["error", "skip"] = "error",
        field_limit: int | None = None,
    ) -> CsvRows:
        """The rows of a CSV file as dicts of strings, read as a dataset streams them.

        The header is checked at once: empty or duplicate names, and ``required`` or
        ``columns`` the file lacks, raise ``PlayDefinitionError``. ``columns`` keeps only
        those columns; ``rename`` maps file headers to the names the play uses. A BOM, ``;``
        delimiters, quoted newlines and blank lines are handled (see ``_csv.py``). A line
        with more fields than the header stops the run, naming it; with
        ``on_bad_line="skip"`` it is skipped and its number written to the run's log.

        A relative path is read from the folder the run was started in, also when it is
        resumed from elsewhere. ``field_limit`` is the most characters one field may hold
        (default: the run's ``cell_limit``, 5 MB, as a longer value could not be stored in
        its cell); a longer one raises ``PlayDefinitionError`` naming the file and line.
        """
        from ._csv import read_csv

        rows = read_csv(
            path,
            columns=columns,
            rename=rename,
            required=required,
            on_bad_line=on_bad_line,
            base=self._rt.workdir,
            log=self._rt.events.log,
            field_limit=self._rt.options.cell_limit if field_limit is None else field_limit,
        )
        self._same_input(rows)
        return rows

    def _same_input(self, rows: CsvRows) -> None:
        """A resume reads the file its run read first: a file changed since would mix its
        new rows with those stored before (and leave rows stored by key as they were)."""
        from ._csv import INPUT_KIND, file_digest

        where, digest = str(rows.path), file_digest(rows.path)
        for event in self._rt.store.read_events(self._rt.run_id, kinds=[INPUT_KIND]):
            read = event.data or {}
            if read.get("path") == where and read.get("sha256") != digest:
                raise PlayDefinitionError(
                    f"CSV file {rows.shown!r} changed since this run first read it. A resume "
                    "reads the rows it read then: restore the file to resume the run, or start "
                    "a new run on it (the rows enriched before are answered from receipts, "
                    "free)."
                )
        self._rt.events.emit(INPUT_KIND, data={"path": where, "sha256": digest})
