"""The build's output directory: written whole or not at all, and never a folder of the user's.

    OutputDir(out_dir, overwrite, model)   checks, locks and reserves the directory before the build starts
      .write(fill)                         fills a temporary sibling, then swaps it in with renames

The rules, checked before the expensive stages (so nobody waits for a build to be told) and again under the
lock just before the swap:
- an existing directory is replaced only with --force, and only when edgemem made it (it holds ``MARKER``);
  never ``/``, the home directory, the working directory, an ancestor of any of them, the model's folder or
  its ancestors, and never through a symlink (the link's target is someone's folder);
- one build at a time per output directory: a lock file beside it (``.NAME.edgemem-lock``, flock), so a
  second build into the same directory is refused at once instead of deleting the first one's output;
- the old directory survives until the new one is complete: it is renamed aside, the new one renamed in,
  and only then deleted, with SIGINT/SIGTERM held back until then; a signal at any other time
  raises (``Interrupted``), and the temporary directory is removed on the way out.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import EdgememError, ToolchainError, tail

MARKER = ".edgemem-output"  # written in every output directory: what --force may replace
_TMP = ".edgemem-tmp-"  # the infix of a temporary sibling (new build, or the old one on its way out)
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Where a write fails for lack of room or permission: the user's disk, not edgemem (a clear refusal).
_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


class Interrupted(BaseException):
    """SIGINT or SIGTERM during a build (a BaseException, as KeyboardInterrupt: no ``except Exception`` eats it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def check_output_dir(model_path: Path, out_dir: Path) -> None:
    """Replacing the output directory must not delete the model being built (a model kept inside it)."""
    if model_path.resolve().is_relative_to(out_dir.resolve()):
        raise EdgememError(
            f"the model '{model_path}' is inside the output directory '{out_dir}', which the build replaces: it would "
            "be deleted. Choose another directory with -o, or move the model out of it."
        )


def _place(out_dir: Path) -> Path:
    """``out_dir`` with its parent resolved but not its last component (a symlink there is judged, not followed)."""
    out_dir = Path(os.path.abspath(out_dir))
    return out_dir.parent.resolve() / out_dir.name


def _protected(model_path: Path | None) -> dict[Path, str]:
    """Folders --force never replaces: each (resolved) with what it is."""
    places = {Path("/"): "the root directory", Path.cwd().resolve(): "the working directory"}
    with contextlib.suppress(RuntimeError, KeyError):
        places[Path.home().resolve()] = "your home directory"
    if model_path is not None:
        places.setdefault(Path(model_path).resolve().parent, "the model's folder")
    return places


def check_replaceable(out_dir: Path, overwrite: bool, model_path: Path | None = None) -> None:
    """Refuse, with the reason, an output directory the build may not write (see the module doc)."""
    place = _place(out_dir)
    if place.is_symlink():
        raise EdgememError(
            f"output directory '{out_dir}' is a symbolic link (to '{os.readlink(place)}'): edgemem does not write "
            "or replace a link's target, which may be any folder. Give the real directory with -o, or a new name."
        )
    if place.exists() and not place.is_dir():
        raise EdgememError(f"-o '{out_dir}' names a file, not a directory: edgemem writes a project directory there. "
                           "Choose a directory name with -o (an existing file is never replaced).")  # fmt: skip
    _check_parent(out_dir, place.parent)
    if model_path is not None:
        check_output_dir(Path(model_path), place)
    if not place.exists():
        return
    if not overwrite:
        raise EdgememError(
            f"output directory '{place}' already exists; edgemem does not overwrite it silently. "
            "Pass --force to replace it, or choose another directory with -o."
        )
    for protected, what in _protected(model_path).items():
        if protected.is_relative_to(place):
            who = what if protected == place else f"an ancestor of {what} ({protected})"
            raise EdgememError(f"--force would delete '{place}', which is {who}: edgemem never replaces it. "
                               "Choose a new directory for the project with -o.")  # fmt: skip
    if not (place / MARKER).is_file():
        raise EdgememError(
            f"--force replaces only a directory edgemem made, and '{place}' was not (it has no {MARKER} file): "
            "it may hold your own files. Choose another directory with -o, or delete it yourself if it is disposable."
        )


def _check_parent(out_dir: Path, parent: Path) -> None:
    """The folder the project goes into: a directory (or one that can be made) we may write in."""
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise EdgememError(f"cannot create output directory '{out_dir}': '{existing}' is a file, not a directory. "
                           "Choose another path with -o.")  # fmt: skip
    if not os.access(existing, os.W_OK | os.X_OK):
        raise EdgememError(f"cannot create output directory '{out_dir}': '{existing}' is not writable (permission "
                           "denied or a read-only file system). Choose a writable path with -o.")  # fmt: skip


def disk_error(out_dir: Path, exc: OSError) -> EdgememError | None:
    """A clear refusal for a write that failed on the user's disk (full, read-only, no permission), else None."""
    if exc.errno not in _DISK_ERRORS:
        return None
    where = f" ({exc.filename})" if exc.filename else ""
    return EdgememError(f"cannot write output directory '{out_dir}': {exc.strerror}{where}. Free some space or choose "
                        "a writable place with -o; the directory was left as it was.")  # fmt: skip


class OutputDir:
    """The output directory of one build, reserved (checked, locked, a temporary sibling made) on ``__enter__``."""

    def __init__(self, out_dir: str | Path, overwrite: bool = False, model_path: str | Path | None = None):
        self.out_dir = Path(out_dir)
        self.overwrite = overwrite
        self.model_path = None if model_path is None else Path(model_path)
        self.place = _place(self.out_dir)
        self._lock_fd: int | None = None
        self._tmp: Path | None = None
        self._handlers: dict[int, object] = {}

    def __enter__(self) -> OutputDir:
        check_replaceable(self.out_dir, self.overwrite, self.model_path)
        self._raise_on_signals()
        try:
            self._lock()
            check_replaceable(self.out_dir, self.overwrite, self.model_path)  # another build may have finished
            self._remove_stale()
            self._tmp = self._sibling("new")
            (self._tmp / MARKER).write_text("made by edgemem: `edgemem build --force` may replace this directory\n")
        except BaseException as exc:
            self.__exit__(type(exc), exc, None)
            if isinstance(exc, OSError) and disk_error(self.out_dir, exc):
                raise disk_error(self.out_dir, exc) from exc
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
        finally:
            self._unlock()
            self._restore_signals()

    def write(self, fill: Callable[[Path], None], fresh: bool = False) -> None:
        """Run ``fill`` on the temporary sibling, then swap it in; the old directory is deleted only after.
        ``fresh``: the sibling emptied first (but for the marker) -- a refusal's report after a build that failed
        half-way through writing the project leaves none of it."""
        assert self._tmp is not None, "OutputDir.write outside its with block"
        if fresh:
            for path in self._tmp.iterdir():
                if path.name != MARKER:
                    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        try:
            fill(self._tmp)
        except OSError as exc:
            err = disk_error(self.out_dir, exc)
            if err is None:
                raise
            raise err from exc
        except ToolchainError as exc:  # gcc or make ran out of room: the disk's fault, not the toolchain's
            if not any(s in str(exc) for s in ("No space left on device", "Read-only file system", "Disk quota exceeded")):
                raise
            raise EdgememError(f"cannot write output directory '{self.out_dir}': the disk is full or read-only (the "
                               f"compiler said so). Free some space or choose another place with -o; the directory "
                               f"was left as it was.\n{tail(str(exc), 1500)}") from exc  # fmt: skip
        check_replaceable(self.out_dir, self.overwrite, self.model_path)
        if _HELD["received"] is not None:  # interrupted, even if what the signal raised was caught on the way
            raise Interrupted(_HELD["received"])
        with _signals_held():
            old = None
            if self.place.exists():
                old = self._sibling("old", make=False)
                os.rename(self.place, old)
            try:
                os.rename(self._tmp, self.place)
            except OSError:
                if old is not None:
                    os.rename(old, self.place)
                raise
            self._tmp = None
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)

    # ---- the temporary siblings

    def _sibling(self, what: str, make: bool = True) -> Path:
        prefix = f".{self.place.name}{_TMP}{what}-"
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=self.place.parent))
        if not make:
            path.rmdir()  # only the unique name: os.rename needs the target free
        else:
            os.chmod(path, 0o777 & ~_umask())  # mkdtemp's 0700 would make the project private to its builder
        return path

    def _remove_stale(self) -> None:
        """Temporary siblings left by a build that was killed (SIGKILL, power loss): under the lock, none is in use."""
        for path in self.place.parent.glob(f".{glob_escape(self.place.name)}{_TMP}*"):
            if path.is_dir() and not path.is_symlink() and ((path / MARKER).is_file() or not any(path.iterdir())):
                shutil.rmtree(path, ignore_errors=True)

    # ---- one build at a time

    def _lock(self) -> None:
        self.place.parent.mkdir(parents=True, exist_ok=True)
        path = self.place.parent / f".{self.place.name}.edgemem-lock"
        for _ in range(10):  # the holder unlinks the file on release: retry if we locked an unlinked one
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
                os.close(fd)
                raise EdgememError(
                    f"another edgemem build (process {holder}) is writing output directory '{self.place}' right now; "
                    "two builds into one directory would overwrite each other. Wait for it to finish, or choose "
                    "another directory with -o."
                ) from None
            if os.path.exists(path) and os.stat(path).st_ino == os.fstat(fd).st_ino:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._lock_fd, self._lock_path = fd, path
                return
            os.close(fd)
        raise EdgememError(f"could not lock output directory '{self.place}' (its lock file keeps changing); retry.")

    def _unlock(self) -> None:
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._lock_path)  # while still holding it: a waiter then sees another inode and retries
        os.close(self._lock_fd)
        self._lock_fd = None

    # ---- signals

    def _raise_on_signals(self) -> None:
        _HELD["received"] = None
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may install handlers (a library caller's thread keeps its own)
        for signum in _SIGNALS:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:
                continue  # the parent asked for this one to be ignored (nohup, a background job)
            self._handlers[signum] = previous
            signal.signal(signum, _raise_interrupted)

    def _restore_signals(self) -> None:
        for signum, previous in self._handlers.items():
            signal.signal(signum, previous)
        self._handlers = {}


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# During the renames a signal waits (handled in the main thread). "received": a signal arrived during this build;
# the exception it raised may have been swallowed on its way (raised inside a TVM callback, it comes back out of the
# C++ side as an ordinary error, which an importer fallback may catch), so the swap checks the flag itself.
_HELD: dict = {"on": False, "pending": None, "received": None}


def _raise_interrupted(signum, frame) -> None:
    _HELD["received"] = signum
    if _HELD["on"]:
        _HELD["pending"] = signum
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT/SIGTERM wait until the renames (and the old directory's deletion) are done, then raise: the
    directory is never half swapped or half deleted. (A flag, not a signal mask: the mask of the main thread
    would not stop TVM's threads from taking the signal and Python from running the handler here.)"""
    _HELD["on"] = True
    try:
        yield
    finally:
        _HELD["on"] = False
        pending, _HELD["pending"] = _HELD["pending"], None
    if pending is not None:
        raise Interrupted(pending)


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters taken literally."""
    import glob

    return glob.escape(name)


def write_atomically(out_dir: Path, overwrite: bool, fill: Callable[[Path], None], model_path: Path | None = None) -> None:
    """Reserve ``out_dir``, run ``fill`` on a temporary sibling and swap it in (OutputDir, for a one-stage writer)."""
    with OutputDir(out_dir, overwrite, model_path) as target:
        target.write(fill)
