"""Settings with the source of every value, and how values are shown."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from biasbreaker.config.settings import Settings
from biasbreaker.config.sources import (
    _leaves,
    _source_for,
)
from biasbreaker.redaction import redact_value


@dataclass(frozen=True)
class LoadedSettings:
    """Validated settings and the source of every value.

    Args:
        settings: The validated tree.
        provenance: Dotted key path → source label, for every value not left at its default
            (``"argument"``, ``"env BIASBREAKER_…"``, a file name, or
            ``"pyproject.toml [tool.biasbreaker]"``).
        files: The labels of the file sources that were read, highest precedence first; values
            from them must have their option's type (nothing is converted).
    """

    settings: Settings
    provenance: Mapping[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    def source_of(self, path: str) -> str:
        """Where the value at dotted ``path`` came from (``"default"`` if nowhere)."""
        return _source_for(path, self.provenance)

    def rows(
        self, typed: Mapping[str, Mapping[str, Any]] | None = None
    ) -> list[tuple[str, Any, str]]:
        """Every effective leaf value as (dotted key, value, source), sorted by key.

        Args:
            typed: Plugin name → option values as its plugin's options model validated them
                (:func:`biasbreaker.resolution.typed_plugin_tables`); they replace the raw
                values of those keys, so an option set from the environment shows as ``6``,
                not ``"6"``.
        """
        dumped = self.settings.model_dump(mode="json")
        for name, values in (typed or {}).items():
            table = dumped.get("plugin", {}).get(name)
            if isinstance(table, dict):
                table.update({k: v for k, v in values.items() if k in table})
        rows = []
        for key, value in _leaves(dumped):
            if key == "plugin" and value == {}:
                continue
            rows.append((key, value, self.source_of(key)))
        shown = {r[0] for r in rows}
        for key, source in self.provenance.items():
            # a plugin option the settings do not model (its plugin validates it); a table set
            # as a whole (e.g. from one environment variable) is shown by its leaves already
            if (
                key.startswith("plugin.")
                and key not in shown
                and not any(k.startswith(f"{key}.") for k in shown)
            ):
                rows.append((key, _lookup(dumped, key), source))
        return sorted(
            ((k, redact_value(v, k), s) for k, v, s in rows),
            key=lambda r: r[0],
        )


def _lookup(data: Mapping[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def dump_value(value: Any) -> str:
    """Render a configuration value the way TOML would write it (for ``biasbreaker config``)."""
    return json.dumps(value, ensure_ascii=False)
