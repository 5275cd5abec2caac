"""The ``--out`` folder of ``demo`` and ``run``: a folder the run owns, and nothing else touched.

A run writes only into a folder that is new, empty, or marked as biasbreaker's by the marker
file :data:`MARKER` (``biasbreaker-output.json``), which an earlier run wrote there. The marker
holds the run's id, the command, its status (``running``, ``complete`` or ``partial``) and
every file and folder the run wrote (or was about to write). So:

* a folder that is not empty and has no marker is refused, before anything is written (the
  user's own files are never replaced; biasbreaker does not pick a sub-folder silently);
* in a marked folder only the files the marker lists are removed or replaced; a file the run
  would write that the marker does not list is refused, naming it;
* the marker is written first (``running``) and rewritten atomically before each batch of
  files is created, so a run cut short at any point leaves it listing what it may have
  written; an interrupted or failed run leaves it ``partial`` with what completed.

Every other file the run writes whole is replaced atomically (:func:`write_atomic`): a reader
never sees half a report, figure or concatenated control file.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal

from biasbreaker.errors import ConfigError

MARKER = "biasbreaker-output.json"
"""The marker file's name, directly inside ``--out``."""

MARKER_KIND = "biasbreaker-output"
MARKER_VERSION = 1

Status = Literal["running", "complete", "partial"]

_NOTE = (
    "biasbreaker wrote the files listed here; a later biasbreaker run into this folder replaces "
    "only them and refuses to overwrite any other file. Keep this file to write into the "
    "folder again."
)
_SHOWN = 5


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Create ``path`` whole or not at all.

    ``write(tmp)`` fills a temporary sibling, which then replaces ``path`` in one rename.

    Args:
        path: The file to create or replace.
        write: Writes the complete content into the path it is given.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> None:
    """:func:`write_atomic` for UTF-8 text with LF line endings."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline="\n"))


def _relative(root: Path, paths: Iterable[str | Path]) -> set[str]:
    """``paths`` relative to ``root``: each is inside it (``root / x``) or already relative."""
    out = set()
    for p in paths:
        path = Path(p)
        try:
            path = path.relative_to(root)
        except ValueError:
            if path.is_absolute():
                raise
        out.add(path.as_posix())
    return out


def _inside(folder: Path, relative: str, *, folder_entry: bool = False) -> bool:
    """Whether the marker entry ``relative`` names a path inside ``folder``.

    Relative, without ``..``, not empty, and its parent, links resolved, inside the folder (a
    listed file may itself be a link: removing a link removes only the link); a listed folder
    (``folder_entry``) must itself resolve inside.
    """
    rel = PurePosixPath(relative.rstrip("/"))
    if not relative.strip("/") or rel.is_absolute() or ".." in rel.parts or "\\" in relative:
        return False
    if PureWindowsPath(relative).drive:
        return False
    root = folder.resolve()
    parent = (folder / rel).resolve() if folder_entry else (folder / rel).parent.resolve()
    return parent == root or root in parent.parents


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class OutputFolder:
    """The folder one ``demo`` or ``run`` owns; build it with :meth:`claim`.

    Args:
        path: The ``--out`` folder.
        command: ``"demo"`` or ``"run"``.
        run_id: This run's id (random, hex; in the marker only, never in a trace or report).
        previous: Files and folders the earlier run's marker lists (relative, POSIX).
        files: Files this run has written or is about to write (relative).
        dirs: Folders this run created (relative).
        status: The marker's current status.
        completed: What completed, for the marker (set by :meth:`finish`).
    """

    path: Path
    command: str
    run_id: str
    previous: frozenset[str] = frozenset()
    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    status: Status = "running"
    completed: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def claim(
        cls,
        path: Path,
        command: str,
        planned: Iterable[str | Path] = (),
        patterns: Iterable[str] = (),
    ) -> OutputFolder:
        """Check that this run may write ``planned`` into ``path``; nothing is written yet.

        Args:
            path: The ``--out`` folder.
            command: ``"demo"`` or ``"run"``.
            planned: Files the run will write, relative to ``path`` (or absolute inside it).
            patterns: Globs (relative to ``path``) of files the run may write whose names are
                not known yet; an existing file that matches one and is not biasbreaker's is
                refused like a planned one.

        Returns:
            The folder, not yet begun (:meth:`begin`).

        Raises:
            ConfigError: ``path`` is a file or lies inside one; it is not empty and has no
                marker; its marker is not biasbreaker's or another live process is writing
                into it; or a planned file exists and the marker does not list it. The
                message names the folder, the files and what to do.
        """
        for parent in (path, *path.parents):
            if parent.is_dir():
                break
            if parent.exists() or parent.is_symlink():
                where = "is a file" if parent == path else f"is inside {parent}, which is a file"
                raise ConfigError(f"--out {path} {where}; give a folder")
        previous: frozenset[str] = frozenset()
        if path.is_dir():
            marker = path / MARKER
            if marker.is_file():
                previous = cls._read_marker(path, marker)
            else:
                entries = sorted(p.name for p in path.iterdir())
                if entries:
                    shown = ", ".join(entries[:_SHOWN]) + (", …" if len(entries) > _SHOWN else "")
                    raise ConfigError(
                        f"--out {path} is not empty ({shown}) and was not written by "
                        f"biasbreaker (it has no {MARKER}); biasbreaker writes only into a new or "
                        "empty folder, or one an earlier biasbreaker run wrote, so your files "
                        "are never replaced. Give another folder, e.g. --out "
                        f"{path / f'biasbreaker-{command}'}"
                    )
        folder = cls(path, command, uuid.uuid4().hex, previous)
        matched = [m for pattern in patterns for m in path.glob(pattern)] if path.is_dir() else []
        folder.check_new([*planned, *matched])
        return folder

    @staticmethod
    def _read_marker(path: Path, marker: Path) -> frozenset[str]:
        try:
            data = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(
                f"--out {path}: {marker} cannot be read as biasbreaker's marker ({exc}); give "
                "another folder, or remove the marker if you know the folder holds only "
                "biasbreaker's outputs"
            ) from exc
        listed = data.get("files") if isinstance(data, dict) else None
        dirs = data.get("dirs", []) if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or data.get("kind") != MARKER_KIND
            or not isinstance(listed, list)
            or not isinstance(dirs, list)
            or not all(isinstance(f, str) for f in [*listed, *dirs])
        ):
            raise ConfigError(
                f"--out {path}: {marker} is not a biasbreaker output marker; give another folder"
            )
        outside = [f for f in listed if not _inside(path, f)]
        outside += [d for d in dirs if not _inside(path, d, folder_entry=True)]
        if outside:
            raise ConfigError(
                f"--out {path}: {marker} lists {outside[0]!r}, which is not a path inside the "
                "folder (absolute, '..', or through a link that leaves it); biasbreaker never "
                "writes such a marker, so nothing was removed; give another folder, or remove "
                "the marker if you know the folder holds only biasbreaker's outputs"
            )
        if data.get("status") == "running" and _pid_alive(data.get("pid")):
            raise ConfigError(
                f"--out {path}: another biasbreaker {data.get('command')} (process "
                f"{data.get('pid')}) is writing into this folder; wait for it to end, or give "
                "another folder"
            )
        return frozenset(listed) | frozenset(f"{d}/" for d in dirs)

    def owns(self, relative: str) -> bool:
        """Whether ``relative`` is listed by the earlier marker or written by this run."""
        return relative in self.previous or relative in self.files

    def check_new(self, planned: Iterable[str | Path]) -> set[str]:
        """Refuse to create a file that exists and is not biasbreaker's.

        Returns:
            ``planned`` as relative POSIX paths.

        Raises:
            ConfigError: Naming every such file.
        """
        relative = _relative(self.path, planned)
        foreign = sorted(
            r
            for r in relative
            if not self.owns(r) and ((self.path / r).exists() or (self.path / r).is_symlink())
        )
        if foreign:
            shown = ", ".join(foreign[:_SHOWN]) + (", …" if len(foreign) > _SHOWN else "")
            raise ConfigError(
                f"--out {self.path}: {len(foreign)} file(s) the {self.command} would write "
                f"exist and were not written by biasbreaker ({shown}; {MARKER} does not list "
                "them); move them, or give another folder"
            )
        return relative

    def begin(self) -> None:
        """Create the folder, remove the earlier run's files, and write the marker (running).

        Only files the earlier marker lists are removed, then the folders it lists, deepest
        first, if they are empty; a user's own file in one of them keeps it.

        Raises:
            ConfigError: The folder cannot be created or written.
        """
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            for rel in sorted((p for p in self.previous if not p.endswith("/")), reverse=True):
                target = self.path / rel
                if target.is_file() or target.is_symlink():
                    target.unlink()
            folders = sorted((p.rstrip("/") for p in self.previous if p.endswith("/")), key=len)
            for rel in reversed(folders):
                target = self.path / rel
                if target.is_dir() and not any(target.iterdir()):
                    target.rmdir()
            self._write_marker()
        except OSError as exc:
            raise ConfigError(f"--out {self.path}: cannot write into the folder: {exc}") from exc
        self.previous = frozenset()

    def plan(self, planned: Iterable[str | Path]) -> None:
        """Record files about to be written (and their folders) in the marker, first.

        Raises:
            ConfigError: A planned file exists and is not biasbreaker's (:meth:`check_new`).
        """
        relative = self.check_new(planned)
        new_dirs = set()
        for rel in relative:
            parent = Path(rel).parent
            while parent != Path("."):
                if not (self.path / parent).exists():
                    new_dirs.add(parent.as_posix())
                parent = parent.parent
        if relative - self.files or new_dirs - self.dirs:
            self.files |= relative
            self.dirs |= new_dirs
            self._write_marker()

    def finish(self, status: Status, completed: Mapping[str, Any] | None = None) -> None:
        """Rewrite the marker with ``status``, what completed, and the files that exist.

        Files planned but never written are dropped from the list.
        """
        self.status = status
        self.completed = dict(completed or {})
        self.files = {f for f in self.files if (self.path / f).exists()}
        self.dirs = {d for d in self.dirs if (self.path / d).is_dir()}
        self._write_marker()

    def marker_data(self) -> dict[str, Any]:
        """The marker's content."""
        return {
            "kind": MARKER_KIND,
            "version": MARKER_VERSION,
            "note": _NOTE,
            "command": self.command,
            "run_id": self.run_id,
            "status": self.status,
            "pid": os.getpid(),
            "completed": self.completed,
            "files": sorted(self.files),
            "dirs": sorted(self.dirs),
        }

    def _write_marker(self) -> None:
        text = json.dumps(self.marker_data(), indent=2, sort_keys=True, ensure_ascii=False)
        write_text_atomic(self.path / MARKER, text + "\n")


__all__ = [
    "MARKER",
    "OutputFolder",
    "Status",
    "write_atomic",
    "write_text_atomic",
]
