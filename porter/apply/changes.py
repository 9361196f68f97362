"""A planned set of file edits: shown as status lines and a diff, applied all or nothing.

Nothing else in porter writes to the checkout. `apply` guarantees that every target file is,
at every instant, byte-identical to its old or to its new text, whatever happens to the
process (an error, Ctrl-C, SIGKILL, a full disk):

1. refuse read-only targets before anything is written;
2. stage: write each new text to a temporary file beside its target and fsync it;
3. check: re-read every target; if one changed since it was planned (edited, renamed away,
   deleted, created), remove the temporary files and refuse (stale plan);
4. commit: `os.replace` each temporary file onto its target (atomic per file); if a replace
   fails, the targets already replaced get their old text back, so the tree ends all old or
   all new.

Ctrl-C and SIGTERM are held back while `apply` runs (it takes milliseconds) and act once it
returns. Only SIGKILL or a power cut can stop it between two replaces. Each file is still
whole (its new text is fsynced before the rename, so not even a power cut leaves a renamed but
empty file; directories are not fsynced, so a power cut may undo a rename, which leaves that
file old and whole), but some files are new and some old, and temporary files may be left.

No journal completes such a run; re-running the command does. Planning is idempotent per file
(an edit already present is "identical"), and files are replaced in the order they were
planned, except those a planner marks `apply_last` (the text a re-run plans from, such as the
implementation a migration deletes), so a kill leaves a prefix of that order done;
tests/reliability re-plans every such prefix of every editing command. The next `apply` in the
checkout deletes the temporary files a killed run left; a lock on the checkout root tells them
from those of a porter still running. Not kept across the rename: hard links to a target and
extended attributes (permissions and, where allowed, owner are kept).

PORTER_FAULT (tests/reliability only) injects faults at numbered steps of `apply`; see
`_Faults`. When it is unset the hook costs two environment lookups per `apply`.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from porter.errors import PorterError
from porter.source import checkout as co
from porter.apply.linediff import unified_diff_text

TMP_SUFFIX = ".porter-tmp"
# Where porter's commands write: a run sweeps these for a killed run's temporary files even
# when it writes elsewhere (or nothing).
WRITTEN_DIRS = (co.NATIVE, co.KERNELS, co.OPERATIONS, co.MPS_FALLBACK.rsplit("/", 1)[0],
                co.TESTING, co.OPINFO_DEFINITIONS)
LOCK_WAIT_S = 5.0


class FileChange(NamedTuple):
    path: str          # relative to the checkout root
    old: str | None    # None: the file does not exist yet
    new: str

    @property
    def status(self) -> str:
        if self.old is None:
            return "create"
        return "identical" if self.old == self.new else "update"

    def diff(self) -> str:
        if self.old == self.new:
            return ""
        out = []
        for line in unified_diff_text(self.old or "", self.new,
                                 "/dev/null" if self.old is None else f"a/{self.path}",
                                 f"b/{self.path}"):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        return "".join(out)


class ChangeSet:
    def __init__(self, root: Path):
        self.root = root
        self.changes: dict[str, FileChange] = {}
        self.last: list[str] = []          # replaced after the others, in order

    def set(self, path: str, old: str | None, new: str) -> None:
        """Record the final text of `path`; `old` is its text when planning began."""
        if path in self.changes:
            old = self.changes[path].old
        self.changes[path] = FileChange(path, old, new)

    def apply_last(self, path: str) -> None:
        """Replace `path` after every other file. A planner marks so a file whose old text a
        re-run plans from (the implementation a migration deletes): a kill between two replaces
        then leaves it old, and the re-run still finds what it needs."""
        if path not in self.last:
            self.last.append(path)

    def current(self, path: str, read) -> str:
        """The planned text of `path` so far, else what `read(path)` returns."""
        change = self.changes.get(path)
        return change.new if change else read(path)

    @property
    def pending(self) -> list[FileChange]:
        return [c for c in self.changes.values() if c.status != "identical"]

    def __bool__(self) -> bool:
        return bool(self.pending)

    def status_lines(self) -> list[str]:
        return [f"{c.status:>9}  {c.path}" for c in self.changes.values()]

    def diff(self) -> str:
        return "".join(c.diff() for c in self.pending)

    def _in_apply_order(self) -> list[FileChange]:
        pending = {c.path: c for c in self.pending}
        last = [pending.pop(p) for p in self.last if p in pending]
        return [*pending.values(), *last]

    def apply(self) -> list[str]:
        """Write every pending change, all or nothing. Returns the paths written."""
        pending = self._in_apply_order()
        faults = _Faults.from_env()
        root = Path(self.root)
        targets = [_Target(c, _real_target(root / c.path)) for c in pending]
        dirs = ({root / d for d in WRITTEN_DIRS} | {t.path.parent for t in targets}
                | {(root / c.path).parent for c in self.changes.values()})
        if not pending:             # nothing to write: only tidy up, if no porter is busy
            try:
                with _checkout_lock(root, wait=0):
                    _sweep_stale_temps(dirs)
            except PorterError:
                pass
            return []
        # the lock first: Ctrl-C still works while waiting for another porter
        with _checkout_lock(root), _signals_held():
            _sweep_stale_temps(dirs)
            _refuse_read_only(targets)
            try:
                _stage(targets, faults)
                _check_fresh(targets, faults)
                _commit(targets, faults)
            finally:
                for t in targets:
                    _unlink_quietly(t.tmp)
                _remove_created_dirs(targets)
        return [c.path for c in pending]


class _Target:
    def __init__(self, change: FileChange, path: Path):
        self.change = change
        self.path = path                            # absolute, symlinks resolved (the link itself stays)
        self.tmp: str | None = None                 # staged new text, until replaced
        self.created_dirs: list[Path] = []
        self.replaced = False


def _real_target(path: Path) -> Path:
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _refuse_read_only(targets: list[_Target]) -> None:
    # Root ignores permission bits, so look at the bits as well as os.access: a read-only
    # file or directory is the user saying "do not edit", whoever runs porter.
    for t in targets:
        try:
            st = os.stat(t.path)
        except FileNotFoundError:
            st = None
        except OSError as err:
            raise PorterError(f"cannot read: {err.strerror}; nothing was written",
                              path=t.change.path) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise PorterError("is a directory, porter expected a file; nothing was written",
                              path=t.change.path)
        if st is not None and (not st.st_mode & stat.S_IWUSR or not os.access(t.path, os.W_OK)):
            raise PorterError("file is read-only; nothing was written", path=t.change.path,
                              hint="make it writable (chmod u+w) if porter may edit it")
        directory = _nearest_existing(t.path.parent)
        dmode = os.stat(directory).st_mode
        if not dmode & stat.S_IWUSR or not os.access(directory, os.W_OK | os.X_OK):
            raise PorterError(f"directory {directory} is read-only; nothing was written",
                              path=t.change.path,
                              hint="porter writes a temporary file beside each file it edits")


def _nearest_existing(directory: Path) -> Path:
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    return directory


def _stage(targets: list[_Target], faults: "_Faults | None") -> None:
    import tempfile     # imported on writes only: dry runs never need it
    for t in targets:
        try:
            t.created_dirs = _make_parents(t.path.parent)
            if faults:
                faults.step("tmp", t)
            fd, t.tmp = tempfile.mkstemp(prefix=f".{t.path.name}.", suffix=TMP_SUFFIX,
                                         dir=t.path.parent)
            with os.fdopen(fd, "wb") as f:
                data = t.change.new.encode("utf-8")
                if faults:
                    # a fault here lands in the middle of the data, as a full disk would
                    half = len(data) // 2
                    f.write(data[:half])
                    f.flush()
                    faults.step("write", t)
                    f.write(data[half:])
                else:
                    f.write(data)
                f.flush()
                if faults:
                    faults.step("fsync", t)
                os.fsync(f.fileno())
            if faults:
                faults.step("chmod", t)
            _copy_mode_and_owner(t.path, t.tmp)
        except OSError as err:
            raise PorterError(f"could not stage the edit: {_reason(err)}; nothing was written",
                              path=t.change.path) from None


def _copy_mode_and_owner(target: Path, tmp: str) -> None:
    """Give the staged file the target's permissions and owner (porter run as root on a
    user's checkout must not leave root-owned files). A new file (or one gone meanwhile,
    which the freshness check reports) gets what open() would give it, not mkstemp's 0600."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        return
    if hasattr(os, "chown") and (st.st_uid, st.st_gid) != _owner(tmp):
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:         # not allowed (not root, or a group we are not in): keep ours
            pass
    os.chmod(tmp, st.st_mode & 0o7777)


def _owner(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_uid, st.st_gid


def _check_fresh(targets: list[_Target], faults: "_Faults | None") -> None:
    for t in targets:
        try:
            if faults:
                faults.step("check", t)
            with open(t.path, "rb") as f:
                on_disk = f.read()
        except FileNotFoundError:
            on_disk = None
        except OSError as err:
            raise PorterError(f"cannot read: {_reason(err)}; nothing was written",
                              path=t.change.path) from None
        old = t.change.old
        if on_disk != (None if old is None else old.encode("utf-8")):
            what = ("was deleted or renamed" if on_disk is None else
                    "was created" if old is None else "changed")
            raise PorterError(f"{what} on disk while porter was planning; nothing was written",
                              path=t.change.path, hint="run the command again")


def _commit(targets: list[_Target], faults: "_Faults | None") -> None:
    failed = None
    try:
        for t in targets:
            failed = t
            if faults:
                faults.step("replace", t)
            os.replace(t.tmp, t.path)
            t.replaced, t.tmp = True, None
    except OSError as err:
        unrestored = _restore([t for t in targets if t.replaced], faults)
        message = f"could not write: {_reason(err)}; "
        if unrestored:
            message += "could not restore " + ", ".join(
                f"{t.change.path} (its old text is in {saved})" for t, saved in unrestored)
        else:
            message += "every file was restored"
        raise PorterError(message, path=failed.change.path) from None


def _restore(done: list[_Target], faults: "_Faults | None") -> list[tuple[_Target, str]]:
    """Put the old text back into targets already replaced; returns those that failed."""
    import tempfile
    unrestored = []
    for t in reversed(done):
        old = t.change.old
        try:
            if faults:
                faults.step("restore", t)
            if old is None:
                os.unlink(t.path)
                t.replaced = False
                continue
            fd, tmp = tempfile.mkstemp(prefix=f".{t.path.name}.", suffix=TMP_SUFFIX,
                                       dir=t.path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(old.encode("utf-8"))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, t.path)
                t.replaced = False
            except OSError:
                _unlink_quietly(tmp)
                raise
        except OSError:
            unrestored.append((t, _save_aside(t)))
    return unrestored


def _save_aside(t: _Target) -> str:
    """Last resort when a restore fails: keep the old text where the user can find it."""
    import tempfile
    for directory in (t.path.parent, Path(tempfile.gettempdir())):
        try:
            fd, saved = tempfile.mkstemp(prefix=f"{t.path.name}.", suffix=".porter-old",
                                         dir=directory)
            with os.fdopen(fd, "wb") as f:
                f.write((t.change.old or "").encode("utf-8"))
            return saved
        except OSError:
            continue
    return "nowhere: the disk is full"


def _make_parents(directory: Path) -> list[Path]:
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
    return missing


def _remove_created_dirs(targets: list[_Target]) -> None:
    for t in targets:
        if not t.replaced:
            for d in t.created_dirs:
                try:
                    d.rmdir()
                except OSError:
                    break


def _sweep_stale_temps(dirs) -> None:
    """Remove temporary files that a killed porter left (the caller holds the checkout lock,
    so no live porter owns one)."""
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if name.startswith(".") and name.endswith(TMP_SUFFIX):
                _unlink_quietly(os.path.join(d, name))


@contextmanager
def _checkout_lock(root: Path, wait: float | None = None):
    """One writer per checkout: an exclusive flock on the root directory, released by the
    kernel when the process dies, so a killed run never leaves it held."""
    try:
        import fcntl
    except ImportError:         # not POSIX: no lock, no sweep hazard worth a dependency
        yield
        return
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError as err:
        raise PorterError(f"cannot open the checkout: {_reason(err)}", path=root) from None
    try:
        deadline = time.monotonic() + (LOCK_WAIT_S if wait is None else wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PorterError("another porter is writing to this checkout; nothing "
                                      "was written", path=root, hint="run the command again") from None
                time.sleep(0.05)
            except OSError:      # a filesystem without flock: go on unlocked
                break
        yield
    finally:
        os.close(fd)


@contextmanager
def _signals_held():
    """Hold Ctrl-C and SIGTERM until the block ends: they then act as usual, after every
    file is whole and consistent."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, ValueError, OSError):   # no pthread_sigmask (Windows)
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


def _unlink_quietly(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


class _Faults:
    """Test hook: PORTER_FAULT="KIND@N[,KIND@N...]" acts at the N-th step of `apply`.

    Steps, in order: per pending file `tmp`, `write` (half the data is written), `fsync`,
    `chmod`, then per file `check`, then per file `replace`, then on failure
    `restore` per replaced file. KIND is one of
      kill        SIGKILL this process
      stop        SIGSTOP this process (the test parent then sends SIGKILL)
      enospc, eio, eacces, eperm, erofs   raise that OSError
      rename, delete, edit   another process renames the target away (to NAME.moved-away),
                  deletes it, or appends a line to it, just before the step
    PORTER_FAULT_LOG=FILE appends "N step path" for every step (to learn a run's steps).
    """

    ERRNOS = {"enospc": errno.ENOSPC, "eio": errno.EIO, "eacces": errno.EACCES,
              "eperm": errno.EPERM, "erofs": errno.EROFS}
    KINDS = {"kill", "stop", "rename", "delete", "edit", *ERRNOS}

    def __init__(self, plan: dict[int, str], log: str | None):
        self.plan, self.log, self.count = plan, log, 0

    @classmethod
    def from_env(cls) -> "_Faults | None":
        spec, log = os.environ.get("PORTER_FAULT"), os.environ.get("PORTER_FAULT_LOG")
        if not spec and not log:
            return None
        plan = {}
        for item in filter(None, (spec or "").split(",")):
            kind, _, n = item.partition("@")
            if kind not in cls.KINDS or not n.isdigit():
                raise PorterError(f"PORTER_FAULT: bad item {item!r}",
                                  hint=f"KIND@N with KIND one of {', '.join(sorted(cls.KINDS))}")
            plan[int(n)] = kind
        return cls(plan, log)

    def step(self, name: str, target: _Target) -> None:
        self.count += 1
        if self.log:
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(f"{self.count} {name} {target.change.path}\n")
        kind = self.plan.get(self.count)
        if kind is None:
            return
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif kind in ("rename", "delete", "edit"):
            try:
                if kind == "rename":
                    os.rename(target.path, f"{target.path}.moved-away")
                elif kind == "delete":
                    os.unlink(target.path)
                else:
                    with open(target.path, "a", encoding="utf-8") as f:
                        f.write("// edited by someone else\n")
            except FileNotFoundError:
                pass
        else:
            code = self.ERRNOS[kind]
            raise OSError(code, os.strerror(code), str(target.path))
