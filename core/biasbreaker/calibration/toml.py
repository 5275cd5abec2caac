"""Writing calibrated thresholds and window statistics into a user's TOML file, in its style.

Source:
    ``docs/control.md`` §5 "Writing the result".
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping, MutableMapping
from datetime import date
from pathlib import Path
from typing import Any, Final

from biasbreaker.calibration.thresholds import CalibrationReport

PYPROJECT_NAME: Final = "pyproject.toml"


def write_calibration_toml(
    path: str | os.PathLike[str],
    report: CalibrationReport,
    *,
    calibrated_on: date,
    source_sha256: str,
) -> None:
    """Write calibrated thresholds and window statistics into a TOML configuration file.

    Sets ``[breaker] tau_enter, tau_exit, tau_warn, node_trip`` (the trigger the thresholds
    were calibrated for) and ``[calibration] target_false_halt_rate, calibrated_on,
    source_sha256`` and ``[calibration.control] mean, std, n_steps``. In a file named
    ``pyproject.toml`` these tables go under ``[tool.biasbreaker]``, where biasbreaker reads
    them. The file is edited with tomlkit, which keeps its style: everything but these keys
    (comments, blank lines, inline arrays, key order, other tools' tables) stays byte for
    byte as it was. A key that exists gets its new value in place (a comment on its line
    stays); a missing key or table is added in its parent's style (inline inside an inline
    table, as dotted keys under a dotted key, else as a ``[table]``). A file whose lines all end
    in CRLF keeps CRLF, the added lines too. A missing file is created; a missing folder is an
    error.

    The new text is validated first by loading it as biasbreaker would
    (:func:`biasbreaker.config.load_settings`, from a temporary directory, with this process's
    ``BIASBREAKER_*`` environment), so a key the file already had wrong (``tau_entre``) or a
    value out of range is reported instead of producing a file that does not load, and every
    written value is read back from the file as the loader sees it (``[tool.biasbreaker]`` of a
    ``pyproject.toml``), so a value that would not take effect is refused. Then it is
    written to a temporary file in the same directory and moved over the target atomically
    (keeping the target's permission bits; a symbolic link stays a link and the file it points
    to is replaced): on any error the original file is unchanged.

    Args:
        path: The TOML file, e.g. ``biasbreaker.toml`` or ``pyproject.toml``.
        report: The calibration.
        calibrated_on: The date to record (pass it explicitly: no clock is read here).
        source_sha256: SHA-256 of the control trajectories the calibration used.

    Raises:
        ConfigError: If the file's folder does not exist, the existing file is not valid
            TOML, the result would not load or would not set a written key (the message names
            the key and says the file was left unchanged), or it cannot be written.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from biasbreaker.config import PYPROJECT_TABLE
    from biasbreaker.errors import ConfigError

    file = Path(path)
    target = file.resolve() if file.is_symlink() else file  # write through a link, keep it
    if not target.parent.is_dir():
        raise ConfigError(
            f"{file}: cannot write the calibration: the folder {target.parent} does not exist; "
            "create it first or give a file in an existing folder (nothing was written)"
        )
    pyproject = file.name == PYPROJECT_NAME
    where = f"{file} [tool.biasbreaker]" if pyproject else str(file)
    original = ""
    if target.exists():
        try:  # bytes, decoded without newline translation: CRLF line endings stay CRLF
            original = target.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file}: cannot update it, it is not readable: {exc}") from exc
    try:
        document = tomlkit.parse(original)
    except TOMLKitError as exc:
        raise ConfigError(f"{file}: cannot update it, it is not readable TOML: {exc}") from exc
    tau_enter, tau_exit, tau_warn = report.thresholds
    written: dict[str, Any] = {
        "breaker": {
            "tau_enter": tau_enter,
            "tau_exit": tau_exit,
            "tau_warn": tau_warn,
            "node_trip": report.node_trip,
        },
        "calibration": {
            "target_false_halt_rate": report.target_false_halt_rate,
            "calibrated_on": calibrated_on,
            "source_sha256": source_sha256,
            "control": dict(report.statistics.to_json()),
        },
    }
    edits: dict[str, Any] = written
    for key in reversed(PYPROJECT_TABLE if pyproject else ()):
        edits = {key: edits}
    created: list[Any] = []
    try:
        for key, values in edits.items():
            _put(document, key, values, file, created)
    except ConfigError:
        raise
    except (TOMLKitError, ValueError) as exc:  # tomlkit raises both for what it cannot add
        raise ConfigError(
            f"{where}: cannot write the calibration into this file's layout ({exc}); write "
            "[breaker] and [calibration] as ordinary tables (the file was left unchanged)"
        ) from exc
    # tomlkit separates the tables it adds by a blank line, but not the last one from a header
    # that follows it (an added [tool.biasbreaker.breaker] before [tool.black]): add that one,
    # and drop it again at the end of the file, which keeps the original's ending
    if created and not created[-1].as_string().endswith("\n\n"):
        created[-1].add(tomlkit.nl())
    text = tomlkit.dumps(document)
    # tomlkit keeps the file's own line endings but ends the lines it adds with LF
    eol = "\r\n" if "\r\n" in original and "\n" not in original.replace("\r\n", "") else "\n"
    if eol == "\r\n":
        text = re.sub(r"(?<!\r)\n", "\r\n", text)
    if text.endswith(eol * 2) and not original.endswith(eol * 2):
        text = text.rstrip("\r\n") + eol
    name = file.name if pyproject else "calibrated.toml"
    _check_loads(text, name, pyproject, where, written)
    _replace_atomically(target, text, file)


def _put(
    parent: MutableMapping[str, Any],
    key: str,
    values: Mapping[str, Any],
    file: Path,
    created: list[Any],
    dotted: bool = False,
) -> None:
    """Set ``values`` (a nested mapping: a mapping value is a sub-table) in ``parent[key]``.

    Each table is edited in the file's own style. An existing one (``[t]``, ``t = { ... }``
    or dotted ``t.k = v``) is updated in place. A missing one is added as an inline table
    inside an inline table, as dotted keys (``calibration.control.mean = ...``) under a
    dotted-key table (``dotted``), or else as a ``[table]`` (appended to ``created``).

    Raises:
        ConfigError: If a key on the way holds a value that is not a table.
    """
    import tomlkit
    from tomlkit.items import InlineTable, Item

    from biasbreaker.config import PYPROJECT_TABLE
    from biasbreaker.errors import ConfigError

    if key not in parent:
        if isinstance(parent, InlineTable):
            _set_inline(parent, key, tomlkit.inline_table())
        elif dotted:  # parent was written as ``name.key = value``: continue that way
            for path, value in _nested_leaves(values, (key,)):
                parent.append(tomlkit.key(list(path)), value)  # type: ignore[attr-defined]
            return
        else:
            # [tool] and [tool.biasbreaker] are only written as the prefix of the tables below
            parent[key] = tomlkit.table(is_super_table=key in PYPROJECT_TABLE)
            created.append(parent[key])
    table = parent[key]
    if not isinstance(table, MutableMapping):
        shown = table.unwrap() if isinstance(table, Item) else table
        raise ConfigError(
            f"{file}: cannot write the calibration: {key!r} is {shown!r}, not a table; fix "
            "the file (the file was left unchanged)"
        )
    dotted = dotted or _is_dotted(parent, key)
    for name, value in values.items():
        if isinstance(value, Mapping):
            _put(table, name, value, file, created, dotted)
        elif isinstance(table, InlineTable):
            _set_inline(table, name, value)
        else:
            table[name] = value


def _nested_leaves(
    values: Mapping[str, Any], prefix: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(key path, value) for every non-mapping value in the nested ``values``."""
    for name, value in values.items():
        if isinstance(value, Mapping):
            yield from _nested_leaves(value, (*prefix, name))
        else:
            yield (*prefix, name), value


def _set_inline(table: Any, key: str, value: Any) -> None:
    """Set ``table[key]`` in a tomlkit inline table; a new key goes before its closing space.

    ``{ a = 1 }`` becomes ``{ a = 1, b = 2 }``: the space before ``}`` is lifted off, the key
    appended (``append`` puts ``", "`` before it) and the space put back after it.
    """
    from tomlkit.items import Whitespace

    if key in table:
        table[key] = value
        return
    body = table.value.body
    closing = None
    if body and body[-1][0] is None:
        last = body[-1][1]
        if isinstance(last, Whitespace) and "," not in last.s:
            closing = body.pop()[1]
    table.append(key, value)
    if closing is not None:
        table.value.append(None, closing)


def _is_dotted(parent: Mapping[str, Any], key: str) -> bool:
    """Whether ``parent`` holds ``key`` as a dotted key (``key.sub = value``)."""
    container = getattr(parent, "value", parent)  # a tomlkit Table wraps a Container
    body = getattr(container, "body", ())
    return any(k is not None and k.key == key and k.is_dotted() for k, _ in body)


def _check_loads(
    text: str,
    name: str,
    pyproject: bool,
    where: str,
    written: Mapping[str, Any],
) -> None:
    """Load ``text`` as biasbreaker would (as ``pyproject.toml`` or via ``--config``).

    Then read every value in the nested ``written`` back from the file as the
    loader sees it: a value missing or different there (written outside
    ``[tool.biasbreaker]``, say) would silently not take effect, so it is refused.
    """
    from biasbreaker.config import _file_layers, load_settings
    from biasbreaker.errors import ConfigError

    with tempfile.TemporaryDirectory(prefix="biasbreaker-calibrate-") as tmp:
        candidate = Path(tmp) / name
        candidate.write_bytes(text.encode("utf-8"))
        config_file = None if pyproject else candidate
        try:
            load_settings(config_file, cwd=tmp)
            layers = _file_layers(config_file, Path(tmp))
        except ConfigError as exc:
            message = str(exc).replace(str(candidate), where)
            raise ConfigError(
                f"{where}: the calibrated configuration would not load, so the file was left "
                f"unchanged: {message}"
            ) from exc
    data: Any = layers[0][1] if layers else {}
    for path, value in _nested_leaves(written, ()):
        found: Any = data
        for part in path:
            found = found.get(part) if isinstance(found, Mapping) else None
        if found != value or type(found) is not type(value):
            raise ConfigError(
                f"{where}: the calibrated file would not set {'.'.join(path)} (it would read "
                f"back as {found!r}, not {value!r}); the file's layout is one this command "
                "cannot edit safely, so it was left unchanged: write [breaker] and "
                "[calibration] as ordinary tables and run it again"
            )


def _replace_atomically(file: Path, text: str, named: Path) -> None:
    """Write ``text`` to ``file`` via a temporary file beside it; errors name ``named``."""
    from biasbreaker.errors import ConfigError

    existed = file.exists()
    unchanged = "the file was left unchanged" if existed else "nothing was written"
    temporary, handle = _create_beside(file, named, unchanged)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if existed:
            os.chmod(temporary, file.stat().st_mode & 0o7777)
        os.replace(temporary, file)
    except OSError as exc:
        raise ConfigError(
            f"{named}: cannot write the calibrated configuration ({unchanged}): "
            f"{exc.strerror or exc}"
        ) from exc
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _create_beside(file: Path, named: Path, unchanged: str) -> tuple[Path, int]:
    """Create a new empty file next to ``file`` (mode 0o666 less the umask); (path, fd)."""
    from biasbreaker.errors import ConfigError

    for attempt in range(100):
        temporary = file.with_name(f".{file.name}.{os.getpid()}-{attempt}.tmp")
        try:
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            # the error is about the temporary file: say what it means for the folder
            raise ConfigError(
                f"{named}: cannot write the calibrated configuration ({unchanged}): cannot "
                f"create a file in {file.parent}: {exc.strerror or exc}"
            ) from exc
    raise ConfigError(
        f"{named}: cannot write the calibrated configuration: 100 temporary files "
        f".{file.name}.{os.getpid()}-*.tmp already exist next to it; remove them"
    )


__all__ = ["PYPROJECT_NAME", "write_calibration_toml"]
