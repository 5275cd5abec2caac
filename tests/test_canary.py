"""A canary key, planted everywhere a user might put one, never comes out of biasbreaker.

The key is planted in every configuration source (``--config FILE``, ``./biasbreaker.toml``,
``[tool.biasbreaker]`` in ``./pyproject.toml``, ``BIASBREAKER_*`` variables) and in every
misplacement users make (an unknown key of the client's table, a header table, ``[llm]
api_key``, a pasted key in ``api_key_env``, an ``AUTH_HEADER`` variable, ``base_url`` user
info). Every command then runs through the real entry point (:func:`biasbreaker.cli.main`,
standard streams redacted as for a user) and every byte it prints or writes is searched for the
key in every encoding below. Then the key is put where it belongs (the variable ``api_key_env``
names) and ``demo`` and ``run`` talk to a local OpenAI-compatible server whose 401 and 500
replies echo the key back: upper-cased, base64, URL-encoded, hex, inside an echoed header.
"""

from __future__ import annotations

import base64
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from biasbreaker.cli import main
from biasbreaker.redaction import forget_secrets

pytest.importorskip("langgraph")
pytest.importorskip("matplotlib")
testing = pytest.importorskip("biasbreaker_openai_compatible.testing")

pytestmark = pytest.mark.langgraph

CANARY = "sk-canary-Qx7Lm2/Vb9Zt4+Rk8Wp3Nf6Hd1Js5Gc0Ya"


def _base64_copies(data: bytes) -> set[bytes]:
    """Substrings every base64 text holding ``data`` contains, at each of the 3 alignments."""
    out = set()
    for pad, skip in ((0, 0), (1, 2), (2, 3)):
        blob = b"\0" * pad + data
        blob = blob[: len(blob) - len(blob) % 3]
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            out.add(encode(blob)[skip:])
    return out


def encodings(key: str) -> set[bytes]:
    raw = key.encode()
    plain = {
        key,
        key.upper(),
        key.lower(),
        quote(key, safe=""),
        quote_plus(key),
        raw.hex(),
        raw.hex().upper(),
        json.dumps(key)[1:-1],
        key[10:34],  # any long piece of it
    }
    return {p.encode() for p in plain} | _base64_copies(raw)


LEAKS = encodings(CANARY)


def leaks(data: bytes) -> list[bytes]:
    return [e for e in LEAKS if e in data]


GRAPH = """
from langgraph.graph import END, START, StateGraph

from biasbreaker.llm import LLMRequest
from biasbreaker.probe import with_current_sample
from biasbreaker_plugins.langgraph import BiasState


class State(BiasState, total=False):
    question: str
    answer: str


def build(llm):
    async def answer(state: State) -> dict:
        reply = await llm.complete(with_current_sample(LLMRequest.chat(state["question"])))
        return {"answer": reply.text}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder
"""

PAIRS = {"original": "He is a strong leader.", "counterfactual": "She is a strong leader."}


@pytest.fixture
def project(isolated_config: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with every input a command needs; nothing in it holds the key."""
    root = isolated_config
    (root / "canary_mod.py").write_text(textwrap.dedent(GRAPH))
    monkeypatch.syspath_prepend(str(root))
    questions = ["Is it fine? yes or no", "Please deny this. yes or no"]
    (root / "in.jsonl").write_text("".join(json.dumps({"question": q}) + "\n" for q in questions))
    (root / "pairs.jsonl").write_text(json.dumps(PAIRS) + "\n")
    steps = [{"run": r, "fast": 0.01 * (r % 7), "slow": 0.005} for r in range(40)]
    (root / "control.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    monkeypatch.setenv("COLUMNS", "200")
    forget_secrets()
    yield root
    forget_secrets()
    sys.modules.pop("canary_mod", None)


def cli(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> tuple[int, str]:
    """Run ``biasbreaker ARGS`` through the console entry point; (exit status, all output)."""
    monkeypatch.setattr(sys, "argv", ["biasbreaker", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capfd.readouterr()
    return code, out + err


def commands(config: list[str]) -> list[list[str]]:
    """Every command, each with the arguments that make it read the configuration."""
    return [
        ["config", *config],
        ["config", "--check", *config],
        ["config", "--json", *config],
        ["plugins", *config],
        ["plugins", "--json", *config],
        ["plugins", "--verbose", *config],
        ["simulate", "control", "--steps", "5", "--out", "sim.jsonl", *config],
        ["calibrate", "control.jsonl", "--target-false-halt-rate", "0.1", *config],
        ["score", "pairs.jsonl", *config],
        ["demo", "--quick", "--out", "demo-out", *config],
        ["run", "--graph", "canary_mod:build", "--inputs", "in.jsonl", "--out", "run-out",
         *config],
    ]  # fmt: skip


def written(root: Path, planted: set[Path]) -> bytes:
    """Every byte of every file under ``root`` but the ones the test planted."""
    return b"".join(
        p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p not in planted
    )


TABLE = "[plugin.openai-compatible]"
MISPLACED_IN_FILES = {
    "unknown key of the client's table": f'{TABLE}\nmodel = "m"\nbearer_token = "{CANARY}"\n',
    "header table": f'{TABLE}\nmodel = "m"\nheaders = {{Authorization = "Bearer {CANARY}"}}\n',
    "[llm] api_key": f'[llm]\nclient = "openai-compatible"\napi_key = "{CANARY}"\n',
    "pasted into api_key_env": f'{TABLE}\nmodel = "m"\napi_key_env = "{CANARY}"\n',
    "base_url user info": f'{TABLE}\nmodel = "m"\nbase_url = "http://me:{CANARY}@127.0.0.1:9/v1"\n',
}
MISPLACED_IN_ENV = {
    "BIASBREAKER_LLM__API_KEY": CANARY,
    "BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__AUTH_HEADER": f"Bearer {CANARY}",
    "BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__API_KEY_ENV": CANARY,
    "BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__HEADERS": json.dumps({"X-Key": CANARY}),
}


def _in_pyproject(toml: str) -> str:
    return "\n".join(
        line.replace("[", "[tool.biasbreaker.", 1) if line.startswith("[") else line
        for line in toml.splitlines()
    )


@pytest.mark.parametrize("where", ["--config", "biasbreaker.toml", "pyproject.toml"])
@pytest.mark.parametrize("misplacement", sorted(MISPLACED_IN_FILES))
def test_a_key_misplaced_in_a_file_never_comes_out(
    project: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    misplacement: str,
) -> None:
    toml = MISPLACED_IN_FILES[misplacement]
    path = project / {"--config": "canary.toml"}.get(where, where)
    path.write_text(_in_pyproject(toml) if where == "pyproject.toml" else toml)
    config = ["--config", str(path)] if where == "--config" else []
    _every_command_refuses(project, capfd, monkeypatch, config, {path})


@pytest.mark.parametrize("variable", sorted(MISPLACED_IN_ENV))
def test_a_key_misplaced_in_a_variable_never_comes_out(
    project: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, MISPLACED_IN_ENV[variable])
    _every_command_refuses(project, capfd, monkeypatch, [], set())


def _every_command_refuses(
    project: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    config: list[str],
    planted: set[Path],
) -> None:
    capfd.readouterr()
    before = {p for p in project.rglob("*") if p.is_file()}
    for args in commands(config):
        code, output = cli(capfd, monkeypatch, args)
        assert leaks(output.encode()) == [], (args, output)
        assert "the value is not shown" in output, (args, output)  # refused, named
        assert code == (0 if args[0] == "plugins" else 1), (args, output)  # plugins still lists
    assert leaks(written(project, before | planted)) == []
    code, output = cli(capfd, monkeypatch, ["verify", str(project / "in.jsonl")])
    assert leaks(output.encode()) == []


def echo(status: int) -> Callable[[Any], Any]:
    """A reply that echoes the key it was sent, as misbehaving servers and proxies do."""

    def reply(call: Any) -> Any:
        auth = call.headers.get("authorization", "")
        key = auth.removeprefix("Bearer ")
        body = json.dumps(
            {
                "message": f"invalid credentials {auth}",
                "upper": key.upper(),
                "b64": base64.b64encode(key.encode()).decode(),
                "b64_header": base64.b64encode(f"Authorization: {auth}".encode()).decode(),
                "url": quote(key, safe=""),
                "hex": key.encode().hex(),
            }
        )
        return testing.Reply.error(status, body)

    return reply


def test_a_key_in_its_place_is_not_printed_even_when_the_server_echoes_it(
    project: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend_toml = project / "backend.toml"
    backend_toml.write_text("seed = 5\n[plugin.fake]\nprompt_sensitivity = 0.05\n")
    backend = testing.client_backend("fake", str(backend_toml))
    unauthorised, failing = echo(401), echo(500)

    def reply(call: Any) -> Any:
        purpose = (call.body or {}).get("biasbreaker", {}).get("purpose")
        if "deny" in call.last_user_message:
            return unauthorised(call)
        if purpose == "skeptic":
            return failing(call)
        if purpose in ("diagnoser", "editor"):
            return unauthorised(call)
        return backend(call)

    monkeypatch.setenv("CANARY_API_KEY", CANARY)
    with testing.ChatServer(reply, model="biasbreaker-fake") as server:
        config = project / "endpoint.toml"
        config.write_text(
            '[llm]\nclient = "openai-compatible"\n\n'
            f'[plugin.openai-compatible]\nbase_url = "{server.base_url}"\n'
            'model = "biasbreaker-fake"\napi_key_env = "CANARY_API_KEY"\n'
            "forward_request_fields = true\nmax_retries = 0\nmax_concurrency = 16\n"
            "\n[demo]\nworkers = 1\n"
        )
        outputs = []
        for args in commands(["--config", str(config)]):
            outputs.append((args, *cli(capfd, monkeypatch, args)))
        statuses = {c.body.get("biasbreaker", {}).get("purpose") for c in server.chat_calls}
        echoed = [c for c in server.chat_calls if "deny" in c.last_user_message]
    backend.close()
    assert {"agent", "skeptic"} <= statuses and echoed  # the server did echo the key
    assert all(c.headers["authorization"] == f"Bearer {CANARY}" for c in server.chat_calls)
    for args, _, output in outputs:
        assert leaks(output.encode()) == [], (args, output)
    everything = written(project, {config, backend_toml})
    assert leaks(everything) == []
    # not vacuous: the echoes were recorded, redacted, where a user reads them
    records = [json.loads(x) for x in (project / "run-out/results.jsonl").read_text().splitlines()]
    (denied,) = [r for r in records if r["status"] == "failed"]
    assert "HTTP 401" in denied["error"]["message"] and "<redacted>" in denied["error"]["message"]
    assert b"HTTP 500" in everything and b"<redacted>" in everything
    assert "Traceback" in (project / "run-out/run.log").read_text()
