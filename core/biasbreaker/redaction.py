"""Redaction: one rule for every text biasbreaker writes, so a secret is never printed.

Messages, log records, tables, traces, reports and exceptions all go through the same rule. A
value is hidden (replaced by :data:`REDACTED`) when

1. **its key names a secret**: a word of the key (split at ``_``, ``-``, ``.``, spaces and
   camelCase humps) is one of :data:`SECRET_WORDS` (``key``, ``token``, ``secret``,
   ``password``, ``authorization``, ``bearer``, ``credential``…) or ends in one glued on
   (``PGPASSWORD``, ``PGPASS``, ``DBPWD``; not ``bypass``), in any case and at any depth of
   a table, header tables included; a key whose *last* word says it holds the name or place of
   a secret (:data:`NOT_SECRET_LAST`: ``api_key_env``, ``token_file``…) is shown, and so is a
   bare ``key`` (a configuration key or a record's identity in biasbreaker's own data);
2. **it looks like a credential**: a provider key prefix (``sk-``, ``ghp_``, ``xoxb-``,
   ``AKIA``…), an HTTP authorization value (``Bearer …``, ``Basic …``), a JSON Web Token, URL
   user info (``https://user:pass@host``), a URL query parameter named for a secret
   (``?password=``, ``?token=``, ``?key=``, ``?sig=``, ``?code=``: :data:`QUERY_SECRET_WORDS`),
   or a long random-looking string (24 or more letters,
   digits, ``+`` and ``/`` mixing upper case, lower case and digits without a long word in it);
3. **it is a secret this process knows**: registered by a client (:func:`register_secret`) or
   the value of an environment variable whose name names a secret (``OPENAI_API_KEY``,
   :func:`register_environment`), in its common encodings too: any letter case, base64
   (standard and URL-safe, at any alignment inside a longer base64 text), URL-encoding, hex
   and JSON escapes.

Rule 2 and 3 apply to free text (:func:`redact_text`); rule 1 needs the structure
(:func:`redact_value`), and in free text covers ``name = value``, ``name: value`` and
``"name": "value"``. Hex digests (sha256 of traces and payloads) are never redacted: they have
no upper-case letters.

The command line wraps its standard streams (:func:`redacting_streams`), so whatever reaches
the screen, tracebacks included, is redacted; files biasbreaker writes are redacted by their
writers (:func:`redact_text`, :func:`redact_value`), log files by :class:`RedactingFormatter`.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, TextIO
from urllib.parse import quote, quote_plus, unquote

REDACTED = "<redacted>"
"""What a hidden value is replaced by."""

SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "pass",
        "pw",
        "creds",
        "cred",
        "authorization",
        "auth",
        "bearer",
        "credential",
        "credentials",
        "cookie",
        "privatekey",
    }
)
"""Words that make a key name a secret (compared in lower case)."""

GLUED_SECRET_ENDS = ("password", "passwd", "passphrase", "secret", "apikey", "token")
"""Endings that make a word a secret's name with no separator before them (``PGPASSWORD``,
``REDISPASSWORD``, ``csrftoken``); of the shorter secret words only ``pass`` and ``pwd`` do
too (:data:`GLUED_SHORT_ENDS`), the others (``pw``, ``key``) count only as words of their
own, so ``monkey`` is no secret."""

GLUED_SHORT_ENDS = ("pass", "pwd")
"""Short endings that make a word a secret's name glued on (``PGPASS``, ``DBPASS``,
``DBPWD``, ``MYSQLPWD``, ``keytool``'s ``storepass``), unless the word is one of
:data:`NOT_GLUED_SECRETS`. No English word ends in ``pwd``; the English words ending in
``pass`` are listed there, so an unknown glued ``…pass`` is read as a secret (hidden, not
shown)."""

NOT_GLUED_SECRETS = frozenset(
    {
        "allpass",
        "bandpass",
        "bypass",
        "compass",
        "encompass",
        "flypass",
        "highpass",
        "keepass",
        "lowpass",
        "multipass",
        "onepass",
        "overpass",
        "singlepass",
        "surpass",
        "trespass",
        "twopass",
        "underpass",
        "oldpwd",
    }
)
"""Words ending in a :data:`GLUED_SHORT_ENDS` ending that name no secret: English words and
filters (``bypass``, ``compass``, ``lowpass``), the KeePass password manager (its files'
names), and the shell's previous working directory (``OLDPWD``)."""

NOT_SECRET_LAST = frozenset(
    {"env", "var", "variable", "name", "names", "file", "path", "dir", "directory", "sock"}
)
"""A secret-named key whose last word is one of these holds where a secret is, not the secret:
``api_key_env = "OPENAI_API_KEY"`` is shown."""

ERROR_LAST = frozenset({"error", "exception", "warning"})
"""A name whose last word is one of these is an exception class, not a key: in
``KeyError: 'decision'`` or ``TokenError: expired`` what follows is the error's message (the
missing key's name, a reason), shown; a credential in it is still found by its look (rule 2)."""

SHELL_DIRECTORIES = frozenset({"PWD", "OLDPWD"})
"""Environment variables the shell sets to directories, whose names read as a secret's
(``pwd`` is also short for password): registering them hid the working directory in every
path printed."""

MIN_SECRET_LENGTH = 8
"""Known secrets shorter than this are not registered (they would hide ordinary words)."""

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def key_words(name: str) -> list[str]:
    """The words of a key name, lower-cased: ``bearerToken`` -> ``["bearer", "token"]``."""
    return [w.lower() for w in _WORD.findall(name)]


def secret_name(name: str) -> bool:
    """Whether a key named ``name`` holds a secret (rule 1).

    Only the last dotted segment counts: ``plugin.openai-compatible.api_key`` is secret,
    ``plugin.openai-compatible.api_key_env`` is not, and ``headers.Authorization`` is.

    Args:
        name: A key, or a dotted key path.

    Returns:
        True when a word of the key is in :data:`SECRET_WORDS` or ends in one glued on
        (:data:`GLUED_SECRET_ENDS`, :data:`GLUED_SHORT_ENDS`) and its last word is not in
        :data:`NOT_SECRET_LAST` or :data:`ERROR_LAST` (an exception class). A bare ``key``
        is not a secret's name: in biasbreaker's own data it names a configuration key or a
        record's identity (``"key": "assess@2"``); ``api_key``, ``private_key``,
        ``access_key`` are; a credential stored under a bare ``key`` is still found by its
        look (rule 2).
    """
    words = key_words(str(name).rpartition(".")[2])
    if not words or words[-1] in NOT_SECRET_LAST or words[-1] in ERROR_LAST or words == ["key"]:
        return False
    return any(_secret_word(w) for w in words) or "".join(words) in SECRET_WORDS


def _secret_word(word: str) -> bool:
    """Whether one word of a key names a secret: a secret word, or one glued onto a stem."""
    if word in SECRET_WORDS or word.endswith(GLUED_SECRET_ENDS):
        return True
    return word.endswith(GLUED_SHORT_ENDS) and word not in NOT_GLUED_SECRETS


_PREFIXES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"(?:sk|rk|pk)-[A-Za-z0-9_\-]{16,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"
    r"|gsk_[A-Za-z0-9]{20,}"
    r"|r8_[A-Za-z0-9]{20,}"
    r"|nvapi-[A-Za-z0-9_\-]{20,}"
    r"|pplx-[A-Za-z0-9]{20,}"
    r")",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*")
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)([^\s/@?#]+)@")
_USER_PASSWORD = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@?#:]*:[^\s/@?#]*@")
"""URL user info with a password (``user:password@``). A user name alone
(``postgresql://root@host/db``) is no credential: it is still hidden in free text, like all
user info, but not refused in the configuration; a token given as the user name is caught by
the provider-prefix and random-string rules."""
_QUERY_PARAM = re.compile(r"(?P<lead>[?&](?P<name>[A-Za-z][A-Za-z0-9_.\-]*)=)(?P<value>[^&#\s]+)")
"""A URL query parameter, ``?name=value`` or ``&name=value``."""
_RANDOM = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/])")
_ASSIGNMENT = re.compile(
    r"""(?P<q1>["']?)(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q1)\s*[:=]\s*"""
    r"""(?=(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;)}\]'"=:]+))"""
)
"""``name = value``, ``name: value``, ``"name": "value"``; the value is matched ahead only, so
``ValueError: token=abc`` also finds ``token=abc``."""
_LOWER_RUN = re.compile(r"[a-z]{8,}")
_UPPER_RUN = re.compile(r"[A-Z]{8,}")


def _random_looking(text: str) -> bool:
    """Rule 2's last clause: mixed case and digits, no run of 8 letters of one case."""
    upper = sum(c.isupper() for c in text)
    lower = sum(c.islower() for c in text)
    digits = sum(c.isdigit() for c in text)
    if upper < 2 or lower < 2 or digits < 2:
        return False
    return not _LOWER_RUN.search(text) and not _UPPER_RUN.search(text)


def credential_kind(text: str) -> str | None:
    """What credential ``text`` contains (rule 2, and rule 3's known secrets), or ``None``.

    Args:
        text: Any text.

    Returns:
        A short description for messages ("a provider's API key", "URL user info", …), or
        ``None`` when nothing in it looks like a credential.
    """
    if _KNOWN.pattern_matches(text):
        return "a secret this process holds"
    if _USER_PASSWORD.search(text):
        return "URL user info (user:password@)"
    if any(_query_secret(m) for m in _QUERY_PARAM.finditer(text)):
        return "a secret in a URL query parameter (password, key, sig, token and the like)"
    if _AUTH_SCHEME.search(text):
        return "an HTTP authorization value"
    if _JWT.search(text):
        return "a JSON Web Token"
    if _PREFIXES.search(text):
        return "a provider's API key"
    if any(_random_looking(m.group(0)) for m in _RANDOM.finditer(text)):
        return "a long random string"
    return None


QUERY_SECRET_WORDS = frozenset(
    {"key", "sig", "signature", "code", "hmac", "sas", "jwt", "otp", "session", "sessionid"}
)
"""Last words of a URL query parameter's name that make it a secret there, on top of rule 1:
``?key=`` (an API key, SQLCipher's key; a bare ``key`` is no secret's name elsewhere),
``?sig=`` (an Azure SAS token's signature), ``X-Amz-Signature``, ``X-Goog-Signature``,
``?code=`` (an OAuth authorization code), a session id."""


def _query_secret(match: re.Match[str]) -> bool:
    """Whether a URL query parameter carries a secret (``?password=…``, ``?key=…``).

    Its name names one (rule 1: ``token``, ``access_token``, ``client_secret``, ``apikey``,
    ``x-api-key``, ``auth``…), ends in ``password`` (libpq's ``sslpassword``), or its last word
    is one of :data:`QUERY_SECRET_WORDS` (``key``, ``sig``, ``signature``, ``code``…).
    """
    name = match.group("name")
    words = key_words(name)
    return (
        secret_name(name)
        or name.lower().endswith("password")
        or (bool(words) and words[-1] in QUERY_SECRET_WORDS)
    )


def _redact_query(match: re.Match[str]) -> str:
    return f"{match.group('lead')}{REDACTED}" if _query_secret(match) else match.group(0)


def _redact_assignments(text: str) -> str:
    """Rule 1 in free text: the value after a secret-named ``name =`` or ``name:``."""
    out: list[str] = []
    last = 0
    for match in _ASSIGNMENT.finditer(text):
        name, value = match.group("name"), match.group("value")
        if not secret_name(name):
            continue
        start = match.start("value")
        if start < last or REDACTED in value:
            continue
        quote_char = value[0] if value[:1] in ("'", '"') else ""
        out += [text[last:start], f"{quote_char}{REDACTED}{quote_char}"]
        last = match.end("value")
    return "".join(out) + text[last:] if out else text


_PUBLIC: set[str] = set()
"""Values known to be public that rule 2 would hide as random strings (:func:`register_public`)."""


def register_public(value: str) -> None:
    """Let ``value``, which is public, be printed although it looks random (rule 2's last clause).

    For an Ed25519 *public* key (``biasbreaker keygen`` prints it): 44 characters of base64,
    which rule 2 takes for a credential. Only the whole value, matched as a whole random-looking
    run, is shown; a secret this process holds (rule 3) is hidden even if registered here.
    """
    _PUBLIC.add(value)


def _redact_random(match: re.Match[str]) -> str:
    text = match.group(0)
    return REDACTED if _random_looking(text) and text not in _PUBLIC else text


def redact_text(text: str) -> str:
    """``text`` with every secret in it replaced by :data:`REDACTED`.

    Rules 2 and 3, and rule 1 for ``name = value``, ``name: value`` and ``"name": "value"``.

    Args:
        text: Any text: a message, a log line, a server's reply, a report.

    Returns:
        The text, unchanged where nothing looks secret.
    """
    if not text:
        return text
    text = _KNOWN.redact(text)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _QUERY_PARAM.sub(_redact_query, text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _JWT.sub(REDACTED, text)
    text = _PREFIXES.sub(REDACTED, text)
    text = _redact_assignments(text)
    return _RANDOM.sub(_redact_random, text)


def redact_value(value: Any, key: str = "") -> Any:
    """``value`` with every secret hidden, recursively (rules 1 to 3).

    A mapping's values under secret-named keys (:func:`secret_name`) become :data:`REDACTED`
    whatever they are (a nested table too); other strings go through :func:`redact_text`;
    lists and tuples are redacted item by item; other values are kept.

    Args:
        value: A JSON-like value: a record, a table, a row's value.
        key: The key (or dotted key path) ``value`` is stored under, ``""`` for none.

    Returns:
        A redacted copy (mappings become dicts, tuples lists); the input is not modified.
    """
    if key and secret_name(key) and value not in (None, "", [], {}):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _base64_fragments(secret: bytes) -> set[str]:
    """Substrings that base64 text of anything containing ``secret`` contains, at any offset."""
    fragments = set()
    for offset, skip in ((0, 0), (1, 2), (2, 3)):
        data = b"\0" * offset + secret
        data = data[: len(data) - len(data) % 3]
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            fragment = encode(data).decode("ascii")[skip:]
            if len(fragment) >= MIN_SECRET_LENGTH:
                fragments.add(fragment)
    return fragments


class _KnownSecrets:
    """The secrets this process holds, and their encodings, as two compiled patterns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._scanned: set[tuple[str, str]] = set()
        self.environ_seen: dict[Any, Any] | None = None
        """A copy of ``os.environ``'s raw mapping as of the last completed scan of it."""
        self._caseless: re.Pattern[str] | None = None
        self._exact: re.Pattern[str] | None = None

    def add(self, secret: str) -> None:
        secret = secret.strip()
        if len(secret) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if secret in self._secrets:
                return
            self._secrets.add(secret)
            self._compile()

    def scanned(self, name: str, value: str) -> bool:
        """Whether environment variable ``name`` = ``value`` was scanned (:meth:`mark`)."""
        return (name, value) in self._scanned

    def mark(self, name: str, value: str) -> None:
        """Remember that ``name`` = ``value`` was scanned, after its secrets were added."""
        with self._lock:
            self._scanned.add((name, value))

    def clear(self) -> None:
        with self._lock:
            self._secrets.clear()
            self._scanned.clear()
            self.environ_seen = None
            self._compile()

    def _compile(self) -> None:
        caseless: set[str] = set()
        exact: set[str] = set()
        for secret in self._secrets:
            raw = secret.encode("utf-8")
            caseless.update(
                {
                    secret,
                    quote(secret, safe=""),
                    quote(secret),
                    quote_plus(secret),
                    raw.hex(),
                    json.dumps(secret)[1:-1],
                    secret.encode("unicode_escape").decode("ascii"),
                }
            )
            exact.update(_base64_fragments(raw))
        self._caseless = _alternation(caseless, re.IGNORECASE)
        self._exact = _alternation(exact, 0)

    def pattern_matches(self, text: str) -> bool:
        caseless, exact = self._caseless, self._exact
        return bool(
            (caseless is not None and caseless.search(text))
            or (exact is not None and exact.search(text))
        )

    def redact(self, text: str) -> str:
        caseless, exact = self._caseless, self._exact
        if caseless is not None:
            text = caseless.sub(REDACTED, text)
        if exact is not None:
            text = exact.sub(REDACTED, text)
        return text


def _alternation(parts: set[str], flags: int) -> re.Pattern[str] | None:
    if not parts:
        return None
    ordered = sorted(parts, key=lambda p: (-len(p), p))  # longest first: a copy wins over a part
    return re.compile("|".join(re.escape(p) for p in ordered), flags)


_KNOWN = _KnownSecrets()


def register_secret(value: str) -> None:
    """Add ``value`` to the secrets this process holds (rule 3): never printed from now on.

    Clients call this with the key they read (the variable ``api_key_env`` names). Values
    shorter than :data:`MIN_SECRET_LENGTH` are ignored.
    """
    _KNOWN.add(value)


def register_environment(environ: Mapping[str, str] | None = None) -> None:
    """Register the environment's secrets (rule 3).

    The value of every variable whose name names a secret (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN``, ``DB_PASSWORD``, ``PGPASS``…: :func:`secret_name` on the name), and the
    password of URL user info in any variable's value (``DATABASE_URL=postgresql://u:pw@h/db``
    registers ``pw``, URL-decoded), so a key is redacted even where biasbreaker never reads it.

    Called by the command line, by :class:`~biasbreaker.kernel.Kernel`, by
    :class:`~biasbreaker.machine.ControlMachine` and by the LangGraph ``guard()``, so often:
    a ``(name, value)`` pair scanned once is skipped until :func:`forget_secrets`, an
    unchanged mapping costs one set lookup per variable, and an ``os.environ`` unchanged since
    its last scan (its raw mapping compared with a copy kept then) is not read at all.

    Args:
        environ: The environment; ``None`` reads ``os.environ``. :data:`SHELL_DIRECTORIES`
            are skipped.
    """
    raw: dict[Any, Any] | None = None
    if environ is None:
        # os.environ's own mapping (encoded names -> encoded values); every change made
        # through os.environ (set, change, delete) changes it, so an equal copy means nothing
        # to scan. A platform without it is scanned every time.
        raw = getattr(os.environ, "_data", None)
        if type(raw) is not dict:
            raw = None
        elif raw == _KNOWN.environ_seen:
            return
        else:
            raw = dict(raw)  # taken before the scan: a change made during it is seen next call
    env = os.environ if environ is None else environ
    for name, value in list(env.items()):
        if name in SHELL_DIRECTORIES or _KNOWN.scanned(name, value):
            continue
        if secret_name(name.replace("__", ".")) or secret_name(name):
            register_secret(value)
        for password in _url_passwords(value):
            register_secret(password)
        _KNOWN.mark(name, value)
    if raw is not None:
        _KNOWN.environ_seen = raw


_URL_AUTHORITY = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://([^\s/?#]+)")
"""A URL's authority (``user:password@host:port``), up to its path, query or fragment."""


def _url_passwords(value: str) -> list[str]:
    """The passwords of URL user info in ``value``, as written and URL-decoded.

    The user info ends at the authority's last ``@`` (as in ``urllib.parse``), so a password
    holding an unencoded ``@`` is found whole.
    """
    found: list[str] = []
    for match in _URL_AUTHORITY.finditer(value):
        userinfo, at, _ = match.group(1).rpartition("@")
        _, colon, password = userinfo.partition(":")
        if at and colon and password:
            found += [password, unquote(password)]
    return found


def forget_secrets() -> None:
    """Forget every registered secret, and which environment variables were scanned (tests)."""
    _KNOWN.clear()


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what it is given, line by line, before passing it on.

    Text is held until a newline or :meth:`flush`, so a secret split across two ``write``
    calls of one line is still found. Everything else (``isatty``, ``fileno``, ``encoding``)
    is the wrapped stream's.

    Args:
        inner: The stream written to.
    """

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner
        self._pending = ""
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The wrapped stream's encoding."""
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        """The wrapped stream's error handler."""
        return getattr(self.inner, "errors", None)

    def writable(self) -> bool:
        """Always writable."""
        return True

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal."""
        return self.inner.isatty()

    def fileno(self) -> int:
        """The wrapped stream's file descriptor."""
        return self.inner.fileno()

    def write(self, text: str) -> int:
        """Redact and pass on every whole line of ``text``; keep the rest for later.

        Raises:
            TypeError: ``text`` is not a ``str`` (bytes would bypass redaction).
        """
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            data = self._pending + text
            head, newline, rest = data.rpartition("\n")
            if newline:
                self.inner.write(redact_text(head + newline))
                self._pending = rest
            else:
                self._pending = data
        return len(text)

    def flush(self) -> None:
        """Redact and pass on what is held, then flush the wrapped stream."""
        with self._lock:
            if self._pending:
                self.inner.write(redact_text(self._pending))
                self._pending = ""
        self.inner.flush()


@contextmanager
def redacting_streams() -> Iterator[None]:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`RedactingStream` for the block.

    Also registers the environment's secrets (:func:`register_environment`). The streams are
    flushed and restored on the way out.
    """
    register_environment()
    saved = sys.stdout, sys.stderr
    out, err = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        for stream in (out, err):
            with suppress(OSError, ValueError):
                stream.flush()
        sys.stdout, sys.stderr = saved


class RedactingFormatter(logging.Formatter):
    """A logging formatter whose output, traceback included, goes through :func:`redact_text`."""

    def format(self, record: logging.LogRecord) -> str:
        """Format ``record`` as usual, then redact it."""
        return redact_text(super().format(record))


__all__ = [
    "MIN_SECRET_LENGTH",
    "NOT_SECRET_LAST",
    "QUERY_SECRET_WORDS",
    "REDACTED",
    "SECRET_WORDS",
    "RedactingFormatter",
    "RedactingStream",
    "credential_kind",
    "forget_secrets",
    "key_words",
    "redact_text",
    "redact_value",
    "redacting_streams",
    "register_environment",
    "register_public",
    "register_secret",
    "secret_name",
]
