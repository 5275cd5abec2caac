"""The plugin host: entry-point discovery, failures, blocking, duplicates, selection."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from biasbreaker.config import load_settings
from biasbreaker.errors import (
    ConfigError,
    DuplicateImplementationError,
    PluginError,
    PluginLoadError,
    UnknownImplementationError,
)
from biasbreaker.hookspecs import hookimpl
from biasbreaker.kernel import Kernel
from biasbreaker.plugins import PluginHost
from biasbreaker.registry import NAME_PATTERN

AGGREGATOR_PLUGIN = """
from biasbreaker.hookspecs import hookimpl

BUILT = []

class Mean:
    def aggregate(self, verdicts):
        return verdicts

def make(options, context):
    BUILT.append(options)
    return Mean()

@hookimpl
def aggregator(register):
    register("{name}", make, summary="test aggregator")
"""


def _aggregator_dist(fake_plugin_dist: Any, dist: str, module: str, name: str) -> None:
    fake_plugin_dist(
        dist,
        version="2.3.4",
        entry_points={module: module},
        modules={module: AGGREGATOR_PLUGIN.replace("{name}", name)},
    )


def test_entry_point_discovery_through_a_real_distribution(fake_plugin_dist: Any) -> None:
    _aggregator_dist(fake_plugin_dist, "bb-agg-mean", "bb_agg_mean", "mean")
    host = PluginHost(disabled=frozenset())
    info = host.infos["bb_agg_mean"]
    assert (info.distribution, info.version, info.status) == ("bb-agg-mean", "2.3.4", "loaded")
    assert info.hooks == ("aggregator",)
    impl = host.build_registry().get("aggregator", "mean")
    assert (impl.plugin, impl.distribution, impl.summary) == (
        "bb_agg_mean",
        "bb-agg-mean",
        "test aggregator",
    )


def test_plugin_raising_at_import_is_reported_and_does_not_hide_others(
    fake_plugin_dist: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _aggregator_dist(fake_plugin_dist, "bb-agg-good", "bb_agg_good", "good")
    fake_plugin_dist(
        "bb-broken",
        version="0.9",
        entry_points={"broken": "bb_broken"},
        modules={"bb_broken": "import definitely_not_installed_module_xyz\n"},
    )
    with caplog.at_level(logging.WARNING, logger="biasbreaker.plugins"):
        host = PluginHost(disabled=frozenset())
    (failure,) = host.failures
    assert failure.plugin == "broken"
    assert failure.distribution == "bb-broken"
    assert failure.version == "0.9"
    assert isinstance(failure.original, ModuleNotFoundError)
    assert "definitely_not_installed_module_xyz" in str(failure)
    assert "bb-broken 0.9" in str(failure)
    assert "broken" in caplog.text
    # the working plugin is still there (next to the first-party aggregators)
    assert "good" in host.build_registry().names("aggregator")


def test_strict_makes_a_load_failure_fatal(fake_plugin_dist: Any) -> None:
    fake_plugin_dist(
        "bb-broken",
        entry_points={"broken": "bb_broken_strict"},
        modules={"bb_broken_strict": "raise RuntimeError('boom at import')\n"},
    )
    with pytest.raises(PluginLoadError, match="boom at import") as info:
        PluginHost(strict=True, disabled=frozenset())
    assert isinstance(info.value.__cause__, RuntimeError)


def test_plugin_disabled_by_env_is_never_imported(
    fake_plugin_dist: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_plugin_dist(
        "bb-loud",
        entry_points={"loud": "bb_loud"},
        modules={"bb_loud": "raise RuntimeError('imported although disabled')\n"},
    )
    _aggregator_dist(fake_plugin_dist, "bb-agg-x", "bb_agg_x", "x")
    monkeypatch.setenv("BIASBREAKER_DISABLE_PLUGINS", " loud , bb_agg_x")
    host = PluginHost()
    assert host.failures == []
    assert host.infos["loud"].status == "disabled"
    assert host.infos["bb_agg_x"].status == "disabled"
    assert "x" not in host.build_registry().names("aggregator")


def test_duplicate_names_are_an_error_naming_both_distributions(fake_plugin_dist: Any) -> None:
    _aggregator_dist(fake_plugin_dist, "bb-agg-one", "bb_agg_one", "twin")
    _aggregator_dist(fake_plugin_dist, "bb-agg-two", "bb_agg_two", "twin")
    registry = PluginHost(disabled=frozenset()).build_registry()
    (conflict,) = registry.conflicts
    assert "bb-agg-one 2.3.4" in str(conflict)
    assert "bb-agg-two 2.3.4" in str(conflict)
    with pytest.raises(DuplicateImplementationError, match="registered twice"):
        registry.get("aggregator", "twin")


def test_unknown_name_lists_installed_implementations(
    fake_plugin_dist: Any, isolated_config: Any
) -> None:
    _aggregator_dist(fake_plugin_dist, "bb-agg-mean", "bb_agg_mean2", "mean")
    _aggregator_dist(fake_plugin_dist, "bb-agg-median", "bb_agg_median", "median")
    host = PluginHost(autoload=False, disabled=frozenset())
    host.load_entry_points()
    kernel = Kernel(load_settings(overrides={"intervention": {"aggregator": "trsut"}}), host)
    with pytest.raises(UnknownImplementationError) as info:
        kernel.build("aggregator")
    message = str(info.value)
    assert "aggregator 'trsut'" in message
    assert "argument: intervention.aggregator" in message
    assert "mean (bb-agg-mean 2.3.4)" in message
    assert "median (bb-agg-median 2.3.4)" in message


def test_unknown_name_mentions_plugins_that_failed_to_load(
    fake_plugin_dist: Any, isolated_config: Any
) -> None:
    fake_plugin_dist(
        "bb-retriever-zz",
        entry_points={"zz-missing": "bb_zz_missing"},
        modules={"bb_zz_missing": "import numpy_that_is_missing\n"},
    )
    host = PluginHost(disabled=frozenset())
    kernel = Kernel(load_settings(overrides={"intervention": {"retriever": "zz-missing"}}), host)
    with pytest.raises(UnknownImplementationError, match="failed to load.*numpy_that_is_missing"):
        kernel.build("retriever")


def test_installed_but_unselected_implementations_are_never_built(
    fake_plugin_dist: Any, isolated_config: Any
) -> None:
    _aggregator_dist(fake_plugin_dist, "bb-agg-a", "bb_agg_a", "chosen")
    _aggregator_dist(fake_plugin_dist, "bb-agg-b", "bb_agg_b", "ignored")
    host = PluginHost(disabled=frozenset())
    kernel = Kernel(load_settings(overrides={"intervention": {"aggregator": "chosen"}}), host)
    kernel.build("aggregator")
    import bb_agg_a
    import bb_agg_b

    assert len(bb_agg_a.BUILT) == 1
    assert bb_agg_b.BUILT == []
    # built once, cached
    assert kernel.build("aggregator") is kernel.build("aggregator", "chosen")
    assert len(bb_agg_a.BUILT) == 1


# --- a plugin that fails to register fails alone (new-user report 2, bug 5) -----------------


class GoodAggregator:
    @hookimpl
    def aggregator(self, register: Any) -> None:
        register("mean", lambda options, context: object(), summary="a good one")


def _misbehaving(kind: str, *, swallow: bool = False) -> object:
    """A plugin that registers a skeptic and a retriever, then fails in its skeptic hook."""

    class Plugin:
        @hookimpl
        def retriever(self, register: Any) -> None:
            register("bad-retr", lambda options, context: object())

        @hookimpl
        def skeptic(self, register: Any) -> None:
            register("contrarian", lambda options, context: object())
            try:
                if kind == "raise":
                    raise ValueError("hook raised")
                if kind == "name":
                    register("Bad_Name", lambda options, context: object())
                if kind == "factory":
                    register("badfac", "not callable")
            except PluginError:
                if not swallow:
                    raise

    return Plugin()


WHAT_WENT_WRONG = {
    "raise": "its skeptic hook raised ValueError('hook raised')",
    "name": "registered skeptic 'Bad_Name'; implementation names must be lower-kebab",
    "factory": "registered skeptic 'badfac' with a factory that is not callable: 'not callable'",
}


@pytest.mark.parametrize(
    ("kind", "swallow"),
    # the hook catching register's PluginError does not make an invalid registration pass
    [("raise", False), ("name", False), ("name", True), ("factory", False), ("factory", True)],
)
def test_a_plugin_that_fails_to_register_is_recorded_and_the_others_keep_working(
    register_plugin: Any,
    plugin_host: PluginHost,
    kind: str,
    swallow: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register_plugin(GoodAggregator(), name="good")
    register_plugin(
        _misbehaving(kind, swallow=swallow), name="nu3", distribution="nu3", version="1"
    )
    with caplog.at_level(logging.WARNING, logger="biasbreaker.plugins"):
        registry = plugin_host.build_registry()
        again = plugin_host.build_registry()  # the failure is recorded, not repeated
    info = plugin_host.infos["nu3"]
    assert info.status == "failed"
    assert info.error is not None
    message = str(info.error)
    assert "plugin 'nu3' (" in message and "from nu3 1) failed to register" in message
    assert WHAT_WENT_WRONG[kind] in message
    assert "BIASBREAKER_DISABLE_PLUGINS=nu3" in message
    assert plugin_host.failures == [info.error]
    assert [r.getMessage() for r in caplog.records] == [message]
    for reg in (registry, again):
        # nothing of the failed plugin is kept, not even what it registered before failing
        assert reg.registered_by("nu3") == []
        assert reg.names("skeptic") == [] and reg.names("retriever") == []
        assert reg.get("aggregator", "mean").plugin == "good"
        with pytest.raises(UnknownImplementationError) as unknown:
            reg.get("skeptic", "contrarian", where="biasbreaker.toml: intervention.skeptics")
        assert (
            "skeptic 'contrarian' (biasbreaker.toml: intervention.skeptics) is not available"
            in str(unknown.value)
        )
        assert WHAT_WENT_WRONG[kind] in str(unknown.value)
        assert "If 'contrarian' comes from one of them" in str(unknown.value)


@pytest.mark.parametrize("kind", sorted(WHAT_WENT_WRONG))
def test_strict_makes_a_registration_failure_fatal(kind: str) -> None:
    host = PluginHost(autoload=False, strict=True, disabled=frozenset())
    host.register(_misbehaving(kind), name="nu3", distribution="nu3", version="1")
    with pytest.raises(PluginLoadError) as info:
        host.build_registry()
    assert WHAT_WENT_WRONG[kind] in str(info.value)
    assert info.value.plugin == "nu3" and info.value.problem
    assert info.value.__cause__ is info.value.original


@pytest.mark.parametrize("bad", ["Trust", "two words", "under_score", "", "-lead", 42])
def test_registering_a_malformed_name_fails_the_plugin(
    register_plugin: Any, plugin_host: PluginHost, bad: object
) -> None:
    class Plugin:
        @hookimpl
        def aggregator(self, register: Any) -> None:
            register(bad, lambda options, context: object())

    register_plugin(Plugin(), name="bad-names")
    plugin_host.build_registry()
    (failure,) = plugin_host.failures
    assert "lower-kebab" in str(failure)
    assert not NAME_PATTERN.match(str(bad))


def test_a_kernel_works_beside_a_plugin_that_failed_to_register(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(GoodAggregator(), name="good")
    register_plugin(_misbehaving("raise"), name="nu3", distribution="nu3", version="1")
    kernel = make_kernel({"intervention": {"aggregator": "mean"}})
    assert kernel.build("aggregator") is not None
    broken = make_kernel({"intervention": {"retriever": "bad-retr"}})
    with pytest.raises(UnknownImplementationError, match="hook raised"):
        broken.build("retriever")


def test_a_hook_that_raises_is_reported_with_its_plugin_and_distribution(
    fake_plugin_dist: Any,
) -> None:
    fake_plugin_dist(
        "bb-raiser",
        version="1",
        entry_points={"raiser": "bb_raiser"},
        modules={
            "bb_raiser": (
                "from biasbreaker.hookspecs import hookimpl\n"
                "@hookimpl\n"
                "def scorer(register):\n"
                "    raise KeyError('oops')\n"
            )
        },
    )
    host = PluginHost(disabled=frozenset())
    host.build_registry()
    assert host.infos["raiser"].hooks == ("scorer",)
    assert str(host.infos["raiser"].error).startswith(
        "plugin 'raiser' (bb_raiser, from bb-raiser 1) failed to register, so none of its "
        "implementations is available: its scorer hook raised KeyError('oops')."
    )


def test_a_factory_that_raises_is_a_plugin_error_with_the_cause(
    register_plugin: Any, make_kernel: Any
) -> None:
    def broken(options: Any, context: Any) -> object:
        raise RuntimeError("model file missing")

    class Plugin:
        @hookimpl
        def aggregator(self, register: Any) -> None:
            register("broken", broken)

    register_plugin(Plugin(), name="bb-broken-factory")
    kernel = make_kernel({"intervention": {"aggregator": "broken"}})
    with pytest.raises(PluginError, match="failed to build: RuntimeError") as info:
        kernel.build("aggregator")
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_plugin_with_an_unknown_hook_argument_is_rejected(
    plugin_host: PluginHost,
) -> None:
    class Plugin:
        @hookimpl
        def aggregator(self, register: Any, extra: Any) -> None:
            raise AssertionError("never called")

    with pytest.raises(PluginError, match="cannot register plugin 'bad-args'"):
        plugin_host.register(Plugin(), name="bad-args")


# --- BIASBREAKER_DISABLE_PLUGINS mistakes (new-user report) --------------------------------


def test_disable_plugins_names_that_match_nothing_are_noticed(
    fake_plugin_dist: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _aggregator_dist(fake_plugin_dist, "bb-agg-x", "bb_agg_x", "x")
    monkeypatch.setenv("BIASBREAKER_DISABLE_PLUGINS", "BB_AGG_X,bb-agg-typo")
    host = PluginHost()
    assert host.infos["bb_agg_x"].status == "loaded"  # names are case-sensitive
    case, typo = host.notices
    assert "names 'BB_AGG_X', which is no installed plugin" in case
    assert "case-sensitive: did you mean 'bb_agg_x'?" in case
    assert "names 'bb-agg-typo', which is no installed plugin; it disables nothing" in typo
    assert "bb_agg_x" in typo.rpartition("Installed plugins:")[2]
    monkeypatch.setenv("BIASBREAKER_DISABLE_PLUGINS", "bb_agg_x")
    assert PluginHost().notices == []


def test_an_implementation_missing_because_its_plugin_is_disabled_says_so(
    fake_plugin_dist: Any, isolated_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _aggregator_dist(fake_plugin_dist, "bb-agg-off", "bb_agg_off", "off")
    monkeypatch.setenv("BIASBREAKER_DISABLE_PLUGINS", "bb_agg_off")
    kernel = Kernel(load_settings(overrides={"intervention": {"aggregator": "off"}}), PluginHost())
    with pytest.raises(UnknownImplementationError) as info:
        kernel.build("aggregator")
    message = str(info.value)
    assert "aggregator 'off' (argument: intervention.aggregator) is not available" in message
    assert "BIASBREAKER_DISABLE_PLUGINS disables plugin(s) bb_agg_off (bb-agg-off 2.3.4)" in message


# --- duplicate registrations: advice that does not remove the first-party plugin blindly ---


class FirstPartyScorers:
    @hookimpl
    def scorer(self, register: Any) -> None:
        for name in ("lexical", "sentiment", "decision"):
            register(name, lambda options, context: object())


class ThirdPartyLexical:
    @hookimpl
    def scorer(self, register: Any) -> None:
        register("lexical", lambda options, context: object())


def test_duplicate_message_prefers_dropping_the_third_party_plugin(
    register_plugin: Any, plugin_host: PluginHost
) -> None:
    register_plugin(FirstPartyScorers(), name="scorers", distribution="biasbreaker", version="0.1")
    register_plugin(ThirdPartyLexical(), name="my-lexical", distribution="bb-lexical", version="1")
    registry = plugin_host.build_registry()
    (conflict,) = registry.conflicts
    message = str(conflict)
    third = message.index("to drop plugin 'my-lexical'")
    first = message.index("to drop plugin 'scorers' (first-party)")
    assert third < first
    assert (
        "uninstall bb-lexical or set BIASBREAKER_DISABLE_PLUGINS=my-lexical, which removes it: "
        "scorer:lexical" in message
    )
    assert (
        "set BIASBREAKER_DISABLE_PLUGINS=scorers, which removes all 3 of its implementations: "
        "scorer:lexical, scorer:sentiment, scorer:decision" in message
    )
    assert "uninstall biasbreaker" not in message
    with pytest.raises(DuplicateImplementationError, match="to drop plugin 'my-lexical'"):
        registry.get("scorer", "lexical")
    # each plugin's own registrations stay attributed to it
    assert [i.name for i in registry.registered_by("scorers")] == [
        "lexical",
        "sentiment",
        "decision",
    ]
    assert [i.plugin for i in registry.registered_by("my-lexical")] == ["my-lexical"]
    assert registry.conflicted("scorer", "lexical")
    assert not registry.conflicted("scorer", "sentiment")


# --- optional modules an implementation needs ---------------------------------------------


def test_requires_reports_missing_modules_without_importing(
    register_plugin: Any, plugin_host: PluginHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Plugin:
        @hookimpl
        def retriever(self, register: Any) -> None:
            register(
                "needy",
                lambda options, context: object(),
                requires=("json", "bb_module_that_is_not_installed"),
                install="pip install bb-needy[full]",
            )

    register_plugin(Plugin(), name="needy")
    impl = plugin_host.build_registry().get("retriever", "needy")
    assert impl.missing() == ["bb_module_that_is_not_installed"]
    assert impl.install == "pip install bb-needy[full]"
    monkeypatch.setitem(__import__("sys").modules, "json", None)  # as if json were absent
    assert impl.missing() == ["json", "bb_module_that_is_not_installed"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"requires": "numpy"}, "requires='numpy'"), ({"install": 3}, "install=3")],
)
def test_requires_and_install_are_validated(
    register_plugin: Any, plugin_host: PluginHost, kwargs: dict[str, Any], match: str
) -> None:
    class Plugin:
        @hookimpl
        def retriever(self, register: Any) -> None:
            register("needy", lambda options, context: object(), **kwargs)

    register_plugin(Plugin(), name="needy")
    assert plugin_host.build_registry().names("retriever") == []
    (failure,) = plugin_host.failures
    assert match in str(failure)


# --- Kernel.check_build closes what it built ------------------------------------------------


def test_check_build_builds_the_selection_and_closes_llm_clients(
    register_plugin: Any, make_kernel: Any
) -> None:
    closed: list[str] = []

    class Client:
        model = "m"

        async def complete(self, request: Any) -> Any:
            raise AssertionError("a check never calls the model")

        async def aclose(self) -> None:
            closed.append("closed")

    class Plugin:
        @hookimpl
        def llm_client(self, register: Any) -> None:
            register("closing", lambda options, context: Client())

        @hookimpl
        def aggregator(self, register: Any) -> None:
            def broken(options: Any, context: Any) -> object:
                raise RuntimeError("weights file missing")

            register("broken", broken)

    register_plugin(Plugin(), name="closing", distribution="bb-closing", version="1")
    kernel = make_kernel({"llm": {"client": "closing"}, "intervention": {"aggregator": "broken"}})
    problems = kernel.check_build()
    assert closed == ["closed"]
    built = [p for p in problems if "weights file missing" in p]
    assert built == [
        "aggregator 'broken' from plugin 'closing' (bb-closing 1) failed to build: "
        "RuntimeError('weights file missing') [selected by intervention.aggregator (argument)]"
    ]


@pytest.mark.parametrize("where", ["lookup", "aclose"])
def test_an_implementation_that_fails_to_close_is_a_problem_naming_its_plugin(
    register_plugin: Any, make_kernel: Any, where: str
) -> None:
    """A newcomer's proxy object whose attribute lookup raised made guard() fail with a bare
    ``RuntimeError: proxy skeptic aclose`` and left the other implementations unclosed."""
    closed: list[str] = []

    class Client:
        model = "m"

        async def complete(self, request: Any) -> Any:
            raise AssertionError("a check never calls the model")

        async def aclose(self) -> None:
            closed.append("closed")

    class Proxy:
        def __getattr__(self, attr: str) -> Any:
            raise RuntimeError(f"proxy {attr}")

    class Raising:
        async def aclose(self) -> None:
            raise RuntimeError("proxy aclose")

    class Plugin:
        @hookimpl
        def llm_client(self, register: Any) -> None:
            register("closing", lambda options, context: Client())

        @hookimpl
        def aggregator(self, register: Any) -> None:
            register("proxy", lambda options, context: Proxy() if where == "lookup" else Raising())

    register_plugin(Plugin(), name="proxying", distribution="bb-proxying", version="2")
    kernel = make_kernel({"llm": {"client": "closing"}, "intervention": {"aggregator": "proxy"}})
    problems = kernel.check_build()
    assert closed == ["closed"]  # the others are still closed
    assert [p for p in problems if "proxy aclose" in p] == [
        "aggregator 'proxy' from plugin 'proxying' (bb-proxying 2) failed to close after the "
        "build check: RuntimeError('proxy aclose'); an implementation must close (aclose) "
        "without raising, or not define aclose"
    ]
    with pytest.raises(ConfigError, match="aggregator 'proxy' from plugin 'proxying'"):
        kernel.validate()
