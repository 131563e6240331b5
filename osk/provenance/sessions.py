"""Sessions: which project an agent works in, and which scope that project writes to.

A *session key* names the project. It comes from the Git repository the agent works in, resolved
through the repository's common git directory, so every worktree of one repository is one project
(linked worktrees keep a ``commondir`` file that points back to the main ``.git``). The key is the
main repository's folder name; when an unrelated repository already owns that name in this vault,
the key is the name plus the first 8 hex digits of the repository's root commit. Owners are
recorded in the routing ledger (subject ``owner:<name>``, the name case-folded because scope
folders must not collide on case-insensitive file systems).

Outside a Git repository the key is the working folder's name, owned by a hash of its absolute
path, so two unrelated folders called ``notes`` still get two keys. A repository without a commit
yet has no root commit: it uses its plain name while nobody owns it, and the name plus 8 hex digits
of a hash of its git directory otherwise; it claims the name with its first commit.

The *routing* ledger binds a key to one scope on the key's first successful write into a Scope
(subject ``key:<key>``). Until then the key's scope is the scope named after the key. Two devices
that bind one key differently produce a fork, which ``LedgerFork`` reports and a person resolves.

Not honoured: ``GIT_DIR``/``GIT_WORK_TREE`` in the environment (the folder layout decides).

This module is on the hook path: standard library plus osk's light modules only. Resolving the
git directory reads ``.git`` files directly; only the root commit needs ``git`` itself, and it is
cached in device state per repository.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from osk.errors import LedgerFork, OskError, ScopeError, TitleError
from osk.store.fastclass import dataclass, field
from osk.store.fsutil import atomic_write, sha256_text
from osk.store.ledger import Ledger, LedgerView
from osk.store.locks import file_lock
from osk.store.titles import check_portable, title_key
from osk.store.vault import Vault

LEDGER = "routing"
KIND_OWNER = "owner"
KIND_BIND = "bind"
SUFFIX_LEN = 8
FALLBACK_NAME = "default"
_UNSAFE = set('<>:"/\\|?*#^[]')


# -- finding the repository ------------------------------------------------------------------
@dataclass(frozen=True)
class Repo:
    """A Git checkout as seen from the agent's working folder."""

    worktree: Path  # the folder holding ``.git`` (a linked worktree's own folder)
    git_dir: Path  # this worktree's git directory
    common_dir: Path  # shared by every worktree of the repository

    @property
    def main_name(self) -> str:
        """The main repository's folder name, the same from every worktree."""
        common = self.common_dir
        if common.name == ".git":
            return common.parent.name
        if common.name.endswith(".git") and len(common.name) > 4:  # a bare repository
            return common.name[:-4]
        return self.worktree.name  # a submodule: its git dir lives in the superproject


def find_repo(cwd: Path) -> Repo | None:
    """The repository containing ``cwd``, found by reading ``.git`` entries (no subprocess)."""
    start = cwd.resolve()
    for folder in (start, *start.parents):
        dotgit = folder / ".git"
        try:
            if dotgit.is_dir():
                git_dir = dotgit
            elif dotgit.is_file():
                linked = _gitdir_from_file(dotgit)
                if linked is None:
                    continue
                git_dir = linked
            else:
                continue
        except OSError:
            continue
        return Repo(worktree=folder, git_dir=git_dir, common_dir=_common_dir(git_dir))
    return None


def _gitdir_from_file(dotgit: Path) -> Path | None:
    """A worktree's or submodule's ``.git`` file: one line ``gitdir: PATH``."""
    text = dotgit.read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:"):].strip())
    if not target.is_absolute():
        target = dotgit.parent / target
    target = target.resolve()
    return target if target.is_dir() else None


def _common_dir(git_dir: Path) -> Path:
    try:
        pointer = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return git_dir.resolve()
    common = Path(pointer)
    if not common.is_absolute():
        common = git_dir / common
    return common.resolve()


def root_commit(repo: Repo, vault: Vault | None = None) -> str | None:
    """The root commit of the repository's first-parent history, or None before any commit.

    First-parent keeps the answer stable when unrelated histories are merged in later. The
    answer is cached in the vault's device state, keyed by the common dir and its inode, so the
    hook path pays for ``git`` once per repository and a re-created repository is noticed.
    """
    cache = _RootCache(vault) if vault is not None else None
    stamp = _dir_stamp(repo.common_dir)
    if cache is not None:
        known = cache.get(repo.common_dir, stamp)
        if known is not None:
            return known or None
    found = _ask_git(repo)
    if cache is not None and found is not None:
        cache.put(repo.common_dir, stamp, found)
    return found


def _ask_git(repo: Repo) -> str | None:
    import subprocess  # here: a session whose repository is cached never starts git

    for where in (repo.common_dir, repo.git_dir):
        try:
            result = subprocess.run(
                ["git", f"--git-dir={where}", "rev-list", "--first-parent", "--max-parents=0",
                 "HEAD"],
                capture_output=True, text=True, timeout=10, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = result.stdout.split()
        if result.returncode == 0 and lines:
            return lines[-1]
    return None


def _dir_stamp(path: Path) -> int:
    try:
        return path.stat().st_ino
    except OSError:
        return 0


class _RootCache:
    """Device state ``.osk/sessions/roots.json``: common dir -> [inode, root commit]."""

    def __init__(self, vault: Vault) -> None:
        self.path = vault.state("sessions", "roots.json")

    def _load(self) -> dict[str, list[object]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError, OSError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, common: Path, stamp: int) -> str | None:
        entry = self._load().get(str(common))
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == stamp:
            return str(entry[1])
        return None

    def put(self, common: Path, stamp: int, root: str) -> None:
        data = self._load()
        data[str(common)] = [stamp, root]
        try:
            atomic_write(self.path, json.dumps(data, sort_keys=True, indent=1) + "\n")
        except OSError:
            pass  # a cache: losing it costs one `git` call next time


# -- the key -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionKey:
    """Which project a session works in."""

    key: str  # the name used for `_raw/KEY/…` and, unbound, for the scope
    name: str  # the main repository's (or folder's) name, made portable
    identity: str | None  # "commit:<sha>", "path:<sha256>", or None (repository without commits)
    repo_root: Path | None  # the worktree the agent works in: file citations resolve here
    common_dir: Path | None  # the repository's common git dir (None outside Git)
    source: str  # "git" | "folder"


def portable_name(raw: str) -> str:
    """A folder name that works as a scope folder and a raw record folder on every platform."""
    text = unicodedata.normalize("NFC", raw)
    cleaned = "".join("-" if ch in _UNSAFE or ord(ch) < 32 or ord(ch) == 127 else ch
                      for ch in text)
    cleaned = cleaned.strip().strip(".").strip()
    return cleaned or FALLBACK_NAME


_TOKEN_LIKE = re.compile(r"(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{16,}")


def _key_name(folder: str) -> str:
    """The project folder's name as a session key, or ``project-<12 hex>`` of it when it holds
    what the secret filter takes for a secret: the key names the raw records' and the scope's
    folders and is in every ledger record a session writes. Only a name holding an unbroken
    run of 16 or more letters and digits with a digit among them is checked (a random token
    that long almost always has one), so ordinary names, ``my-project-2024`` or
    ``test_search_run0`` alike, never load the filter: hooks and a fresh search run this."""
    name = portable_name(folder)
    if _TOKEN_LIKE.search(name):
        from osk.capture.secrets import mask_secrets

        if mask_secrets(name).changed:
            return f"project-{sha256_text(name)[:12]}"
    return name


def session_key(cwd: Path, vault: Vault | None = None) -> SessionKey:
    """The session key for an agent working in ``cwd``.

    With a vault, the name's owner is looked up (and claimed when free) in the routing ledger,
    so an unrelated repository with the same name gets a suffixed key. Without a vault the plain
    name is returned: fine for display, not for writing.
    """
    repo = find_repo(cwd)
    if repo is None:
        folder = cwd.resolve()
        name = _key_name(folder.name)
        identity: str | None = "path:" + sha256_text(str(folder))
        partial = SessionKey(name, name, identity, None, None, "folder")
    else:
        name = _key_name(repo.main_name)
        commit = root_commit(repo, vault)
        identity = f"commit:{commit}" if commit else None
        partial = SessionKey(name, name, identity, repo.worktree, repo.common_dir, "git")
    if vault is None:
        return partial
    return Routing(vault).resolve_key(partial)


def _suffix(identity: str) -> str:
    return identity.split(":", 1)[1][:SUFFIX_LEN]


# -- routing -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Session:
    """A session as the engine and the hooks see it: its key, its scope, and what it may see."""

    key: SessionKey
    scope: str
    bound: bool  # the routing ledger binds the key (to ``scope`` unless ``explicit``)
    explicit: bool = False  # the scope was given by the caller (`--scope`), not by routing
    isolation: bool = True
    shared: frozenset[str] = field(default_factory=frozenset)
    fork: str | None = None  # the key's binding is forked: writes refuse until it is resolved

    @property
    def repo_root(self) -> Path | None:
        return self.key.repo_root

    def can_see_scope(self, scope: str | None) -> bool:
        """Scope isolation (vault setting): another project's Scope nodes are invisible."""
        if scope is None or not self.isolation:
            return True
        wanted = title_key(scope)
        return wanted == title_key(self.scope) or any(title_key(s) == wanted for s in self.shared)


def bind_line(key: str, scope: str) -> tuple[str, str, str, dict[str, object]]:
    """The ledger line (ledger, kind, subject, data) that binds session ``key`` to ``scope``."""
    return LEDGER, KIND_BIND, f"key:{key}", {"key": key, "scope": scope}


class Routing:
    """The routing ledger: name owners and key -> scope bindings."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.ledger = Ledger(vault, LEDGER)

    def _view(self) -> LedgerView:
        return self.ledger.read()

    # -- bindings -----------------------------------------------------------------------
    def key_visible(self, session: Session, key: str) -> bool:
        """Scope isolation for a raw record's key: the session's own, or one bound to a scope
        the session may see."""
        return key == session.key.key or session.can_see_scope(self.scope_for(key))

    def route(self, key: str) -> tuple[str, bool]:
        """The scope ``key`` writes to (its binding, or the scope named after it) and whether
        the ledger binds it, from one look at the ledger. LedgerFork when the binding forked."""
        record = self._view().current(f"key:{key}")
        return (str(record.data["scope"]), True) if record is not None else (key, False)

    def scope_for(self, key: str) -> str:
        """The scope ``key`` writes to: its binding, or the scope named after it."""
        return self.route(key)[0]

    def bind(self, key: str, scope: str) -> bool:
        """Bind ``key`` to ``scope``; True when this call made the binding.

        Binding an already bound key to the same scope is a no-op. Binding it elsewhere is
        refused: a key has one scope (a person resolves a wrong binding by hand).
        """
        with file_lock(self.vault.lock_path("routing-claims")):
            current = self._view().current(f"key:{key}")
            if current is not None:
                bound_to = str(current.data["scope"])
                if bound_to == scope:
                    return False
                raise ScopeError(
                    f"session key {key!r} is bound to scope {bound_to!r}; it cannot also bind "
                    f"to {scope!r}. Write into {bound_to!r}, or ask the person to change the "
                    f"binding in _ledger/{LEDGER}.jsonl",
                    key=key, bound=bound_to, wanted=scope,
                )
            self.ledger.append(*bind_line(key, scope)[1:])
            return True

    # -- owners -------------------------------------------------------------------------
    def owner_of(self, name: str) -> str | None:
        """Who owns ``name``. Two devices that claimed it concurrently leave a fork, which
        overview lists; until a person resolves it the earliest claim (smallest id) owns the
        name on every device, so keys stay stable and the hooks keep working."""
        tops = self._view().maxima(f"owner:{title_key(name)}")
        if not tops:
            return None
        return str(min(tops, key=lambda r: r.id).data["identity"])

    def resolve_key(self, partial: SessionKey) -> SessionKey:
        """Apply the owner rule to a plain-name key; claim the name when it is free."""
        name = partial.name
        identity = partial.identity
        owner = self.owner_of(name)
        if owner is None and identity is not None:
            owner = self._claim(name, identity)
        if owner is None or owner == identity:
            return partial
        basis = identity or "path:" + sha256_text(str(partial.common_dir or partial.name))
        key = f"{name}-{_suffix(basis)}"
        return SessionKey(key, name, identity, partial.repo_root, partial.common_dir,
                          partial.source)

    def _claim(self, name: str, identity: str) -> str:
        """Record ``identity`` as the owner of ``name`` unless someone claimed it first."""
        subject = f"owner:{title_key(name)}"
        with file_lock(self.vault.lock_path("routing-claims")):
            owner = self.owner_of(name)
            if owner is not None:
                return owner
            self.ledger.append(KIND_OWNER, subject, {"name": name, "identity": identity})
            return identity


def open_session(vault: Vault, cwd: Path, scope: str | None = None, *, claim: bool = True
                 ) -> Session:
    """Resolve the session for ``cwd``: its key, its scope, and the vault's isolation setting.
    ``claim``: False for a process that writes nothing under its session (the index's catch-up
    after a sync): the key is the folder's plain name, and the routing ledger is left as it is
    where the name was free (a claim is a line every device then syncs)."""
    named = checked_scope_name(scope) if scope is not None else None  # refuse before claiming
    key = session_key(cwd, vault if claim else None)
    settings = vault.settings()
    routing = Routing(vault)
    fork = None
    try:
        routed, bound = routing.route(key.key)
    except LedgerFork as exc:  # reads go on in the key's own scope; writes refuse (check_ledgers)
        bound, routed, fork = True, key.key, str(exc)
    chosen, explicit = (named, True) if named is not None else (routed, False)
    if key.repo_root is not None:
        remember_root(vault, key.key, key.repo_root)
    return Session(key, chosen, bound, explicit, settings.scope_isolation,
                   frozenset(settings.shared_scopes), fork)


def checked_scope_name(scope: str) -> str:
    """The NFC form of a scope name, or ScopeError. The one rule for every scope name (session
    ``--scope``, scope memory): a single portable folder name, as strict as a node title."""
    from osk.capture.secrets import check_name

    check_name("the scope name", scope)  # a folder name: refused, never redacted
    if isinstance(scope, str) and "/" in scope:
        raise ScopeError(f"scope name {scope!r} contains '/'; a scope is one folder, not a path",
                         scope=scope)
    try:
        return check_portable(scope)
    except TitleError as exc:
        raise ScopeError(f"scope name {scope!r} is not a portable folder name: {exc}",
                         scope=scope) from exc


# -- where a key's files live on this device ----------------------------------------------
def roots_path(vault: Vault) -> Path:
    """Where ``known_roots`` keeps its map (callers stat it to notice a change)."""
    return vault.state("sessions", "worktrees.json")


def known_roots(vault: Vault) -> dict[str, str]:
    """Device state: session key -> the last worktree root seen for it on this device."""
    try:
        data = json.loads(roots_path(vault).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError, OSError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def remember_root(vault: Vault, key: str, root: Path) -> None:
    roots = known_roots(vault)
    if roots.get(key) == str(root):
        return
    roots[key] = str(root)
    try:
        with file_lock(vault.lock_path("sessions-worktrees")):
            merged = {**known_roots(vault), key: str(root)}
            atomic_write(roots_path(vault),
                         json.dumps(merged, sort_keys=True, indent=1) + "\n")
    except (OSError, OskError):
        pass  # only used to re-check file citations from another session on this device
