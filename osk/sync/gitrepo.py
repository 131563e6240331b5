"""Git for sync: one repository, driven through GitPython, never interactive.

Commands run with the porcelain (``GitRepo.run``: status, output and errors, never a prompt,
an editor or a pager); blobs are read from and written to the object database directly
(``blob``/``store``), so landing a commit never needs a checkout. GitPython is imported when a
repository is opened: it refuses to load on a machine without git, and nothing on a hook path
needs it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from osk.errors import SyncError

LOCAL_TIMEOUT = 600.0  # seconds a local git command may take
BATCH = 2000  # objects ``blobs`` asks one ``git cat-file`` for
# Git runs non-interactively: no editor, no credential prompt on a terminal nobody watches.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true",
           "GIT_MERGE_AUTOEDIT": "no"}


@dataclass(frozen=True)
class GitRun:
    status: int
    out: str
    err: str


class GitRepo:
    """A repository driven through GitPython: porcelain commands plus its object database."""

    def __init__(self, root: Path, config: Iterable[str] = ()) -> None:
        try:
            from git import Repo
            from git.exc import InvalidGitRepositoryError, NoSuchPathError
        except ImportError as exc:  # GitPython refuses to load without a git executable
            raise SyncError(f"git cannot be run ({exc}); install git and sync again") from exc

        try:
            self.repo = Repo(str(root))
        except (InvalidGitRepositoryError, NoSuchPathError) as exc:
            raise SyncError(f"{root} is not a git repository; make it one with "
                            f"`git -C {root} init` and add a remote") from exc
        self.root = root
        self.config = list(config)
        self.git_dir = Path(self.repo.git_dir)

    def close(self) -> None:
        self.repo.close()

    def run(self, *args: str, check: bool = True, timeout: float = LOCAL_TIMEOUT) -> GitRun:
        command = ["git"]
        for item in self.config:
            command += ["-c", item]
        status, out, err = self.repo.git.execute(
            [*command, *args], with_extended_output=True, with_exceptions=False,
            kill_after_timeout=timeout, env=GIT_ENV, strip_newline_in_stdout=False,
        )
        result = GitRun(int(status or 0), str(out), str(err))
        if check and result.status != 0:
            detail = (result.err.strip() or result.out.strip()).splitlines()[-3:]
            raise SyncError(f"git {args[0]} failed in {self.root}: {' / '.join(detail)}",
                            command=list(args), status=result.status)
        return result

    def sha(self, rev: str) -> str | None:
        result = self.run("rev-parse", "--verify", "-q", f"{rev}^{{commit}}", check=False)
        return result.out.strip() or None if result.status == 0 else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.run("merge-base", "--is-ancestor", older, newer, check=False).status == 0

    def count(self, revisions: str) -> int:
        return int(self.run("rev-list", "--count", revisions).out.strip() or 0)

    def blob(self, sha: str) -> bytes:
        return bytes(self.repo.odb.stream(bytes.fromhex(sha)).read())

    def blobs(self, shas: Sequence[str]) -> Iterator[tuple[str, bytes]]:
        """Each of ``shas`` with its bytes, in order: ``git cat-file --batch``, one process for
        ``BATCH`` objects (``blob`` is a round trip an object: 0.1 ms, 11 s for a tree of
        100,000 nodes), so only one batch's bytes are held at a time."""
        command = ["git", *(arg for item in self.config for arg in ("-c", item)),
                   "cat-file", "--batch"]
        for at in range(0, len(shas), BATCH):
            asked = shas[at:at + BATCH]
            try:
                done = subprocess.run(command, input="".join(f"{sha}\n" for sha in asked).encode(),
                                      capture_output=True, cwd=self.root, timeout=LOCAL_TIMEOUT,
                                      env={**os.environ, **GIT_ENV}, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SyncError(f"git cat-file failed in {self.root}: {exc}") from exc
            yield from _batch_objects(asked, done.stdout, self.root)

    def size(self, sha: str) -> int:
        """An object's size in bytes, without reading it."""
        return int(self.repo.odb.info(bytes.fromhex(sha)).size)

    def store(self, data: bytes) -> str:
        from io import BytesIO

        from gitdb import IStream

        stream = self.repo.odb.store(IStream(b"blob", len(data), BytesIO(data)))
        hexsha: bytes = stream.hexsha  # gitdb has no types: what its OStream holds
        return hexsha.decode("ascii")

    def set_entry(self, rel: str, mode: str, sha: str) -> None:
        self.run("update-index", "--add", "--cacheinfo", f"{mode},{sha},{rel}")


@contextmanager
def open_repo(root: Path, config: Iterable[str] = ()) -> Iterator[GitRepo]:
    repo = GitRepo(root, config)
    try:
        yield repo
    finally:
        repo.close()


def literal(rel: str) -> str:
    """A path as a pathspec that matches only itself (file names may hold * ? [ ])."""
    return f":(literal){rel}"


def _batch_objects(asked: Sequence[str], out: bytes, root: Path) -> Iterator[tuple[str, bytes]]:
    """``git cat-file --batch``'s answer to ``asked``: a header line a object (its name, type
    and size, or ``missing``), then its bytes and a newline."""
    at = 0
    for sha in asked:
        end = out.find(b"\n", at)
        header = out[at:end].split() if end >= 0 else []
        if len(header) != 3:
            raise SyncError(f"git cat-file cannot read object {sha} in {root}")
        size = int(header[2])
        yield sha, out[end + 1:end + 1 + size]
        at = end + 1 + size + 1


def split_z(text: str) -> list[str]:
    return [item for item in text.split("\0") if item]
