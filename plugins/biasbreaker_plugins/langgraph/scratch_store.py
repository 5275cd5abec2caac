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

Searches and namespace listings go to the graph's store; an item the re-run overwrote or
deleted is shown as the re-run left it (or left out), and an item the re-run created is not
listed (a re-run that searches for what it has just written sees the graph's items only).
"""

from __future__ import annotations

from collections.abc import Iterable
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

    def _shadowed(self, found: list[SearchItem]) -> list[SearchItem]:
        out: list[SearchItem] = []
        for item in found:
            where = (tuple(item.namespace), item.key)
            if where not in self._written:
                out.append(item)
                continue
            mine = self._written[where]
            if mine is not None:
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
        return out

    def _plan(self, ops: Iterable[Op]) -> tuple[list[Op], list[Result], list[int]]:
        """Apply the writes; answer the reads of scratch items; the rest goes to ``base``."""
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        asked: list[int] = []
        for index, op in enumerate(ops):
            if isinstance(op, PutOp):
                self._put(op)
            elif isinstance(op, GetOp) and (tuple(op.namespace), op.key) in self._written:
                results[index] = self._written[(tuple(op.namespace), op.key)]
            elif isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                asked.append(index)
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return ops, results, asked

    def _merge(
        self, ops: list[Op], results: list[Result], asked: list[int], answers: list[Any]
    ) -> list[Result]:
        for index, answer in zip(asked, answers, strict=True):
            results[index] = self._shadowed(answer) if isinstance(ops[index], SearchOp) else answer
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (LangGraph's ``BaseStore.batch``): writes to scratch, reads as above."""
        ops, results, asked = self._plan(ops)
        answers = self.base.batch([ops[i] for i in asked]) if asked else []
        return self._merge(ops, results, asked, answers)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`."""
        ops, results, asked = self._plan(ops)
        answers = await self.base.abatch([ops[i] for i in asked]) if asked else []
        return self._merge(ops, results, asked, answers)
