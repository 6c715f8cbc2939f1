"""The output directory never loses a user's files (issue 30): --force replaces only a directory edgemem made,
never the working or home directory, a folder of the user's or a symlink's target; two builds into one
directory cannot clobber each other; SIGINT/SIGTERM leave the old directory whole and no temporary siblings.

Each test makes its own hostile situation in a temporary directory and checks the files are still there,
byte for byte, after the CLI refused (or was stopped).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgemem import pipeline
from edgemem.errors import EdgememError
from edgemem.project_dir import MARKER, OutputDir, check_replaceable

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
USAGE = 2
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env or ENV)  # fmt: skip


def _popen(*args: str, cwd: Path) -> subprocess.Popen:
    """The CLI in the background; SIGINT at its default (a background job may inherit it ignored)."""
    return subprocess.Popen([sys.executable, "-m", "edgemem.cli", *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip


def _wait_for_line(proc: subprocess.Popen, phrase: str, seen: list[str]) -> None:
    """Read the build's stderr until a line with ``phrase`` (a finished stage: "done C sources")."""
    for line in proc.stderr:
        seen.append(line)
        if phrase in line:
            return
    raise AssertionError(f"the build ended before {phrase!r}:\n{''.join(seen)}")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(parent: Path) -> list[str]:
    """Temporary siblings or lock files a build left beside its output directory."""
    return sorted(p.name for p in parent.iterdir() if "edgemem-tmp" in p.name or "edgemem-lock" in p.name
                  or p.name.startswith(".out."))  # fmt: skip


def _refused(p: subprocess.CompletedProcess, *phrases: str) -> str:
    assert p.returncode == USAGE, f"exit {p.returncode}; stderr:\n{p.stderr}"
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, p.stderr
    for phrase in phrases:
        assert phrase in errors[0], f"{phrase!r} not in: {errors[0]}"
    assert "done" not in p.stderr, f"refused only after building:\n{p.stderr}"  # refused before the first stage
    return errors[0]


def _user_folder(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "thesis.tex").write_text("four years of work\n")
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data" / "results.csv").write_text("a,b\n1,2\n")
    return _snapshot(folder)


# ---- --force never replaces what edgemem did not make


def test_force_refuses_the_working_directory(tmp_path):
    cwd = tmp_path / "work"
    before = _user_folder(cwd)
    _refused(_cli("build", str(EXAMPLE), "-o", ".", "--force", cwd=cwd), "the working directory")
    assert _snapshot(cwd) == before


def test_force_refuses_the_home_directory_and_its_ancestors(tmp_path):
    home = tmp_path / "home" / "user"
    before = _user_folder(home)
    env = {**ENV, "HOME": str(home)}
    _refused(_cli("build", str(EXAMPLE), "-o", str(home), "--force", cwd=tmp_path, env=env), "your home directory")
    _refused(_cli("build", str(EXAMPLE), "-o", str(home.parent), "--force", cwd=tmp_path, env=env), "an ancestor of your home")
    assert _snapshot(home) == before


def test_force_refuses_a_folder_edgemem_did_not_make(tmp_path):
    mine = tmp_path / "mine"
    before = _user_folder(mine)
    _refused(_cli("build", str(EXAMPLE), "-o", str(mine), "--force", cwd=tmp_path), "only a directory edgemem made", MARKER)
    assert _snapshot(mine) == before


def test_force_refuses_a_symlink_and_keeps_its_target(tmp_path):
    target = tmp_path / "target"
    before = _user_folder(target)
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    _refused(_cli("build", str(EXAMPLE), "-o", str(link), "--force", cwd=tmp_path), "symbolic link")
    assert link.is_symlink() and _snapshot(target) == before


def test_force_refuses_the_models_folder_and_its_ancestors(tmp_path):
    models = tmp_path / "a" / "models"
    models.mkdir(parents=True)
    shutil.copy(EXAMPLE, models / "m.tflite")
    (models / MARKER).write_text("")  # even marked: the model's folder is never replaced
    with pytest.raises(EdgememError, match="model"):
        check_replaceable(models, True, models / "m.tflite")
    with pytest.raises(EdgememError, match="model"):
        check_replaceable(tmp_path / "a", True, models / "m.tflite")
    assert (models / "m.tflite").read_bytes() == EXAMPLE.read_bytes()


def test_force_replaces_an_edgemem_directory_whole(tmp_path):
    out = tmp_path / "out"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(compile=False, opt_seconds=0))
    assert (out / MARKER).is_file() and (out / "edgemem.json").is_file()
    (out / "stale.txt").write_text("from the old build")
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(compile=False, opt_seconds=0, overwrite=True))
    assert (out / MARKER).is_file() and not (out / "stale.txt").exists()
    assert json.loads((out / "edgemem.json").read_text())["board"] == "mps2-an386"
    assert _leftovers(tmp_path) == []
    umask = os.umask(0o022)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask  # as mkdir would make it, not mkdtemp's private 0700


def test_existing_directory_is_refused_before_the_build(tmp_path):
    out = tmp_path / "out"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(compile=False, opt_seconds=0))
    before = _snapshot(out)
    _refused(_cli("build", str(EXAMPLE), "-o", str(out), cwd=tmp_path), "already exists", "--force")
    assert _snapshot(out) == before


def test_output_naming_a_file_or_under_a_file_is_refused(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("keep me\n")
    _refused(_cli("build", str(EXAMPLE), "-o", str(f), "--force", cwd=tmp_path), "names a file")
    _refused(_cli("build", str(EXAMPLE), "-o", str(f / "sub"), cwd=tmp_path), "is a file, not a directory")
    assert f.read_text() == "keep me\n"


def _make_read_only(folder: Path) -> None:
    """chmod for a user; root ignores permissions, so the immutable attribute there (or skip)."""
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        folder.chmod(0o755)
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("running as root without chattr: cannot make a read-only folder")


def test_read_only_parent_is_a_clear_refusal(tmp_path):
    parent = tmp_path / "ro"
    parent.mkdir()
    _make_read_only(parent)
    try:
        p = _cli("build", str(EXAMPLE), "-o", str(parent / "out"), cwd=tmp_path)
        _refused(p, str(parent / "out"))
        assert list(parent.iterdir()) == []
    finally:
        subprocess.run(["chattr", "-i", str(parent)], capture_output=True)
        parent.chmod(0o755)


@pytest.mark.parametrize("size", ["64k", "400k"])  # full while Python writes the sources / while gcc writes objects
def test_full_disk_is_a_clear_refusal(tmp_path, size):
    """A small tmpfs (root only) fills during the build: one paragraph, exit 2, nothing left."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        p = _cli("build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(disk / "out"), "--opt-time", "0", cwd=tmp_path)
        assert p.returncode == USAGE, p.stderr
        assert "Traceback" not in p.stderr and "No space left on device" in p.stderr, p.stderr
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


# ---- one build at a time per directory


def test_concurrent_builds_into_one_directory(tmp_path):
    """The second build is refused while the first runs (before: both exited 0, one deleting the other's)."""
    out = tmp_path / "out"
    first = _popen("build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(out), cwd=tmp_path)
    seen: list[str] = []
    try:
        _wait_for_line(first, "done", seen)
        second = _cli("build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(out), cwd=tmp_path)
        assert second.returncode == USAGE, second.stderr
        assert "another edgemem build" in second.stderr and str(first.pid) in second.stderr, second.stderr
        rest = first.communicate(timeout=600)[1]
    finally:
        first.kill()
        first.wait()
    assert first.returncode == 0, "".join(seen) + rest
    assert json.loads((out / "edgemem.json").read_text())["board"] == "mps2-an386"
    assert _leftovers(tmp_path) == []


def test_lock_is_released_and_a_killed_builds_temporary_is_swept(tmp_path):
    out = tmp_path / "out"
    stale = tmp_path / ".out.edgemem-tmp-new-x1"  # as a SIGKILLed build leaves it
    stale.mkdir()
    (stale / MARKER).write_text("")
    with OutputDir(out) as target:
        with pytest.raises(EdgememError, match="another edgemem build"):
            OutputDir(out).__enter__()
        target.write(lambda d: (d / "x").write_text("1"))
    assert (out / "x").read_text() == "1" and (out / MARKER).is_file()
    assert _leftovers(tmp_path) == []


# ---- signals


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_a_forced_build_keeps_the_old_directory(tmp_path, signum):
    out = tmp_path / "out"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(compile=False, opt_seconds=0))
    (out / "notes.txt").write_text("the old build's directory\n")
    before = _snapshot(out)
    proc = _popen("build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(out), "--force", cwd=tmp_path)
    seen: list[str] = []
    try:
        _wait_for_line(proc, "done C sources", seen)  # the firmware stage (make) runs in the temporary sibling now
        assert _leftovers(tmp_path), "no temporary directory while the build runs?"
        proc.send_signal(signum)
        rest = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 128 + signum, "".join(seen) + rest
    assert "interrupted" in rest and "Traceback" not in rest, rest
    assert _snapshot(out) == before
    assert _leftovers(tmp_path) == []


def test_sigint_while_the_old_directory_is_replaced_never_leaves_it_half_deleted(tmp_path):
    """A large old directory (deleting it takes a while): SIGINT the moment the swap starts. Before, the old
    directory was deleted in place and the signal left it half deleted with the new build gone."""
    out = tmp_path / "out"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(compile=False, opt_seconds=0))
    bulk = out / "bulk"
    bulk.mkdir()
    for i in range(20000):
        (bulk / f"{i}.txt").write_text("x")
    old_inode = out.stat().st_ino
    proc = _popen("build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(out), "--force", "--opt-time", "0", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                changed = out.stat().st_ino != old_inode or len(os.listdir(bulk)) < 20000
            except FileNotFoundError:
                changed = True
            if changed:
                proc.send_signal(signal.SIGINT)
                break
            time.sleep(0.002)
        proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode in (0, 130), proc.returncode
    if (out / "bulk").exists():  # the old directory, whole
        assert len(os.listdir(out / "bulk")) == 20000 and out.stat().st_ino == old_inode
    else:  # or the new one, whole
        assert (out / MARKER).is_file() and json.loads((out / "edgemem.json").read_text())["board"] == "mps2-an386"
        assert (out / "firmware.elf").is_file()
    assert _leftovers(tmp_path) == []


def test_a_signal_whose_exception_was_swallowed_still_stops_the_swap(tmp_path):
    """A SIGINT that lands inside a TVM callback raises there, but the exception comes back out of TVM's C++ side as
    an ordinary error, which a fallback may catch: on main the build then completed and exited 0 (1 run in 8 with
    a real SIGINT during import). The handler's flag stops the swap: no new directory, the old one kept."""
    from edgemem import project_dir

    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_text("made by edgemem\n")
    (out / "old.txt").write_text("old build")

    def fill(tmp: Path) -> None:
        (tmp / "new.txt").write_text("new build")
        try:  # what Python does when the signal arrives: run the handler, which raises...
            project_dir._raise_interrupted(signal.SIGINT, None)
        except BaseException:  # noqa: BLE001 - ... and something on the way swallows it
            pass

    with pytest.raises(project_dir.Interrupted):
        with OutputDir(out, overwrite=True) as o:
            o.write(fill)
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "old.txt"])
    assert _leftovers(tmp_path) == []
