"""Background growth with the real CLIs: after 9 final answers osk forks the user's session.

One conversation per host with background reviews on (the default): nine inputs, each captured
by the Stop hook. The ninth final answer journals a review job and starts the detached runner,
which forks the real CLI (``claude -p --resume SESSION --fork-session`` / ``codex exec fork
SESSION``) once per batch of four rounds. The scripted model in each fork reads the batch's
first round with ``read_raw`` and writes a node citing it; the user's own transcript and raw
record are left exactly as they were.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from livehost import LiveHost, Run
from plays import review_title
from test_live_hosts import INPUTS, WRITE, chat

JOB_DEADLINE = 300  # seconds for the whole job (three forks) on a loaded 2-core machine


@dataclass
class Grown:
    host: LiveHost
    runs: list[Run]
    job: dict
    transcript_before: bytes
    record_before: bytes
    records_before: int

    @property
    def session_id(self) -> str:
        return self.runs[0].session_id


@pytest.fixture(scope="module")
def grown(host: LiveHost) -> Grown:
    runs = [host.run(WRITE)]
    for number in range(2, INPUTS + 1):
        runs.append(host.run(chat(number), resume=runs[0].session_id))
    transcript = host.transcript(runs[0].session_id).read_bytes()
    record = host.record_of(runs[0].session_id)
    job = wait_for_job(host, runs[0].session_id)
    return Grown(host, runs, job, transcript, record.path.read_bytes(), len(host.raw_records()))


def wait_for_job(host: LiveHost, session_id: str) -> dict:
    """The journal of the review job the ninth answer started, once it has ended."""
    conversation = host.vault / ".osk" / "growth" / "conversations" / host.name / \
        f"{session_id}.json"
    deadline = time.monotonic() + JOB_DEADLINE
    job: dict = {}
    while time.monotonic() < deadline:
        job_id = load(conversation).get("job")
        job = load(host.vault / ".osk" / "growth" / "jobs" / f"{job_id}.json") if job_id else {}
        if job.get("status") in ("finished", "unfinished"):
            return job
        time.sleep(0.2)  # waiting for a detached process to finish, not for a result
    raise AssertionError(f"no review job ended within {JOB_DEADLINE} s; journal: {job}; "
                         f"runner log: {runner_log(host, job)}")


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def runner_log(host: LiveHost, job: dict) -> str:
    path = host.vault / ".osk" / "growth" / "logs" / f"{job.get('id')}.log"
    return path.read_text(encoding="utf-8")[-3000:] if path.exists() else "(none)"


def fork_requests(grown: Grown) -> list:
    return [r for r in grown.host.server.model_requests()
            if "[osk background review: job " + str(grown.job["id"]) in json.dumps(r.body)]


def request_session(request) -> str:
    """The session a model request came from, as the host tells the API."""
    body = request.body
    if "metadata" in body:
        return str(json.loads(body["metadata"]["user_id"]).get("session_id"))
    return str(body["client_metadata"]["session_id"])


def test_the_job_ran_one_fork_per_batch_and_finished(grown: Grown) -> None:
    assert not grown.host.server.errors
    job = grown.job
    assert job["status"] == "finished", runner_log(grown.host, job)
    batches = job["manifest"]["batches"]
    assert [len(b) for b in batches] == [4, 4, 1]
    assert [a["outcome"] for a in job["attempts"]] == ["finished"] * 3
    assert all(a["exit"] == 0 for a in job["attempts"])


def test_the_forks_are_the_real_cli_resuming_the_users_session(grown: Grown) -> None:
    requests = fork_requests(grown)
    assert requests, "no model request came from a fork"
    forks = {request_session(r) for r in requests}
    assert len(forks) == 3 and grown.session_id not in forks
    # A fork carries the user's conversation: the first input is in its history.
    assert all(WRITE in json.dumps(r.body) for r in requests)


def test_each_fork_wrote_a_node_citing_a_raw_round(grown: Grown) -> None:
    record = grown.host.record_of(grown.session_id)
    for batch in grown.job["manifest"]["batches"]:
        coordinate = batch[0]["target"]
        assert coordinate.startswith(f"_raw/tidepool/{record.conversation}#Round ")
        found = list(grown.host.vault.glob(f"Scope/tidepool/live/{review_title(coordinate)}.md"))
        assert len(found) == 1, f"no node for {coordinate}"
        text = found[0].read_text(encoding="utf-8")
        assert f"[[{coordinate}]]" in text


def test_the_users_session_and_raw_record_are_untouched(grown: Grown) -> None:
    host = grown.host
    assert host.transcript(grown.session_id).read_bytes() == grown.transcript_before
    record = host.record_of(grown.session_id)
    assert record.path.read_bytes() == grown.record_before
    assert len(record.rounds) == INPUTS
    assert len(host.raw_records()) == grown.records_before == 1  # the forks captured nothing
