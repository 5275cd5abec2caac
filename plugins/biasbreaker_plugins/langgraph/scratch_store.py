"""The store a probe re-run sees: the graph's store to read, a scratch copy to write.

A node that keeps what it read in LangGraph's long-term store (``store.put(("applicants",),
key, {...})``) does so in every probe re-run too, and the re-runs are counterfactual: without
this, the invented applicants of the variants ("Mr. Rajesh Kaur") landed in the real store,
where the next node, and the next run, read them back (a leak a new-user trial found). So
every re-run gets a :class:`ScratchStore` over the graph's store: reads see the graph's
items as they are, writes (puts and deletes) go to a scratch layer of that re-run alone, and
a later read in the same re-run sees its own writes. Nothing of a re-run reaches the graph's
store. The node's own call is not a re-run: it gets the graph's store itself (its writes are
side effects, made when it runs, before the breaker decides; docs/langgraph.md §8).

A search shows the graph's items as the re-run left them and the items the re-run wrote:
a node that ``store.put``s a record and then finds it with ``store.search(prefix,
filter=...)`` finds it in its re-runs too (they did not, and a fair node scored 1.0: a
new-user trial). The re-run's items are matched as LangGraph's ``InMemoryStore`` matches
them (namespace prefix, ``filter`` by equality or ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/
``$lte``, nested objects and lists compared as JSON), an overwritten item whose new value no
longer matches is left out, the items the graph lists come first, in its order, then those
only the re-run's writes make match, in the order written, and ``offset``/``limit`` apply to
the merged list. A semantic
search (``query=``) on a store that ranks by embeddings (one with an ``index_config``) after
the re-run wrote under the prefix is not answered: the scratch items have no embeddings to
rank, and a guessed order would be compared as the node's output, so it raises
:class:`~.values.Unreadable` and the step is held, naming the search and the fix. Namespace
listings go to the graph's store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, Final

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from biasbreaker_plugins.langgraph.values import Unreadable

__all__ = ["ScratchStore"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
"""The time stamp of an item a re-run created (no wall clock: re-runs stay deterministic)."""

_Key = tuple[tuple[str, ...], str]


class ScratchStore(BaseStore):
    """Reads from ``base``; keeps every write in a scratch layer of its own.

    Args:
        base: The graph's store (never written through this object).
    """

    def __init__(self, base: BaseStore) -> None:
        self.base = base
        self._written: dict[_Key, Item | None] = {}  # None: deleted

    def _put(self, op: PutOp) -> None:
        where = (tuple(op.namespace), op.key)
        if op.value is None:
            self._written[where] = None
            return
        self._written[where] = Item(
            value=dict(op.value),
            key=op.key,
            namespace=tuple(op.namespace),
            created_at=_EPOCH,
            updated_at=_EPOCH,
        )

    def _mine(self, op: SearchOp) -> list[Item]:
        """The re-run's own items ``op`` finds (its namespace prefix and ``filter``)."""
        n = len(op.namespace_prefix)
        return [
            item
            for (namespace, _), item in self._written.items()
            if item is not None
            and namespace[:n] == tuple(op.namespace_prefix)
            and _matches(item.value, op.filter)
        ]

    def _widened(self, op: SearchOp) -> SearchOp:
        """``op`` as asked of ``base``: from the first item, enough of them to merge.

        The re-run's writes can hide at most as many of the graph's items as it wrote under
        the prefix, so ``offset + limit`` plus that many are enough.

        Raises:
            Unreadable: A semantic search (``query``) of a store that ranks by embeddings,
                after the re-run wrote under the prefix (module docstring).
        """
        n = len(op.namespace_prefix)
        written = sum(1 for ns, _ in self._written if ns[:n] == tuple(op.namespace_prefix))
        if not written:
            return op
        if op.query and getattr(self.base, "index_config", None):
            raise Unreadable(
                f"store.search({tuple(op.namespace_prefix)!r}, query=...)",
                type(self.base).__name__,
                "a semantic search, in a probe re-run, of items the re-run itself wrote (kept "
                "in its scratch copy, without embeddings to rank them): the probe cannot "
                "answer it as the store would; search before writing, search with filter= "
                "instead of query=, or mark the node @guard_node(probe=False)",
            )
        if op.offset < 0 or op.limit < 0:
            return op
        return op._replace(offset=0, limit=op.offset + op.limit + written)

    def _shadowed(self, op: SearchOp, found: list[SearchItem]) -> list[SearchItem]:
        """``found`` (the graph's answer to :meth:`_widened` ``op``) as the re-run sees it."""
        n = len(op.namespace_prefix)
        if not any(ns[:n] == tuple(op.namespace_prefix) for ns, _ in self._written):
            return found
        out: list[SearchItem] = []
        listed: set[_Key] = set()
        for item in found:
            where = (tuple(item.namespace), item.key)
            listed.add(where)
            if where not in self._written:
                out.append(item)
                continue
            mine = self._written[where]
            if mine is not None and _matches(mine.value, op.filter):
                out.append(
                    SearchItem(
                        namespace=mine.namespace,
                        key=mine.key,
                        value=mine.value,
                        created_at=item.created_at,
                        updated_at=mine.updated_at,
                        score=item.score,
                    )
                )
        for mine in self._mine(op):
            if (mine.namespace, mine.key) not in listed:
                out.append(
                    SearchItem(
                        namespace=mine.namespace,
                        key=mine.key,
                        value=mine.value,
                        created_at=mine.created_at,
                        updated_at=mine.updated_at,
                    )
                )
        if op.offset < 0 or op.limit < 0:  # not widened (_widened): as the graph sliced it
            return out
        return out[op.offset : op.offset + op.limit]

    def _plan(self, ops: Iterable[Op]) -> tuple[list[Op], list[Result], list[int], list[Op]]:
        """Apply the writes; answer the reads of scratch items; the rest goes to ``base``.

        Returns:
            The ops, their results so far, the indexes of those ``base`` answers, and what is
            asked of ``base`` for each of them (a search widened by :meth:`_widened`).
        """
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        asked: list[int] = []
        asks: list[Op] = []
        for index, op in enumerate(ops):
            if isinstance(op, PutOp):
                self._put(op)
            elif isinstance(op, GetOp) and (tuple(op.namespace), op.key) in self._written:
                results[index] = self._written[(tuple(op.namespace), op.key)]
            elif isinstance(op, SearchOp):
                asked.append(index)
                asks.append(self._widened(op))
            elif isinstance(op, (GetOp, ListNamespacesOp)):
                asked.append(index)
                asks.append(op)
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return ops, results, asked, asks

    def _merge(
        self, ops: list[Op], results: list[Result], asked: list[int], answers: list[Any]
    ) -> list[Result]:
        for index, answer in zip(asked, answers, strict=True):
            op = ops[index]
            results[index] = self._shadowed(op, answer) if isinstance(op, SearchOp) else answer
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (LangGraph's ``BaseStore.batch``): writes to scratch, reads as above."""
        ops, results, asked, asks = self._plan(ops)
        answers = self.base.batch(asks) if asks else []
        return self._merge(ops, results, asked, answers)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`."""
        ops, results, asked, asks = self._plan(ops)
        answers = await self.base.abatch(asks) if asks else []
        return self._merge(ops, results, asked, answers)


def _matches(value: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Whether an item's ``value`` passes a search's ``filter``, as ``InMemoryStore`` decides."""
    return not where or all(_compare(value.get(key), want) for key, want in where.items())


def _compare(value: Any, want: Any) -> bool:
    """One ``filter`` entry (LangGraph's ``InMemoryStore``: JSONB-like, nested, operators)."""
    if isinstance(want, dict):
        if any(key.startswith("$") for key in want):
            return all(_operator(value, op, operand) for op, operand in want.items())
        if not isinstance(value, dict):
            return False
        return all(_compare(value.get(key), item) for key, item in want.items())
    if isinstance(want, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(want)
            and all(_compare(v, w) for v, w in zip(value, want, strict=True))
        )
    return bool(value == want)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator == "$gt":
        return float(value) > float(operand)
    if operator == "$gte":
        return float(value) >= float(operand)
    if operator == "$lt":
        return float(value) < float(operand)
    if operator == "$lte":
        return float(value) <= float(operand)
    raise ValueError(f"Unsupported operator: {operator}")
