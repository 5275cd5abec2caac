"""Command arguments that name a trace store by URL: opened through the ``trace_sink`` plugins.

``biasbreaker verify`` and ``calibrate`` take a database URL (``sqlite:///traces.db``,
``postgresql://host/db``) where they take a folder of traces: the store's threads are exported
(:func:`~biasbreaker.trace.export.export_all`) into a temporary folder, one file per thread,
and that folder is read exactly as a folder of file traces, so the verdicts are those of the
exported files. The folder is removed afterwards.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from biasbreaker.cli._common import load_kernel
from biasbreaker.errors import InputError
from biasbreaker.trace.export import export_all
from biasbreaker.trace.sink import LineStore, build_backend, is_url, redact_url, url_scheme


class Location(str):
    """A command argument: a trace file, a folder of them, or a trace store URL.

    Kept as given: a ``Path`` would fold the ``//`` of ``sqlite:///x.db``.
    """

    __slots__ = ()


def open_store(url: str, config: Path | None = None, strict: bool = False) -> LineStore:
    """The line store at ``url``, opened by the ``trace_sink`` its scheme names.

    Exits with status 1 (the message on stderr) when the configuration or plugins fail to load,
    e.g. no installed sink is named after the URL's scheme.

    Raises:
        ConfigError: The URL cannot be opened.
        PluginError: The sink failed to build.
    """
    name = url_scheme(url)
    kernel = load_kernel(config, strict, overrides={"trace": {"sink": name, "url": url}})
    return build_backend(kernel).open_store(url)


@contextmanager
def as_folders(
    arguments: Sequence[str], *, config: Path | None = None, strict: bool = False
) -> Iterator[list[Path]]:
    """The arguments as paths, each URL replaced by a temporary folder of its threads' traces.

    Raises:
        InputError: A store holds no trace.
        TraceError: A stored thread has a gap in its seqs.
    """
    if not any(is_url(a) for a in arguments):
        yield [Path(a) for a in arguments]
        return
    with tempfile.TemporaryDirectory(prefix="biasbreaker-store-") as tmp:
        paths = []
        for index, argument in enumerate(arguments):
            if not is_url(argument):
                paths.append(Path(argument))
                continue
            store = open_store(argument, config, strict)
            try:
                files = export_all(store, Path(tmp) / str(index))
            finally:
                store.close()
            if not files:
                raise InputError(f"{redact_url(argument)} holds no run trace")
            paths.append(Path(tmp) / str(index))
        yield paths


__all__ = ["Location", "as_folders", "open_store"]
