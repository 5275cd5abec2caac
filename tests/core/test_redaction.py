"""The one redaction rule (biasbreaker.redaction) and the refusal of secrets in the configuration."""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from pydantic import BaseModel

import biasbreaker.redaction as redaction
from biasbreaker.config import Settings, load_settings
from biasbreaker.errors import ConfigError, PluginLoadError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.plugins import PluginHost
from biasbreaker.redaction import (
    REDACTED,
    RedactingFormatter,
    RedactingStream,
    credential_kind,
    forget_secrets,
    redact_text,
    redact_value,
    register_environment,
    register_secret,
    secret_name,
)
from biasbreaker.types import Thresholds

QUERY_KIND = "a secret in a URL query parameter (password, key, sig, token and the like)"

# no provider prefix, so only rule 3 (a secret this process knows) can find its encodings
KNOWN = "Zq8/Tr+Kx7mP2vL9wQ4nB6yH3jD5fG1s"


@pytest.fixture(autouse=True)
def _no_known_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("API_KEY", True),
        ("token", True),
        ("bearer_token", True),
        ("headers.Authorization", True),
        ("auth_header", True),
        ("client_secret", True),
        ("DB_PASSWORD", True),
        ("credentials", True),
        ("plugin.openai-compatible.api_key", True),
        ("api_key_env", False),
        ("token_file", False),
        ("SSH_AUTH_SOCK", False),
        ("max_tokens", False),
        ("keyword", False),
        ("tokenizer", False),
        ("top_k", False),
        ("author", False),
        ("key", False),
        ("private_key", True),
        ("KeyError", False),
        ("TokenError", False),
        ("AuthenticationError", False),
        ("PrivateKeyException", False),
        ("CredentialWarning", False),
        ("DB_PASS", True),
        ("SMTP_PASS", True),
        ("ACME_CREDS", True),
        ("db_cred", True),
        ("pw", True),
        ("bypass", False),
        ("PGPASSWORD", True),
        ("REDISPASSWORD", True),
        ("csrftoken", True),
        ("monkey", False),
        ("PGPASS", True),  # libpq's password file's variable is PGPASSFILE; this one holds one
        ("DB_PGPASS", True),
        ("PGPASSFILE", False),
        ("PGPASS_FILE", False),
        ("DBPASS", True),
        ("DBPWD", True),
        ("MYSQLPWD", True),
        ("CURLOPT_USERPWD", True),
        ("storepass", True),
        ("compass", False),
        ("encompass", False),
        ("BYPASS_CACHE", False),
        ("lowpass_cutoff", False),
        ("OLDPWD", False),
        ("passthrough", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


def _option_names(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for field, info in model.model_fields.items():
        yield f"{prefix}{field}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _option_names(annotation, f"{prefix}{field}.")


def test_no_shipped_option_is_named_like_a_secret() -> None:
    # such an option could never be set: a file or a BIASBREAKER_ variable setting it is refused
    host = PluginHost()
    names = list(_option_names(Settings))
    for impl in host.build_registry():
        names += [f"plugin.{impl.name}.{n}" for n in _option_names(impl.options)]
    assert len(names) > 100
    assert [n for n in names if secret_name(n)] == []


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////tmp/bbx.db?key=k1x9s2",  # SQLCipher's key
        "https://maps.example/api?key=k1x9s2&q=a",  # an API key (Google's ?key=)
        "https://acct.blob.example/c/b?sv=2022-11-02&se=2030&sp=r&sig=k1x9s2",  # Azure SAS
        "https://h/o?X-Amz-Credential=k1x9s2&X-Amz-Signature=k1x9s2",  # S3 presigned
        "https://h/o?X-Goog-Signature=k1x9s2",
        "https://h/cb?code=k1x9s2&state=s",  # OAuth authorization code
        "https://h/v1?signature=k1x9s2",
        "https://h/v1?token=k1x9s2",
        "https://h/v1?access_token=k1x9s2",
        "https://h/v1?secret=k1x9s2",
        "https://h/v1?auth=k1x9s2",
        "https://h/v1?apikey=k1x9s2",
        "https://h/v1?x-api-key=k1x9s2",
        "https://h/v1?client_secret=k1x9s2",
        "https://h/v1?subscription-key=k1x9s2",
    ],
)
def test_a_url_query_parameter_named_for_a_secret_is_one(url: str) -> None:
    """``key``, ``sig``, ``signature``, ``code`` and the like, not only ``password``."""
    assert credential_kind(url) == QUERY_KIND
    shown = redact_text(f"cannot open {url}: refused")
    assert "k1x9s2" not in shown and REDACTED in shown
    assert redact_value({"url": url})["url"] == redact_text(url)


def test_ordinary_url_query_parameters_are_shown() -> None:
    url = "https://h/v1?page=2&sslmode=require&q=keyword&monkey=1&state=s"
    assert credential_kind(url) is None
    assert redact_text(url) == url


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("sk-proj-abcdefghijklmnop1234", "a provider's API key"),
        ("SK-PROJ-ABCDEFGHIJKLMNOP1234", "a provider's API key"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123", "a provider's API key"),
        ("AKIAABCDEFGHIJKLMNOP", "a provider's API key"),
        ("Bearer abcdefgh12345", "an HTTP authorization value"),
        ("https://me:hunter22@example.com/v1", "URL user info (user:password@)"),
        (
            "postgresql://h/db?password=hunter22",
            QUERY_KIND,
        ),
        (
            "postgresql://h/db?sslmode=require&sslpassword=hunter22",
            QUERY_KIND,
        ),
        (
            "https://h/v1?page=2&api_token=hunter22",
            QUERY_KIND,
        ),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "a JSON Web Token",
        ),
        ("a3F9kL2mQ8xZ7vB1nC4dE6gH", "a long random string"),
    ],
)
def test_credential_looking_values(text: str, kind: str) -> None:
    assert credential_kind(text) == kind
    assert text not in redact_text(f"reply: {text}.")


def test_the_refusal_of_a_query_secret_survives_its_own_redaction() -> None:
    # the kind is printed through redaction: it must not itself look like a query secret
    kind = credential_kind("postgresql://h/db?password=hunter22")
    assert kind is not None and redact_text(f"trace.url: the value looks like {kind}") == (
        f"trace.url: the value looks like {kind}"
    )


def test_a_user_name_in_a_url_is_hidden_but_is_no_credential() -> None:
    # libpq's postgresql://user@host/db: refusing it in [trace] url left no way to name a user
    url = "postgresql://root@127.0.0.1:5432/test"
    assert credential_kind(url) is None
    assert redact_text(url) == "postgresql://<redacted>@127.0.0.1:5432/test"
    assert credential_kind("https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com") is not None
    assert credential_kind("https://h/v1?page=2&api_key_env=OPENAI_API_KEY") is None


@pytest.mark.parametrize(
    "text",
    [
        "sha256 " + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "thread 3fa85f64-5717-4562-b3fc-2c963f66afa6",
        "model meta-llama/Llama-3.2-1B-Instruct at http://127.0.0.1:11434/v1",
        "OpenAICompatibleClientFactory2x3y is not an LLMClient",
        "/work/wt/safety/core/biasbreaker/config/sources.py:42",
        "breaker.tau_enter = 0.42 (biasbreaker.toml)",
        'api_key_env = "OPENAI_API_KEY"',
        '{"key": "breaker.tau_enter", "value": 0.3, "source": "default"}',
        "task-abcdefghijklmnopqrstuvwxyz is done",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert credential_kind(text) is None
    assert redact_text(text) == text


def _encodings(secret: str) -> list[str]:
    raw = secret.encode()
    wrapped = [b"Authorization: Bearer " + raw, b"x" + raw + b"yz", b"ab" + raw]
    return [
        secret,
        secret.upper(),
        secret.lower(),
        quote(secret, safe=""),
        quote_plus(secret),
        raw.hex(),
        raw.hex().upper(),
        json.dumps(secret)[1:-1],
        *(base64.b64encode(w).decode() for w in [raw, *wrapped]),
        *(base64.urlsafe_b64encode(w).decode() for w in [raw, *wrapped]),
    ]


def test_a_known_secret_is_found_in_every_common_encoding() -> None:
    encodings = _encodings(KNOWN)
    assert credential_kind(KNOWN.encode().hex()) is None  # a hex copy needs rule 3
    register_secret(KNOWN)
    for encoded in encodings:
        out = redact_text(f"server said: {encoded} (HTTP 401)")
        assert encoded not in out and REDACTED in out, encoded
        assert credential_kind(encoded) is not None


def test_the_environment_registers_variables_named_like_secrets() -> None:
    register_environment({"MY_SERVICE_TOKEN": KNOWN, "HOME": "/home/someone-long"})
    assert redact_text(f"got {KNOWN.lower()}") == f"got {REDACTED}"
    assert redact_text("/home/someone-long") == "/home/someone-long"


def test_values_under_secret_keys_are_hidden_at_any_depth() -> None:
    value = {
        "model": "m",
        "headers": {"Authorization": "Bearer x", "Accept": "application/json"},
        "credentials": {"user": "u", "pin": 1234},
        "rows": [{"token": "t0k3n"}, "sk-abcdefghijklmnopqrstu"],
        "api_key_env": "OPENAI_API_KEY",
        "max_tokens": 12,
        "token": None,
    }
    assert redact_value(value) == {
        "model": "m",
        "headers": {"Authorization": REDACTED, "Accept": "application/json"},
        "credentials": REDACTED,
        "rows": [{"token": REDACTED}, REDACTED],
        "api_key_env": "OPENAI_API_KEY",
        "max_tokens": 12,
        "token": None,
    }


def test_name_value_pairs_in_text_are_redacted() -> None:
    text = "unknown key plugin.x.bearer_token = 'abc' ({'password': 'hunter2'}; secret=s3)"
    assert redact_text(text) == (
        f"unknown key plugin.x.bearer_token = '{REDACTED}' ({{'password': '{REDACTED}'}}; "
        f"secret={REDACTED})"
    )


def test_the_stream_redacts_a_secret_split_across_writes() -> None:
    inner = io.StringIO()
    stream = RedactingStream(inner)  # type: ignore[arg-type]
    stream.write("key sk-abcdefghij")
    stream.write("klmnopqrst and more\nnext ")
    assert inner.getvalue() == f"key {REDACTED} and more\n"
    stream.flush()
    assert inner.getvalue().endswith("next ")
    with pytest.raises(TypeError):
        stream.write(b"bytes would bypass redaction")  # type: ignore[arg-type]


def test_log_records_and_tracebacks_are_redacted() -> None:
    formatter = RedactingFormatter("%(message)s")
    try:
        raise ValueError("token=abcdefgh1 sk-abcdefghijklmnopqrstu")
    except ValueError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed", None, None)
        import sys

        record.exc_info = sys.exc_info()
    text = formatter.format(record)
    assert "ValueError" in text and "abcdefgh1" not in text and "sk-abc" not in text


def test_biasbreaker_errors_never_hold_a_secret() -> None:
    register_secret(KNOWN)
    error = ConfigError(f"server replied {base64.b64encode(KNOWN.encode()).decode()}")
    assert KNOWN not in str(error) and REDACTED in str(error)
    load = PluginLoadError("p", "d", "1", RuntimeError("Bearer abcdefghijk"))
    assert "abcdefghijk" not in str(load)


CANARY = "sk-canary-" + "Zq8Tr4Kx7mP2vL9wQ4nB6yH3jD5fG1s"


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        (f'[plugin.openai-compatible]\nbearer_token = "{CANARY}"\n', "bearer_token"),
        (
            f'[plugin.openai-compatible]\nheaders = {{Authorization = "Bearer {CANARY}"}}\n',
            "headers.Authorization",
        ),
        (f'[llm]\napi_key = "{CANARY}"\n', "llm.api_key"),
        (f'[plugin.openai-compatible]\napi_key_env = "{CANARY}"\n', "api_key_env"),
        (
            f'[plugin.openai-compatible]\nbase_url = "http://me:{CANARY}@127.0.0.1:1/v1"\n',
            "base_url",
        ),
        (f'[plugin.x]\nrows = [{{secret = "{CANARY}"}}]\n', "rows[0].secret"),
    ],
)
@pytest.mark.parametrize("where", ["--config", "biasbreaker.toml", "pyproject.toml"])
def test_a_secret_in_any_file_is_refused_by_name(
    isolated_config: Path, toml: str, key: str, where: str
) -> None:
    config = None
    if where == "pyproject.toml":
        toml = toml.replace("[", "[tool.biasbreaker.", 1)
        (isolated_config / "pyproject.toml").write_text(toml)
    else:
        path = isolated_config / ("explicit.toml" if where == "--config" else where)
        path.write_text(toml)
        config = path if where == "--config" else None
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    message = str(info.value)
    assert key in message and "the value is not shown" in message
    assert CANARY not in message and CANARY[10:30] not in message


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BIASBREAKER_LLM__API_KEY", CANARY),
        ("BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__AUTH_HEADER", f"Bearer {CANARY}"),
        ("BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__API_KEY_ENV", CANARY),
        ("BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__HEADERS", json.dumps({"X": f"Bearer {CANARY}"})),
    ],
)
def test_a_secret_in_a_biasbreaker_variable_is_refused_naming_the_variable(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert f"(env {variable})" in str(info.value)
    assert CANARY not in str(info.value)


def test_an_exception_message_after_its_class_name_is_shown() -> None:
    """``KeyError: 'decision'`` names the missing key; redacting it hid the error's cause."""
    assert redact_text("KeyError: 'decision'") == "KeyError: 'decision'"
    assert redact_text("TokenError: the token expired") == "TokenError: the token expired"
    # a credential in the message is still found by its look
    leaked = "AuthError: sk-" + "A1b2C3d4E5f6G7h8J9k0"
    assert "A1b2C3d4" not in redact_text(leaked)
    assert redact_text("api_key: hunter22x") == "api_key: <redacted>"


def test_the_shell_s_working_directory_is_not_a_secret() -> None:
    """``PWD`` names a password by its words, but the shell sets it to the working directory."""
    forget_secrets()
    try:
        register_environment(
            {"PWD": "/tmp/trialapp/cfg", "OLDPWD": "/tmp/trialapp", "DB_PWD": "hunter22x!"}
        )
        assert redact_text("trace /tmp/trialapp/cfg/a.jsonl") == "trace /tmp/trialapp/cfg/a.jsonl"
        assert "hunter22x!" not in redact_text("connecting with hunter22x!")
    finally:
        forget_secrets()


@pytest.mark.parametrize("key", ["api_kay", "openai_api_kye", "client_secrt", "azure_kee", "x"])
def test_an_unknown_key_never_shows_its_value(tmp_path: Path, key: str) -> None:
    # a misspelt secret name is no secret name: a new user's "api_kay" was echoed in the error
    (tmp_path / "biasbreaker.toml").write_text(f'[llm]\n{key} = "Pa55word2024"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path / "biasbreaker.toml")
    assert f"unknown key llm.{key} (" in str(info.value)
    assert "Pa55word2024" not in str(info.value)


def test_an_unknown_plugin_option_never_shows_its_value(tmp_path: Path) -> None:
    (tmp_path / "biasbreaker.toml").write_text(
        '[probe]\nscorers = ["lexical"]\n[plugin.lexical]\nsecrt = "Pa55word2024"\n'
    )
    kernel = Kernel.load(tmp_path / "biasbreaker.toml")
    text = " ".join(kernel.check_build())
    assert "unknown key plugin.lexical.secrt (" in text and "Pa55word2024" not in text


def test_a_pass_or_creds_variable_is_a_secret_of_the_environment() -> None:
    register_environment({"DB_PASS": "hunter2hunter2", "ACME_CREDS": "s3cr3t-value-99"})
    out = redact_text("connect failed: hunter2hunter2 / s3cr3t-value-99")
    assert "hunter2" not in out and "s3cr3t" not in out


def test_pgpassword_is_a_secret_of_the_environment() -> None:
    # docs/configuration.md puts the trace store's password in PGPASSWORD; a node's error
    # quoting it reached stderr, run.log, results.jsonl and report.md under `biasbreaker run`
    register_environment({"PGPASSWORD": "zX9secretVal12"})
    assert "zX9secretVal12" not in redact_text("connect failed: v=zX9secretVal12")


def test_an_unchanged_environment_is_not_scanned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # guard(), every Kernel and every ControlMachine register the environment: it must be cheap
    scanned: list[str] = []

    def counting(name: str) -> bool:
        scanned.append(name)
        return secret_name(name)

    monkeypatch.setattr(redaction, "secret_name", counting)
    environ = {"ACME_TOKEN": "first-token-value", "HOME": "/home/someone"}
    register_environment(environ)
    first = len(scanned)
    register_environment(environ)
    assert first > 0 and len(scanned) == first
    register_environment({**environ, "ACME_TOKEN": "second-token-value"})
    assert len(scanned) > first  # only the changed variable is scanned again
    assert redact_text("second-token-value") == REDACTED


def test_a_changed_variable_is_registered_on_the_next_scan() -> None:
    register_environment({"ACME_TOKEN": "first-token-value"})
    register_environment({"ACME_TOKEN": "second-token-value"})
    out = redact_text("tried first-token-value, then second-token-value")
    assert out == f"tried {REDACTED}, then {REDACTED}"


def test_forgetting_the_secrets_forgets_what_was_scanned() -> None:
    environ = {"ACME_TOKEN": "first-token-value"}
    register_environment(environ)
    forget_secrets()
    assert redact_text("first-token-value") == "first-token-value"
    register_environment(environ)  # the same environment is scanned again
    assert redact_text("first-token-value") == REDACTED


def test_the_process_environment_is_scanned_again_after_every_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an unchanged os.environ is not read again; a secret set, changed, removed and set again
    # after a first scan is still found on the next call
    monkeypatch.delenv("ACME_TOKEN", raising=False)
    register_environment()
    monkeypatch.setenv("ACME_TOKEN", "first-token-value")
    register_environment()
    assert redact_text("first-token-value") == REDACTED
    monkeypatch.setenv("ACME_TOKEN", "second-token-value")
    register_environment()
    assert redact_text("second-token-value") == REDACTED
    forget_secrets()
    register_environment()  # the same environment, read again after forgetting
    assert redact_text("second-token-value") == REDACTED
    monkeypatch.delenv("ACME_TOKEN")
    register_environment()
    forget_secrets()
    register_environment()
    assert redact_text("second-token-value") == "second-token-value"
    monkeypatch.setenv("ACME_TOKEN", "second-token-value")
    register_environment()
    assert redact_text("second-token-value") == REDACTED
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:S3cretPass@db.internal/loans")
    register_environment()
    assert redact_text("S3cretPass") == REDACTED


def test_an_unchanged_process_environment_is_not_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scanned: list[str] = []

    def counting(name: str) -> bool:
        scanned.append(name)
        return secret_name(name)

    monkeypatch.setattr(redaction, "secret_name", counting)
    monkeypatch.setenv("ACME_TOKEN", "first-token-value")
    register_environment()
    register_environment()
    scanned.clear()
    monkeypatch.setattr(redaction._KNOWN, "scanned", lambda name, value: False)
    register_environment()  # would scan every variable again if os.environ were read
    assert scanned == []
    monkeypatch.setenv("ACME_TOKEN", "second-token-value")
    register_environment()
    assert "ACME_TOKEN" in scanned


def test_the_password_of_a_url_in_any_variable_is_a_secret() -> None:
    # DATABASE_URL names no secret; an error quoting only its password leaked it
    register_environment(
        {
            "DATABASE_URL": "postgresql://app:S3cretPass@db.internal:5432/loans",
            "BROKER_URL": "amqp://worker:p%40ss-w0rd-9@mq/",
            "CACHE_URL": "redis://:Hunter2Hunter2@cache:6379/0",
            "MIRROR_URL": "https://mirror-user@example.org/simple",
        }
    )
    out = redact_text("auth failed for S3cretPass; p@ss-w0rd-9; p%40ss-w0rd-9; Hunter2Hunter2")
    assert out == f"auth failed for {REDACTED}; {REDACTED}; {REDACTED}; {REDACTED}"
    assert redact_text("mirror-user and app") == "mirror-user and app"  # user names stay


@pytest.mark.parametrize(
    "construct",
    [
        lambda tmp_path: Kernel.load(cwd=tmp_path),
        lambda tmp_path: ControlMachine(MachineConfig(Thresholds(0.5, 0.35, 0.25, 0.05))),
    ],
    ids=["Kernel", "ControlMachine"],
)
def test_the_library_api_registers_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, construct: Any
) -> None:
    # not only the command line: guard() and an application's own kernel or machine do too
    monkeypatch.setenv("MY_DB_PASSWORD", "Hunter2Hunter2")
    construct(tmp_path)
    assert redact_text("login failed: Hunter2Hunter2") == f"login failed: {REDACTED}"
