"""Error types of biasbreaker.

Every error says what failed, where (plugin and distribution, config file and key path, input
file and line), the offending value, and what to do next. Errors that wrap another exception are
raised with ``raise ... from exc`` so the original traceback is kept.

All errors derive from :class:`BiasbreakerError`. Errors caused by bad input also derive from
:class:`ValueError`, so callers that validate input generically still catch them. A message
never holds a secret: every text argument goes through :func:`biasbreaker.redaction.redact_text`.
"""

from __future__ import annotations

from biasbreaker.redaction import redact_text


class BiasbreakerError(Exception):
    """Base class of every error raised by biasbreaker; its text arguments are redacted."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))


class ConfigError(BiasbreakerError, ValueError):
    """The configuration is invalid: a bad value, an unknown key, a TOML syntax error.

    The message names the source (file, environment variable or argument), the key path,
    the bad value and what is allowed.
    """


class PluginError(BiasbreakerError):
    """A plugin misbehaved: it registered a bad name, returned a bad object or broke a rule."""


class PluginLoadError(PluginError):
    """A plugin's entry point failed to import, or the plugin failed to register.

    Failing to register means one of its hooks raised, or it passed ``register`` an invalid
    name, options model or factory; a plugin that fails so provides no implementation at all.

    Attributes:
        plugin: The entry-point name of the plugin.
        distribution: The distribution that declares the entry point, or ``None`` if unknown.
        version: The distribution's version, or ``None`` if unknown.
        original: The exception raised while loading or registering.
        problem: What the plugin did wrong while registering (``""`` for an import failure).
    """

    def __init__(
        self,
        plugin: str,
        distribution: str | None,
        version: str | None,
        original: BaseException,
        *,
        target: str = "",
        problem: str = "",
    ) -> None:
        self.plugin = plugin
        self.distribution = distribution
        self.version = version
        self.original = original
        self.target = target
        self.problem = problem
        where = target or plugin
        dist = f"from {distribution} {version}" if distribution else "from an unknown distribution"
        if problem:
            super().__init__(
                f"plugin {plugin!r} ({where}, {dist}) failed to register, so none of its "
                f"implementations is available: {problem}. Upgrade it or report it to its "
                f"authors, or block it with BIASBREAKER_DISABLE_PLUGINS={plugin}."
            )
        else:
            super().__init__(
                f"plugin {plugin!r} ({where}, {dist}) failed to load: {original!r}. "
                f"Reinstall or upgrade it, or block it with BIASBREAKER_DISABLE_PLUGINS={plugin}."
            )


class DuplicateImplementationError(PluginError):
    """Two plugins registered an implementation under one name in one extension point."""


class UnknownImplementationError(ConfigError):
    """The configuration names an implementation that no installed plugin provides."""


class ThresholdError(BiasbreakerError, ValueError):
    """Thresholds are inconsistent (e.g. ``tau_enter <= tau_exit``) or cannot be calibrated."""


class ScoreError(BiasbreakerError, ValueError):
    """A score is outside its allowed range or not finite (NaN, inf, negative)."""


class ProbeError(BiasbreakerError):
    """A counterfactual probe could not produce a score (the guarded step or a scorer failed)."""


class LLMError(BiasbreakerError):
    """An LLM client failed: transport error, time-out, refusal or malformed reply."""


class MalformedReplyError(LLMError):
    """An LLM reply did not parse as the requested JSON schema, even after one retry.

    Kept apart from other :class:`LLMError` s so a skeptic failure can be recorded as
    ``malformed`` (the reply arrived but was unusable) rather than as a transport error.
    """


class AggregatorError(PluginError):
    """An aggregator's result broke a kernel invariant (e.g. it pruned a verdict for dissent)."""


class InterventionError(BiasbreakerError):
    """An intervention (skeptic panel or repair loop) could not produce a usable result."""


class TraceError(BiasbreakerError, ValueError):
    """A run trace is malformed (bad JSON, wrong schema version, steps out of order)."""


class InputError(BiasbreakerError, ValueError):
    """A user-supplied input file or record is malformed; the message names the file and line."""
