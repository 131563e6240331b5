"""A vault on disk: where it is, how it is laid out, and how a new one is made.

This is the one place that reads ``OSK_VAULT`` and the one place that knows folder names.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from osk.errors import DiskError, OskError, OutsideVault, VaultNotFound
from osk.store.fastclass import dataclass, field
from osk.store.fsutil import RACE_WINDOW_NS, atomic_write, clear_stale_temps, replace_unsynced
from osk.store.titles import title_key

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

MARKER = "osk.toml"
DEBRIS_SWEEP_SECONDS = 3600.0  # how often opening a vault walks all of device state for debris

SCOPE, DOMAIN, PERSON = "Scope", "Domain", "Person"
SPACES = (SCOPE, DOMAIN, PERSON)
WORKBENCH = "Workbench"
GOVERNANCE = "_governance"
RAW_DIR = "_raw"
LEDGER_DIR = "_ledger"
MEMORY_DIR = "_memory"
OBJECTS_DIR = "_objects"
STATE_DIR = ".osk"

# Folders that hold no nodes: never searched, never cited as nodes, never validated as nodes.
NON_NODE_TOP = frozenset({WORKBENCH, GOVERNANCE, RAW_DIR, LEDGER_DIR, MEMORY_DIR, OBJECTS_DIR,
                          STATE_DIR, ".git", ".obsidian", ".trash"})


@dataclass(frozen=True)
class Settings:
    """Vault settings from ``osk.toml``. Unknown keys are refused so a typo cannot go unnoticed."""

    scope_isolation: bool = True
    shared_scopes: tuple[str, ...] = ()
    inject_inferred_person: bool = True
    extra: dict[str, object] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Settings:
        try:
            data = _parsed_toml(path)
        except FileNotFoundError:
            return cls()
        return cls.from_toml(data, path)

    @classmethod
    def from_toml(cls, data: dict[str, object], path: Path) -> Settings:
        """The settings ``data`` (osk.toml as parsed) holds; ``path`` names it in a refusal."""
        section = data.get("vault", {})
        if not isinstance(section, dict):
            raise OskError(f"{path}: [vault] must be a table")
        known = {"scope_isolation", "shared_scopes", "inject_inferred_person"}
        unknown = set(section) - known
        if unknown:
            raise OskError(
                f"{path}: unknown setting(s) {sorted(unknown)} in [vault]; "
                f"known settings are {sorted(known)}"
            )
        return cls(
            scope_isolation=bool(section.get("scope_isolation", True)),
            shared_scopes=tuple(section.get("shared_scopes", ())),
            inject_inferred_person=bool(section.get("inject_inferred_person", True)),
            extra={k: v for k, v in data.items() if k != "vault"},
        )

    def table(self, name: str, known: frozenset[str]) -> dict[str, object]:
        """``[name]`` of osk.toml ({} when absent), refused when it is not a table or names a
        setting not in ``known``: the one check of every table but ``[vault]``."""
        section = self.extra.get(name, {})
        if not isinstance(section, dict):
            raise OskError(f"osk.toml: [{name}] must be a table")
        unknown = set(section) - known
        if unknown:
            raise OskError(f"osk.toml: unknown setting(s) {sorted(unknown)} in [{name}]; known "
                           f"settings are {sorted(known)}")
        return section


SETTINGS_CACHE = "settings.json"  # device state: osk.toml as parsed, keyed by its stat
# The same, within one process (a hook asks for the settings several times a run): path ->
# (stat key, data), kept only for a file whose stat is past the race window, like the cache.
_PARSED: dict[str, tuple[list[int], dict[str, object]]] = {}


def _parsed_toml(path: Path) -> dict[str, object]:
    """osk.toml as data. The prompt-submit hook reads the settings on every prompt and tomllib
    costs it about 15 ms (with datetime), so the parse is kept in device state and reused
    while the file's stat key is the same; a file changed less than two seconds before its
    stat was taken is parsed afresh, since a same-size edit in the same clock tick would
    keep its stat key."""
    import json
    import time

    st = os.stat(path)  # FileNotFoundError: no settings file
    key = [st.st_size, st.st_mtime_ns, st.st_ino]
    memo = _PARSED.get(str(path))
    if memo is not None and memo[0] == key:
        return memo[1]
    cache = path.parent / STATE_DIR / SETTINGS_CACHE
    try:
        saved = json.loads(cache.read_text(encoding="utf-8"))
        toml = saved.get("toml") if isinstance(saved, dict) and saved.get("stat") == key else None
        if isinstance(toml, dict):
            _PARSED[str(path)] = (key, toml)  # saved only once past the window
            return toml
    except (OSError, ValueError):
        pass
    import tomllib  # imported here: hooks locate a vault on every turn and rarely need this

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise OskError(f"{path}: not valid TOML ({exc}); fix the file by hand") from exc
    settled = time.time_ns() - st.st_mtime_ns >= RACE_WINDOW_NS
    if settled:
        _PARSED[str(path)] = (key, data)
    if settled and cache.parent.is_dir():
        try:
            replace_unsynced(cache, json.dumps({"stat": key, "toml": data}, ensure_ascii=False))
        except (OSError, TypeError, ValueError):  # dates in osk.toml, a read-only vault: no cache
            pass
    return data


@dataclass(frozen=True)
class Vault:
    root: Path

    # -- layout -------------------------------------------------------------------------
    @property
    def ledger_dir(self) -> Path:
        return _joined(self.root, LEDGER_DIR)

    @property
    def raw_dir(self) -> Path:
        return self.root / RAW_DIR

    @property
    def memory_dir(self) -> Path:
        return self.root / MEMORY_DIR

    @property
    def objects_dir(self) -> Path:
        return _joined(self.root, OBJECTS_DIR)

    @property
    def state_dir(self) -> Path:
        """Device-owned state: locks, index, cursors, journals, logs. Never committed."""
        return _joined(self.root, STATE_DIR)

    def state(self, *parts: str) -> Path:
        return _joined(self.root, STATE_DIR, *parts)

    @property
    def temp_dir(self) -> Path:
        """Where writes of vault files keep their temp files: device state, which sync never
        commits, so a write killed midway leaves no debris beside nodes or objects."""
        return self.state("tmp")

    def write_file(self, path: Path, data: bytes | str) -> None:
        """Replace a vault file atomically: refused outside the vault, temp in device state."""
        atomic_write(self.inside(path), data, temp_dir=self.temp_dir)

    def clear_debris(self) -> int:
        """Remove temp files that killed writers (or a full disk) left in device state; live
        writers' stay. ``osk validate`` counts them until then. The write path's own temp
        folder and the index folder's top (where a whole build of the recall file, as large
        as the index, is made aside) are swept on every open; the rest of device state (a
        folder per project and conversation: 10,000 files take some 40 ms to walk) at most
        once an hour."""
        removed = clear_stale_temps(self.temp_dir)
        removed += clear_stale_temps(self.state("index"), deep=False)
        stamp = self.state("debris-swept")
        try:
            if time.time() - stamp.stat().st_mtime < DEBRIS_SWEEP_SECONDS:
                return removed
        except FileNotFoundError:
            pass
        removed += clear_stale_temps(self.state_dir)
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
        except OSError:
            pass  # a read-only vault: the next open sweeps again (and finds nothing to remove)
        return removed

    def ledger_path(self, name: str) -> Path:
        """Where a ledger lives. Its stat is what callers watch for changes; its contents are
        read and written only through ``osk.store.ledger.Ledger``, which refuses a link
        leading out of the vault at each read and append (one may be planted at any time)."""
        return _joined(self.root, LEDGER_DIR, f"{name}.jsonl")

    def lock_path(self, name: str) -> Path:
        return self.state("locks", f"{name}.lock")

    def mutation_lock_path(self) -> Path:
        return self.lock_path("vault-mutation")

    def audit_intent_path(self) -> Path:
        """Audit records journalled by a write whose node files are being replaced
        (``osk.authority.audit.intend``); finished by whoever takes the mutation lock next."""
        return self.state("audit-intent.json")

    def settings(self) -> Settings:
        return Settings.load(self.root / MARKER)

    def rel(self, path: Path) -> str:
        """A vault-relative POSIX path, the form every record and message uses."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:  # a link that leads out of the vault: named where it sits
            return Path(os.path.abspath(path)).relative_to(os.path.abspath(self.root)).as_posix()

    def abs(self, rel_path: str) -> Path:
        """The file at a vault-relative path; refused when it resolves outside the vault."""
        return self.inside(self.root / rel_path)  # POSIX separators work everywhere we run

    def inside(self, path: Path) -> Path:
        """``path``, refused with OutsideVault when it resolves outside the vault.

        The one containment rule: every path to a vault file (node, raw record, scope memory,
        object) is made by a helper that passes it through here, and a ledger's reads and
        appends pass its path through here at each use, so a symbolic link
        planted anywhere in the vault (``_raw/proj -> /elsewhere``) is never read or written
        through. A link that stays inside the vault is followed; ``osk validate`` reports
        every link all the same.
        """
        if _no_link_below(self.root, path):
            return path
        real = os.path.realpath(path)
        root = _real_root(self.root)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return path
        shown = Path(os.path.abspath(path))
        try:
            where = shown.relative_to(os.path.abspath(self.root)).as_posix()
        except ValueError:
            where = str(shown)
        raise OutsideVault(
            f"{where} resolves to {real}, outside the vault (a symbolic link leads there); osk "
            f"reads and writes nothing through it. Replace the link with the real file or "
            f"folder, or remove it (`osk validate` lists every link)",
            path=where, target=real,
        )


_REAL_ROOTS: dict[Path, str] = {}
_JOINED: dict[tuple[Path, tuple[str, ...]], Path] = {}
_JOINED_KEPT = 4096


def _joined(root: Path, *parts: str) -> Path:
    """``root.joinpath(*parts)``, remembered: a write names the same ledgers, locks and state
    files a dozen times, and each ``Path`` made costs more than the write's own work on it."""
    key = (root, parts)
    found = _JOINED.get(key)
    if found is None:
        if len(_JOINED) >= _JOINED_KEPT:
            _JOINED.clear()
        found = _JOINED[key] = root.joinpath(*parts)
    return found


_ABSOLUTE_ROOTS: dict[Path, str] = {}


def _no_link_below(root: Path, path: Path) -> bool:
    """Whether ``path`` is spelled below ``root`` and no component of it below the root is a
    symbolic link: then it resolves inside the root wherever the root itself resolves. What
    ``os.path.realpath`` would find, for the components below the root only (a write paid
    some 20 full resolutions, one ``lstat`` per component from ``/``); False sends the caller
    to the full resolution. A component that cannot be stat-ed is no link, as there."""
    base = _ABSOLUTE_ROOTS.get(root)
    if base is None:
        base = os.path.abspath(root)
        if root.is_absolute():  # a relative root is spelled against the working directory
            _ABSOLUTE_ROOTS[root] = base
    spelled = os.fspath(path)
    if not spelled.startswith(base + os.sep):
        return False
    parts = spelled[len(base) + 1:].split(os.sep)
    if any(part in ("", ".", "..") for part in parts):
        return False
    current = base
    for part in parts:
        current = f"{current}{os.sep}{part}"
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return False
        except OSError:
            continue
    return True


def _real_root(root: Path) -> str:
    """The vault root with its own links resolved (a vault may live behind one), remembered:
    the root does not move while osk runs."""
    found = _REAL_ROOTS.get(root)
    if found is None:
        found = _REAL_ROOTS[root] = os.path.realpath(root)
    return found


def path_parts(rel_path: str) -> tuple[str, ...]:
    """``PurePosixPath(rel_path).parts``, split as a string when that gives the same (no
    empty or "." component): a search marks each hit by its Space and scope, and the path
    object costs ten times the split."""
    parts = rel_path.split("/")
    return PurePosixPath(rel_path).parts if "" in parts or "." in parts else tuple(parts)


def space_of(rel_path: str) -> str | None:
    """The Space of a vault-relative path, or None for files outside the three Spaces."""
    top = path_parts(rel_path)[:1]
    return top[0] if top and top[0] in SPACES else None


def scope_of(rel_path: str) -> str | None:
    """The scope of a Scope node's path (its second component)."""
    parts = path_parts(rel_path)
    return parts[1] if len(parts) >= 3 and parts[0] == SCOPE else None


def cluster_of(rel_path: str) -> str | None:
    """The top-level cluster folder of a node path, or None when the node sits at the root."""
    parts = path_parts(rel_path)
    depth = 2 if parts[:1] == (SCOPE,) else 1
    return parts[depth] if len(parts) > depth + 1 else None


def is_hub(rel_path: str, title: str) -> bool:
    """A cluster's hub: the node titled like its cluster folder (after NFC and case folding)."""
    cluster = cluster_of(rel_path)
    return cluster is not None and title_key(title) == title_key(cluster)


def locate(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Vault:
    """Find the vault: ``--vault``, then ``OSK_VAULT``, then the working directory's ancestors."""
    if explicit:
        return _checked(Path(explicit), "--vault")
    env = os.environ.get("OSK_VAULT")
    if env:
        return _checked(Path(env), "OSK_VAULT")
    start = (cwd or Path.cwd()).resolve()
    for candidate in (start, *start.parents):
        if (candidate / MARKER).is_file():
            return Vault(candidate)
    raise VaultNotFound(
        f"no osk vault found: pass --vault PATH, set OSK_VAULT, or run inside a vault "
        f"(searched {start} and its parents for {MARKER}); create one with `osk init PATH`"
    )


def _checked(path: Path, source: str) -> Vault:
    root = path.expanduser().resolve()
    if not (root / MARKER).is_file():
        raise VaultNotFound(
            f"{source} points at {root}, which is not an osk vault (no {MARKER}); "
            f"create one with `osk init {root}`"
        )
    return Vault(root)


def init(path: Path, *, git: bool = True) -> Vault:
    """Create a vault from the template and make it a git repository."""
    root = path.expanduser().resolve()
    if (root / MARKER).exists():
        raise OskError(f"{root} is already an osk vault; nothing changed")
    if root.exists() and not root.is_dir():
        raise OskError(f"{root} is a file, not a folder; choose an empty or new folder")
    if root.exists() and any(p.name != ".git" for p in root.iterdir()):
        raise OskError(f"{root} exists and is not empty; choose an empty or new folder")
    existed = root.exists()
    try:
        _fill(root, git=git)
    except (OSError, OskError) as exc:
        _undo_init(root, existed)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OskError(f"could not create a vault in {root} ({reason}); nothing was left "
                       f"behind") from None
    return Vault(root)


def _fill(root: Path, *, git: bool) -> None:
    from importlib import resources

    root.mkdir(parents=True, exist_ok=True)
    _copy_tree(resources.files("osk.vault_template"), root)
    _copy_tree(resources.files("osk.governance"), root / GOVERNANCE)
    for folder in (*SPACES, WORKBENCH, RAW_DIR, LEDGER_DIR, MEMORY_DIR):
        (root / folder).mkdir(exist_ok=True)
    if git:
        _git_init(root)


def _undo_init(root: Path, existed: bool) -> None:
    """Remove what a failed ``init`` wrote: the folder it made, or (in a folder that was
    empty but for a ``.git``) everything but that ``.git``."""
    import shutil

    if not existed:
        shutil.rmtree(root, ignore_errors=True)
        return
    for entry in root.iterdir() if root.is_dir() else ():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _copy_tree(source: Traversable, target: Path) -> None:
    import shutil
    from importlib import resources

    for entry in source.iterdir():
        if entry.name in {"__pycache__", "__init__.py"}:
            continue
        destination = target / entry.name
        if entry.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            _copy_tree(entry, destination)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            with resources.as_file(entry) as real:
                shutil.copyfile(real, destination)


def _git_init(root: Path) -> None:
    import subprocess

    def run(*args: str) -> None:
        try:
            subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
        except FileNotFoundError:
            raise OskError("git is not installed; install git, which osk uses to keep the "
                           "vault's history and to sync it") from None
        except subprocess.CalledProcessError as exc:
            said = exc.stderr.decode("utf-8", "replace").strip().splitlines()
            verb = next(a for a in args if not a.startswith("-") and "=" not in a)
            raise OskError(f"`git {verb}` failed: {said[0] if said else exc}") from None

    if not (root / ".git").exists():
        run("init", "-q", "-b", "main")
    run("add", "-A")
    env_name = ["-c", "user.name=osk", "-c", "user.email=osk@localhost"]
    has_identity = subprocess.run(
        ["git", "config", "user.email"], cwd=root, capture_output=True
    ).returncode == 0
    extra = [] if has_identity else env_name
    run(*extra, "commit", "-q", "-m", "osk: new vault")


# errno -> (what happened, what the person does about it)
_DISK_CAUSES = {
    errno.ENOSPC: ("the disk holding the vault is full", "free space on it"),
    errno.EDQUOT: ("the disk quota for the vault is used up", "free space or raise the quota"),
    errno.EROFS: ("the vault is on a read-only file system",
                  "remount it read-write (or work in a writable copy)"),
    errno.EACCES: ("permission denied", "give this user write access to that path"),
    errno.EPERM: ("operation not permitted", "give this user write access to that path"),
}


def disk_error(exc: BaseException, *, sqlite_file: str | os.PathLike[str] | None = None
               ) -> DiskError | None:
    """The DiskError an OSError stands for (a full, over-quota, read-only or forbidden disk),
    naming the path inside the vault; None for any other error. ``sqlite_file``: the SQLite
    file an SQLite error came from, whose disk is asked when the error is only "disk I/O
    error" (``_refusing_disk``)."""
    code = _sqlite_errno(exc, sqlite_file)
    if code is not None:
        filename = os.fspath(sqlite_file) if sqlite_file is not None else None
        exc = OSError(code, os.strerror(code), filename)  # SQLite names no file
    if not isinstance(exc, OSError) or exc.errno not in _DISK_CAUSES:
        return None
    cause, fix = _DISK_CAUSES[exc.errno]
    name = errno.errorcode[exc.errno]
    where = _inside_vault(exc.filename)
    at = f", at {where}" if where else ""
    return DiskError(f"{cause} ({name}{at}): {fix}, then try again", cause=name, path=where)


def _sqlite_errno(exc: BaseException, sqlite_file: str | os.PathLike[str] | None
                  ) -> int | None:
    """The errno an SQLite error stands for when the disk refused (SQLite reports it in
    words, not as an OSError; a bare "disk I/O error" is the disk's when the disk holding
    ``sqlite_file`` says so); None otherwise. sqlite3 is not imported: hooks never need it."""
    if type(exc).__module__ != "sqlite3":
        return None
    text = str(exc).lower()
    if "database or disk is full" in text:
        return errno.ENOSPC
    if "readonly database" in text:
        return errno.EROFS
    if "disk i/o error" in text and sqlite_file is not None:
        return _refusing_disk(sqlite_file)
    return None


# Less room than this is a full disk to a writer of SQLite: a WAL's shared-memory file takes
# 32 KiB and each page written 4 KiB more.
FULL_BELOW = 64 * 1024


def _refusing_disk(path: str | os.PathLike[str]) -> int | None:
    """ENOSPC or EROFS when the file system holding ``path`` has no room left for this process
    or takes no writes; else None. SQLite says only "disk I/O error" when it cannot make the
    files a write-ahead log needs (each connection that finds none makes them), so the disk is
    asked."""
    try:
        found = os.statvfs(os.path.dirname(os.fspath(path)) or ".")
    except (OSError, AttributeError):  # gone, or no statvfs (Windows): not known to be the disk
        return None
    if found.f_flag & os.ST_RDONLY:
        return errno.EROFS
    root = getattr(os, "geteuid", lambda: -1)() == 0  # root may use the reserved blocks
    free = (found.f_bfree if root else found.f_bavail) * found.f_frsize
    return errno.ENOSPC if free < FULL_BELOW else None


def _inside_vault(filename: object) -> str | None:
    """``filename`` relative to the vault that holds it (the folder with osk.toml above it),
    else as given; None when the error named no file."""
    if not isinstance(filename, str | bytes | os.PathLike):
        return None
    path = Path(os.fsdecode(filename))
    for folder in path.parents:
        if (folder / MARKER).is_file():
            return path.relative_to(folder).as_posix()
    return str(path)
