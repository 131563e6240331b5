"""A stand-in for the `claude` and `codex` CLIs in growth tests: it plays a background fork.

Tests put a wrapper named `claude` or `codex` on PATH that runs this script with ``--as HOST``.
Each run appends one JSON line to ``$FAKE_HOST_LOG`` (argv, prompt, fork environment) and then
performs the next action of ``$FAKE_HOST_SCRIPT`` (a JSON list consumed one per run; when it
is empty the action is ``$FAKE_HOST_DEFAULT``, else ``review``):

- ``review``: act like the forked agent: parse the review prompt, then for each round item read
  it with ``read_raw`` and write a node citing it with ``create_node``, through the real MCP
  tools of a real ``osk mcp`` process (spawned with the official ``mcp`` client);
- ``note``: only list the items it was given (for tests about scheduling, not about tools);
- ``fail``: exit 3 without doing anything (a fork that did not finish);
- ``kill-runner``: kill the osk runner that started this fork (a crash mid-job), then exit;
- ``hang``: sleep until killed (a fork that times out).

Like the real CLIs, a fork fires the hooks the user registered: when ``$FAKE_HOST_STOP_HOOK``
holds a shell command (the one ``osk setup`` registers), the fake runs it at the end of its turn
with a Stop payload for its own (forked) session.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from osk.store.locks import file_lock

ITEM = re.compile(r"^\d+\. (round|recheck|eviction) (.+)$")


def next_action() -> str:
    default = os.environ.get("FAKE_HOST_DEFAULT", "review")
    script = os.environ.get("FAKE_HOST_SCRIPT")
    if not script:
        return default
    path = Path(script)
    with file_lock(Path(str(path) + ".lock")):
        actions = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
        if not actions:
            return default
        path.write_text(json.dumps(actions[1:]), encoding="utf-8")
        return str(actions[0])


def log(entry: dict[str, object]) -> None:
    target = os.environ.get("FAKE_HOST_LOG")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def read_prompt(host: str, rest: list[str]) -> str:
    if host == "claude":
        return sys.stdin.read()
    return rest[-1] if rest else ""


CLUSTER = "background"


def review(prompt: str, *, with_tools: bool) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    for line in prompt.splitlines():
        match = ITEM.match(line)
        if match:
            items.append({"kind": match.group(1), "text": match.group(2)})
    done = items
    if with_tools:
        import anyio

        done = anyio.run(work_through, items)
    marker = os.environ.get("FAKE_HOST_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as handle:
            for item in done:
                handle.write(json.dumps(item) + "\n")
    return done


def server_command() -> tuple[str, list[str]]:
    """`osk mcp`, the way a host registered by `osk setup` starts it (the vault from OSK_VAULT)."""
    return sys.executable, ["-m", "osk", "mcp"]


async def work_through(items: list[dict[str, object]]) -> list[dict[str, object]]:
    from mcp import Client, StdioServerParameters

    command, args = server_command()
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ),
                                   cwd=os.getcwd())
    async with Client(params) as client:
        await ensure_hub(client)
        for item in items:
            if item["kind"] != "round":
                item["skipped"] = True
                continue
            target = str(item["text"])
            raw = await client.call_tool("read_raw", {"coordinate": target})
            item["read_ok"] = not raw.is_error
            number = target.rsplit("Round ", 1)[-1]
            created = await client.call_tool("create_node", {
                "title": f"Fact {number} of the background review",
                "summary": f"The conversation settled fact {number}.",
                "body": f"We decided fact {number}, as round {number} records.\n",
                "space": "scope", "cluster": CLUSTER, "drafter": "fake-fork",
                "derived_from": [f"[[{target}]]"],
            })
            item["created"] = not created.is_error
            if created.is_error:
                item["error"] = created.content[0].text if created.content else ""
    return items


async def ensure_hub(client: object) -> None:
    """A cluster's hub (titled like its folder) must exist before its other nodes."""
    found = await client.call_tool("search", {"query": CLUSTER})  # type: ignore[attr-defined]
    hits = (found.structured_content or {}).get("hits", [])
    if any(hit.get("title") == CLUSTER for hit in hits):
        return
    await client.call_tool("create_node", {  # type: ignore[attr-defined]
        "title": CLUSTER, "summary": "Claims distilled by background reviews.",
        "body": "Nodes written by osk's background reviews of conversations.\n",
        "space": "scope", "cluster": CLUSTER, "drafter": "fake-fork",
    })


def fire_stop_hook(host: str, answer: str) -> None:
    command = os.environ.get("FAKE_HOST_STOP_HOOK")
    if not command:
        return
    session = f"fork-of-{os.environ.get('OSK_GROWTH_JOB', 'none')}-{os.getpid()}"
    transcript = Path(os.environ.get("FAKE_HOST_LOG", "fake.log")).with_name(f"{session}.jsonl")
    common = {"isSidechain": False, "userType": "external", "cwd": os.getcwd(),
              "sessionId": session, "version": "2.1.97"}
    lines = [
        {**common, "type": "user", "uuid": "u1", "parentUuid": None,
         "timestamp": "2026-03-14T11:00:00.000Z",
         "message": {"role": "user", "content": "[osk background review] ..."}},
        {**common, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "requestId": "r1",
         "timestamp": "2026-03-14T11:00:01.000Z",
         "message": {"id": "msg_fork", "type": "message", "role": "assistant",
                     "content": [{"type": "text", "text": answer}]}},
    ]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    payload = {"session_id": session, "transcript_path": str(transcript), "cwd": os.getcwd(),
               "hook_event_name": "Stop", "stop_hook_active": False,
               "last_assistant_message": answer}
    subprocess.run(command, shell=True, input=json.dumps(payload), text=True, timeout=60,
                   check=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--as", dest="host", required=True)
    known, rest = parser.parse_known_args()
    prompt = read_prompt(known.host, rest)
    action = next_action()
    log({
        "host": known.host,
        "argv": rest,
        "action": action,
        "prompt": prompt,
        "fork_env": os.environ.get("OSK_GROWTH_FORK"),
        "job": os.environ.get("OSK_GROWTH_JOB"),
        "vault": os.environ.get("OSK_VAULT"),
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
    })
    if action == "fail":
        return 3
    if action == "kill-runner":
        os.kill(os.getppid(), signal.SIGKILL)
        return 0
    if action == "hang":
        while True:
            time.sleep(1)
    items = review(prompt, with_tools=action == "review")
    fire_stop_hook(known.host, f"Reviewed {len(items)} items.")
    print(json.dumps({"type": "result", "result": f"osk review done ({len(items)} items)"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
