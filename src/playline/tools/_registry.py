"""Local tools (``@pl.tool``) and the registry that resolves tool ids to specs."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from .._arity import check_args
from .._secrets import reveal
from ..errors import PlayDefinitionError, ToolError
from ._credentials import account, check_secret_names, declared_by, require
from ._normalize import Normalize
from ._spec import Batch, Cost, Rate, ToolSpec, normalise_lists, normalise_outputs

__all__ = ["LocalTransport", "ToolRegistry", "ToolSource", "default_registry", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")


@runtime_checkable
class ToolSource(Protocol):
    """Anything that can list tool specs: a registry, a gateway."""

    def specs(self) -> Iterable[ToolSpec]: ...


class LocalTransport:
    """Calls a Python function in-process: ``fn(input)`` or, for batch tools, ``fn(inputs)``.

    ``secrets`` are the keys the function reads with ``pl.secret`` (``_credentials.py``):
    each must be set before it is called, as an ``HttpTool``'s key must."""

    def __init__(
        self, fn: Callable[..., Any], *, takes_list: bool, secrets: tuple[str, ...] = ()
    ) -> None:
        self.fn = fn
        self.takes_list = takes_list
        self.secrets = secrets
        self._is_async = inspect.iscoroutinefunction(fn)
        self.inline = not self._is_async

    async def _invoke(self, spec: ToolSpec, arg: Any) -> Any:
        if self.secrets:  # pl.secret reads them during the call
            with declared_by(spec.id, self.secrets):
                return await self._result(arg)
        return await self._result(arg)

    async def _result(self, arg: Any) -> Any:
        result = self.fn(arg)
        if self._is_async or inspect.isawaitable(result):
            result = await result
        return result

    async def call(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> list[Any]:
        if self.secrets:
            require(self.secrets)  # a key not set stops the run, saying which to export
        try:  # the tool gets its inputs' secrets revealed: they are its to use
            if not self.takes_list:
                return [await self._invoke(spec, reveal(dict(inputs[0])))]
            results = await self._invoke(spec, [reveal(dict(i)) for i in inputs])
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(spec.id, f"{type(exc).__name__}: {exc}", code="exception") from exc
        if results is None:
            return [None] * len(inputs)
        if not isinstance(results, list) or len(results) != len(inputs):
            got = f"a list of {len(results)}" if isinstance(results, list) else type(results)
            raise ToolError(
                spec.id,
                f"batch tool returned {got} for {len(inputs)} inputs; return a list aligned "
                "with the inputs (None for an input with no result)",
                code="misaligned_batch",
            )
        return results


class ToolRegistry:
    """A set of tools by id. ``@registry.tool(...)`` registers a function in it."""

    def __init__(self, tools: Iterable[Callable[..., Any] | ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Callable[..., Any] | ToolSpec) -> None:
        spec = item if isinstance(item, ToolSpec) else getattr(item, "__playline_tool__", None)
        if not isinstance(spec, ToolSpec):
            raise PlayDefinitionError(
                f'{item!r} is not a tool; decorate it with @pl.tool("vendor.name") first.'
            )
        self._specs[spec.id] = spec

    def tool(
        self,
        id: str = "",
        *,
        rate: Rate | None = None,
        cost: Cost | float | None = None,
        batch: Batch | None = None,
        outputs: Mapping[str, str | Sequence[str]] | None = None,
        lists: Mapping[str, str] | None = None,
        version: str = "1",
        retry_safe: bool = False,
        in_doubt: Literal["resend", "fail"] | None = None,
        description: str | None = None,
        normalize: Mapping[str, str] | Callable[..., Any] | None = None,
        secrets: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a tool (see ``pl.tool``).

        ``in_doubt`` says what happens to a call that was running when its process died:
        ``"resend"`` runs it again (the function receives nothing to tell a repeat), ``"fail"``
        fails it until the user retries it (``--retry-in-doubt``). The default is ``"fail"``
        for a tool with a price (credits, or a worst case in dollars: it may have paid its
        provider, and running it again could pay twice) and ``"resend"`` for a free one.

        ``normalize`` says how inputs compare (``{"email": "email", "domain": "domain",
        "first_name": "name"}`` or a function): variants of one input share a receipt, and
        the function gets the normalised input.

        ``secrets`` names the environment variables holding the keys the function reads with
        ``pl.secret(name)`` during its call, outside its input: receipts are kept by the
        account those names make, never by the keys' values, so rotating a key buys nothing
        again (``_credentials.py``).
        """
        if callable(id) or id == "":
            # @pl.tool bare (the function came as the id) or pl.tool(): no id to call it by
            named = f" above def {id.__name__}" if callable(id) and hasattr(id, "__name__") else ""
            raise PlayDefinitionError(
                "A tool needs its id, what plays call it by: write "
                f'@pl.tool("provider.operation", ...){named}, e.g. @pl.tool("acme.company", '
                "cost=pl.Cost(1)), with the parentheses."
            )
        if in_doubt is not None and in_doubt not in ("resend", "fail"):
            raise PlayDefinitionError(
                f'@pl.tool({id!r}, in_doubt={in_doubt!r}): use "resend" or "fail".'
            )
        if not isinstance(id, str) or not _ID.match(id):
            raise PlayDefinitionError(
                f"Tool id {id!r} is not valid; use letters, digits and . _ - : /, "
                'e.g. "acme.company".'
            )
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            cost = Cost(cost)
        for name, value, kind, example in (
            ("rate", rate, Rate, "pl.Rate(per_second=5)"),
            ("cost", cost, Cost, "pl.Cost(1) or a number of credits"),
            ("batch", batch, Batch, "pl.Batch(max_size=100)"),
        ):
            if value is not None and not isinstance(value, kind):
                raise PlayDefinitionError(
                    f"@pl.tool({id!r}, {name}={value!r}): give {example}, or leave it out."
                )
        outputs_of, lists_of = normalise_outputs(outputs), normalise_lists(lists)
        normalizer = None if normalize is None else Normalize(f"@pl.tool({id!r})", normalize)
        keys = check_secret_names(id, secrets)
        charged = cost if isinstance(cost, Cost) else Cost()
        if in_doubt is None:
            in_doubt = "fail" if charged.priced else "resend"

        def decorate(fn: F) -> F:
            takes_list = batch is not None and batch.via is None
            check_args(fn, 1, f"@pl.tool({id!r})", "(inputs)" if takes_list else "(input)")
            transport = LocalTransport(fn, takes_list=takes_list, secrets=keys)
            limits = rate or Rate()
            if limits.concurrency is None:
                rerun = transport.inline and in_doubt == "resend" and not charged.priced
                limits = Rate(
                    per_second=limits.per_second,
                    burst=limits.burst,
                    concurrency=LOCAL_RERUN_CONCURRENCY if rerun else LOCAL_CONCURRENCY,
                )
            spec = ToolSpec(
                id=id,
                transport=transport,
                rate=limits,
                cost=charged,
                batch=batch,
                outputs=outputs_of,
                lists=lists_of,
                version=str(version),
                retry_safe=retry_safe,
                in_doubt=in_doubt,
                description=description or (inspect.getdoc(fn) or "").split("\n")[0],
                normalize=normalizer,
                auth_scope=account(keys) if keys else "local",
            )
            fn.__playline_tool__ = spec  # type: ignore[attr-defined]
            self._specs[id] = spec
            return fn

        return decorate

    def specs(self) -> Iterable[ToolSpec]:
        return self._specs.values()

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._specs

    def __len__(self) -> int:
        return len(self._specs)


default_registry = ToolRegistry()

# Calls of a local tool in flight at once, unless its Rate says otherwise: their claims and
# results are written together. It also bounds the requests (of up to the batch size each)
# that may be in doubt should the process die: those in flight, and up to as many answered
# and waiting for the next group commit. A free tool's run again on resume (in_doubt="resend");
# a paid tool's fail in doubt until the user retries them.
LOCAL_CONCURRENCY = 64
# The same for a free synchronous function whose calls a resume runs again: it runs on the
# event loop, one call at a time, so this only sets how many calls share a claim and a commit
# (a wave takes half: here more than a row window's calls, so a dispatch pass is one wave).
# Bigger waves write less per call (single calls: +15% at 512 against 64, +9% at 2,048 against
# 512), and what a kill leaves in doubt is at most this many free calls, run again in
# milliseconds.
LOCAL_RERUN_CONCURRENCY = 2048


tool = default_registry.tool
"""Define a local tool for every run of this process (``ToolRegistry.tool`` on the default
registry): ``fn(input) -> dict | None`` (None means "not found"), or with
``batch=pl.Batch(max_size=N)`` ``fn(inputs) -> list`` aligned with the inputs."""
