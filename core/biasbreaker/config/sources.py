"""Where configuration values come from: TOML files, ``pyproject.toml``, the environment.

Each source is read into a *layer*: a nested mapping of raw values (TOML's types, or the
environment's strings), with its ``[plugin.<name>]`` tables keyed by their lower-kebab names so
the layers merge key by key. :func:`_source_for` answers which source set a dotted key.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from biasbreaker.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ENV_PREFIX = "BIASBREAKER_"
ENV_DELIMITER = "__"
CONFIG_FILE_NAME = "biasbreaker.toml"
PYPROJECT_TABLE = ("tool", "biasbreaker")
NON_SETTINGS_ENV = frozenset(
    {"BIASBREAKER_DISABLE_PLUGINS", "BIASBREAKER_TRACE_PLUGINS", "BIASBREAKER_SIGNING_KEY_FILE"}
)
"""``BIASBREAKER_*`` variables that are not settings (read by the plugin host, and by
:mod:`biasbreaker.trace.signing`: the signing key is a file, never a setting)."""

DEFAULT_SOURCE = "default"


def plugin_table_name(name: str) -> str:
    """The canonical ``[plugin.<name>]`` key: implementation names are lower-kebab."""
    return name.replace("_", "-").lower()


def _canonical_path(key: str) -> str:
    parts = key.split(".")
    if len(parts) >= 2 and parts[0] == "plugin":
        parts[1] = plugin_table_name(parts[1])
    return ".".join(parts)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid TOML: {exc}. Fix the syntax at that line (strings need quotes, "
            "tables look like [breaker])."
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc}") from exc


def _file_layers(config_file: Path | None, cwd: Path) -> list[tuple[str, dict[str, Any]]]:
    """The file sources, highest precedence first, as (label, data)."""
    layers: list[tuple[str, dict[str, Any]]] = []
    if config_file is not None:
        if not config_file.is_file():
            what = "not a regular file" if config_file.exists() else "no such file"
            raise ConfigError(f"--config {config_file}: {what}; pass the path of a TOML file")
        layers.append((str(config_file), _read_toml(config_file)))
    local = cwd / CONFIG_FILE_NAME
    if local.is_file() and (config_file is None or local.resolve() != config_file.resolve()):
        layers.append((CONFIG_FILE_NAME, _read_toml(local)))
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        data: Any = _read_toml(pyproject)
        for key in PYPROJECT_TABLE:
            data = data.get(key, {}) if isinstance(data, dict) else {}
        if data:
            if not isinstance(data, dict):
                raise ConfigError(
                    f"pyproject.toml: [tool.biasbreaker] must be a table, got {data!r}"
                )
            layers.append(("pyproject.toml [tool.biasbreaker]", data))
    return [(label, _kebab_plugin_tables(data, label)) for label, data in layers]


def _leaves(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, path)
        else:
            yield ".".join(path), value


def _env_layer(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings found in the environment, nested by ``__``, values as raw strings.

    See :func:`_scan_env`, which also says which variable set each value.
    """
    return _scan_env(environ)[0]


def _scan_env(
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The environment's settings and the variable that set each of them.

    Names are matched case-insensitively; a plugin name may be written with ``_`` or ``-``
    for its hyphens (``BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__MODEL`` and
    ``BIASBREAKER_PLUGIN__OPENAI-COMPATIBLE__MODEL`` both set ``plugin.openai-compatible.model``),
    so the table is keyed by its canonical lower-kebab name and merges key by key with the same
    table from a file.

    Returns:
        The settings nested by ``__`` (values as raw strings), and dotted canonical key path →
        the name of the variable that set it.

    Raises:
        ConfigError: A variable sets a key below another variable's value
            (``BIASBREAKER_PROBE='{...}'`` together with ``BIASBREAKER_PROBE__K=3``), or two
            variables set the same key (two spellings or letter cases of one name).
    """
    env = os.environ if environ is None else environ
    nested: dict[str, Any] = {}
    owner: dict[tuple[str, ...], str] = {}
    found = [
        (var, _canonical_parts(var[len(ENV_PREFIX) :].lower().split(ENV_DELIMITER)), raw)
        for var, raw in env.items()
        if var.upper().startswith(ENV_PREFIX) and var.upper() not in NON_SETTINGS_ENV
    ]
    for var, parts, raw in sorted(found, key=lambda f: (len(f[1]), f[1], f[0])):
        node = nested
        for depth, part in enumerate(parts[:-1], 1):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(
                    f"environment variables {owner[parts[:depth]]} and {var} both set "
                    f"{'.'.join(parts[:depth])}; keep one of them"
                )
            node = child
        if parts in owner:
            raise ConfigError(
                f"environment variables {owner[parts]} and {var} both set {'.'.join(parts)} "
                f"(two spellings of one name); keep one of them, e.g. {_env_var('.'.join(parts))}"
            )
        node[parts[-1]] = raw
        owner[parts] = var
    return nested, {".".join(parts): var for parts, var in owner.items()}


def _canonical_parts(parts: Sequence[str]) -> tuple[str, ...]:
    """A key path with its plugin table name (``plugin.<name>...``) in lower-kebab form."""
    out = list(parts)
    if len(out) >= 2 and out[0] == "plugin":
        out[1] = plugin_table_name(out[1])
    return tuple(out)


def _kebab_plugin_tables(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``data`` with its ``[plugin.<name>]`` tables keyed by their lower-kebab names.

    Done per source before the sources merge, so ``[plugin.openai_compatible]`` in one source
    and ``[plugin.openai-compatible]`` in another are one table, merged key by key.

    Raises:
        ConfigError: One source gives a table under two spellings of one name.
    """
    plugin = data.get("plugin")
    if not isinstance(plugin, Mapping):
        return dict(data)
    tables: dict[Any, Any] = {}
    spelled: dict[Any, Any] = {}
    for key, table in plugin.items():
        name = plugin_table_name(key) if isinstance(key, str) else key
        if name in tables:
            raise ConfigError(
                f"{where}: [plugin.{name}] is given twice (as {spelled[name]!r} and {key!r}); "
                "keep one"
            )
        tables[name], spelled[name] = table, key
    return {**data, "plugin": tables}


def _env_var(path: str) -> str:
    """The variable that sets dotted ``path``, as documented (hyphens written ``_``)."""
    return ENV_PREFIX + ENV_DELIMITER.join(p.upper().replace("-", "_") for p in path.split("."))


def _source_for(path: str, provenance: Mapping[str, str]) -> str:
    """The source of ``path``: its own, else its sub-keys' sources, else its nearest parent's."""
    if path in provenance:
        return provenance[path]
    under = sorted({v for k, v in provenance.items() if k.startswith(path + ".")})
    if under:
        return ", ".join(under)
    probe = path.rpartition(".")[0]
    while probe:
        if probe in provenance:
            return provenance[probe]
        probe = probe.rpartition(".")[0]
    return DEFAULT_SOURCE
