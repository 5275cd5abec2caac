"""Configuration: one pydantic-settings model tree, six sources, and where each value came from.

Sources, highest precedence first (ARCHITECTURE §4):

1. explicit arguments (``load_settings(overrides=...)``, CLI flags);
2. environment variables ``BIASBREAKER_<SECTION>__<KEY>`` (nested with ``__``; values arrive
   as strings and are coerced; lists as JSON, e.g. ``'["lexical", "sentiment"]'``);
3. the file given with ``--config FILE``;
4. ``./biasbreaker.toml``;
5. the ``[tool.biasbreaker]`` table of ``./pyproject.toml``;
6. the defaults (:mod:`biasbreaker.config.sections`).

Validation runs in two passes. The first (:func:`load_settings`) validates the static tree:
types, bounds, unknown keys (always errors, never ignored). The second
(:mod:`biasbreaker.resolution`, run once plugins are loaded) looks every chosen implementation up
in the registry and validates each ``[plugin.<name>]`` table with the options model that
implementation declared. Every error names the source (file, environment variable or
argument), the key path, the bad value and what is allowed.

Thresholds shipped as defaults are starting points that need calibration
(``biasbreaker calibrate``), never validated constants.

One module per concern:

* :mod:`~biasbreaker.config.sources`: reading the TOML files and the environment into layers;
* :mod:`~biasbreaker.config.values`: decoding environment strings, checking file values' types;
* :mod:`~biasbreaker.config.sections`: the settings model of each section;
* :mod:`~biasbreaker.config.settings`: the whole tree and the order of its sources;
* :mod:`~biasbreaker.config.provenance`: settings with the source of every value, as printed;
* :mod:`~biasbreaker.config.loading`: the first validation pass;
* :mod:`~biasbreaker.config.selection`: what the configuration selects; one plugin table's
  validation (the second pass's part that needs no registry).
"""

from __future__ import annotations

import sys

from biasbreaker.config.loading import load_settings
from biasbreaker.config.provenance import LoadedSettings, dump_value
from biasbreaker.config.sections import (
    AdapterSettings,
    BreakerSettings,
    CalibrationSettings,
    ControlWindowSettings,
    DemoSettings,
    InterventionSettings,
    LLMSettings,
    ProbeSettings,
    PropagationSettings,
    Section,
    TraceSettings,
)
from biasbreaker.config.selection import selection, validate_plugin_options
from biasbreaker.config.settings import Settings
from biasbreaker.config.sources import (
    CONFIG_FILE_NAME,
    DEFAULT_SOURCE,
    ENV_DELIMITER,
    ENV_PREFIX,
    NON_SETTINGS_ENV,
    PYPROJECT_TABLE,
    _file_layers,
    plugin_table_name,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "CONFIG_FILE_NAME",
    "DEFAULT_SOURCE",
    "ENV_DELIMITER",
    "ENV_PREFIX",
    "NON_SETTINGS_ENV",
    "PYPROJECT_TABLE",
    "AdapterSettings",
    "BreakerSettings",
    "CalibrationSettings",
    "ControlWindowSettings",
    "DemoSettings",
    "InterventionSettings",
    "LLMSettings",
    "LoadedSettings",
    "ProbeSettings",
    "PropagationSettings",
    "Section",
    "Settings",
    "TraceSettings",
    "_file_layers",
    "dump_value",
    "load_settings",
    "plugin_table_name",
    "selection",
    "tomllib",
    "validate_plugin_options",
]
