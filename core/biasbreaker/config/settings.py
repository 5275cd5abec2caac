"""The whole configuration tree, :class:`Settings`, and the order of its sources."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from biasbreaker.config.sections import (
    AdapterSettings,
    BreakerSettings,
    CalibrationSettings,
    DemoSettings,
    InterventionSettings,
    LLMSettings,
    ProbeSettings,
    PropagationSettings,
    TraceSettings,
)
from biasbreaker.config.sources import (
    ENV_DELIMITER,
    ENV_PREFIX,
    _env_layer,
    _file_layers,
    plugin_table_name,
)
from biasbreaker.config.values import (
    _decode_env,
)


@dataclass(frozen=True)
class _LoadContext:
    """The layers of one :func:`load_settings` call, read once.

    Args:
        env: The environment's settings, nested and decoded (see :func:`_decode_env`).
        files: The file layers, highest precedence first, as (label, data).
    """

    env: dict[str, Any]
    files: tuple[tuple[str, dict[str, Any]], ...]


_LOAD_CONTEXT: ContextVar[_LoadContext | None] = ContextVar("_LOAD_CONTEXT", default=None)


class Settings(BaseSettings):
    """The whole configuration tree.

    Build it with :func:`load_settings` (which records where each value came from); calling
    ``Settings()`` directly reads the environment, ``./biasbreaker.toml`` and
    ``./pyproject.toml`` of the current directory.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        validate_default=True,
    )

    seed: int = Field(0, ge=0, description="Seed of every random choice in a run.")
    probe: ProbeSettings = Field(default_factory=ProbeSettings)
    propagation: PropagationSettings = Field(default_factory=PropagationSettings)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    calibration: CalibrationSettings = Field(default_factory=CalibrationSettings)
    intervention: InterventionSettings = Field(default_factory=InterventionSettings)
    adapter: AdapterSettings = Field(default_factory=AdapterSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    trace: TraceSettings = Field(default_factory=TraceSettings)
    demo: DemoSettings = Field(default_factory=DemoSettings)
    plugin: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Options per implementation name, validated by that plugin's own model.",
    )

    @field_validator("plugin", mode="before")
    @classmethod
    def _kebab_plugin_names(cls, value: Any) -> Any:
        """Accept ``plugin.openai_compatible`` for ``plugin.openai-compatible``.

        Implementation names are lower-kebab, so an underscore in a table name can only mean a
        hyphen — the only spelling a shell can export (``BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__
        MODEL``). :func:`load_settings` renames the tables of each source before the sources
        merge (so they merge key by key); this covers ``Settings(...)`` built directly. Two
        spellings of one name in one mapping are an error.
        """
        if not isinstance(value, Mapping):
            return value
        out: dict[Any, Any] = {}
        spelled: dict[Any, Any] = {}
        for key, table in value.items():
            name = plugin_table_name(key) if isinstance(key, str) else key
            if name in out:
                raise ValueError(
                    f"[plugin.{name}] is given twice (as {spelled[name]!r} and {key!r}); keep one"
                )
            out[name], spelled[name] = table, key
        return out

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Order the sources: arguments, environment, --config, ./biasbreaker.toml, pyproject.

        The environment is read by :func:`_env_layer` and decoded by :func:`_decode_env` rather
        than by pydantic-settings' own source, so a malformed value is a :class:`ConfigError`
        naming the variable, and lists may be written comma-separated.
        """
        ctx = _LOAD_CONTEXT.get()
        if ctx is None:
            ctx = _LoadContext(
                _decode_env(_env_layer(), Settings), tuple(_file_layers(None, Path.cwd()))
            )
        files = [InitSettingsSource(settings_cls, init_kwargs=data) for _, data in ctx.files]
        env = InitSettingsSource(settings_cls, init_kwargs=ctx.env)
        return (init_settings, env, *files)
