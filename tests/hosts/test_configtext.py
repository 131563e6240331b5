"""The config-text editors behind `osk setup`: any document, any layout, exact round trips."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from osk.errors import SetupError
from osk.hosts.configtext import JsonHook, JsonMember, OwnedFile, TextBlock
from osk.hosts.jsontext import JsonText

EXAMPLES = int(os.environ.get("OSK_SETUP_EXAMPLES", "150"))
PATH = Path("/home/someone/settings.json")
OURS = {"type": "stdio", "command": "/venv/bin/osk", "args": ["--vault", "/v", "mcp"]}
GROUP = {"hooks": [{"type": "command", "command": "/venv/bin/osk hook stop --host claude "
                                                  "--vault /v", "timeout": 30}]}

scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
keys = st.sampled_from(["mcpServers", "hooks", "model", "é", "", "projects"]) | st.text(max_size=5)
documents = st.dictionaries(keys, values, max_size=5)
layouts = st.sampled_from([None, 0, 1, 2, 4, "\t"])
separators = st.sampled_from([None, (",", ":"), (", ", ": ")])


def render(doc: dict[str, object], indent: object, seps: object, tail: str) -> str:
    return json.dumps(doc, indent=indent, separators=seps, ensure_ascii=False) + tail


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, indent=layouts, seps=separators, tail=st.sampled_from(["", "\n"]),
       nested=st.booleans())
def test_adding_then_removing_our_member_gives_back_the_original_bytes(
    doc: dict[str, object], indent: object, seps: object, tail: str, nested: bool
) -> None:
    text = render(doc, indent, seps, tail)
    path = ("projects", "/p", "mcpServers", "osk") if nested else ("mcpServers", "osk")
    edit = JsonMember(PATH, path, OURS)
    # Every object on the way must be an object or missing; anything else is refused.
    if any(_at(doc, path[:depth]) not in (MISSING,) and not isinstance(_at(doc, path[:depth]),
                                                                        dict)
           for depth in range(1, len(path))):
        with pytest.raises(SetupError, match="not an object"):
            edit.apply(text, False, None)
        return
    if _at(doc, path) is not MISSING:
        return  # the document already holds a member of our name

    installed, memo = edit.apply(text, False, None)

    assert installed is not None
    data = json.loads(installed)
    assert _at(data, path) == OURS
    removed_again, _ = edit.apply(installed, True, memo)
    assert removed_again == text


MISSING = object()


def _at(data: object, path: tuple[str, ...]) -> object:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return MISSING
        data = data[key]
    return data


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None)
@given(groups=st.lists(st.dictionaries(st.sampled_from(["matcher", "hooks"]), values,
                                       max_size=2), max_size=3),
       indent=layouts, seps=separators)
def test_our_hook_group_comes_and_goes_without_touching_the_users_groups(
    groups: list[dict[str, object]], indent: object, seps: object
) -> None:
    text = render({"hooks": {"Stop": groups}, "x": 1}, indent, seps, "\n")
    edit = JsonHook(PATH, "Stop", GROUP, lambda group: group == GROUP)
    if GROUP in groups:
        return

    installed, memo = edit.apply(text, False, None)

    assert json.loads(installed or "")["hooks"]["Stop"] == [*groups, GROUP]
    assert edit.apply(installed, False, memo)[0] == installed  # idempotent
    assert edit.apply(installed, True, memo)[0] == text


def test_a_member_added_to_a_one_line_object_in_a_pretty_file_stays_on_one_line() -> None:
    text = '{\n  "permissions": {"allow": ["Read"]},\n  "model": "opus"\n}\n'
    doc = JsonText(text, PATH)

    doc.set(("permissions", "deny"), ["Bash(rm:*)"])

    assert doc.text == ('{\n  "permissions": {"allow": ["Read"], "deny": ["Bash(rm:*)"]},\n'
                        '  "model": "opus"\n}\n')


def test_new_members_follow_the_files_indentation() -> None:
    text = '{\n\t"a": 1\n}'
    doc = JsonText(text, PATH)

    doc.set(("mcpServers", "osk"), {"command": "c"})

    assert doc.text == '{\n\t"a": 1,\n\t"mcpServers": {\n\t\t"osk": {\n\t\t\t"command": "c"\n' \
                       '\t\t}\n\t}\n}'


@pytest.mark.parametrize("text", ["", "[]", "{", '{"a": 1,}', "// comment\n{}"])
def test_text_that_is_not_a_json_object_is_refused(text: str) -> None:
    with pytest.raises(SetupError, match=str(PATH)):
        JsonText(text, PATH)


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None)
@given(text=st.text(st.sampled_from("ab #\n<>-!"), max_size=40))
def test_our_markdown_block_comes_and_goes_leaving_the_users_text_byte_for_byte(
    text: str
) -> None:
    if ">>> osk" in text:
        return
    edit = TextBlock(PATH.with_name("GEMINI.md"), "antigravity", "Call append_raw.\n", "<!--")

    installed, memo = edit.apply(text, False, None)

    assert installed is not None and installed.startswith(text)
    assert "Call append_raw.\n<!-- <<< osk <<< -->" in installed
    assert edit.apply(installed, False, memo)[0] == installed  # idempotent
    assert edit.apply(installed, True, memo)[0] == text


def test_a_block_with_a_begin_line_but_no_end_line_is_refused() -> None:
    edit = TextBlock(PATH.with_name("GEMINI.md"), "antigravity", "ours\n", "<!--")
    installed, _ = edit.apply("mine\n", False, None)
    assert installed is not None
    damaged = installed.replace("<!-- <<< osk <<< -->\n", "")

    with pytest.raises(SetupError, match="no end line"):
        edit.apply(damaged, True, None)


def test_a_file_that_is_not_ours_is_refused_where_a_whole_file_of_ours_goes() -> None:
    edit = OwnedFile(PATH.with_name("osk.md"), "ours, managed by osk setup\n",
                     lambda text: "managed by osk setup" in text)

    assert edit.apply(None, False, None)[0] == "ours, managed by osk setup\n"
    with pytest.raises(SetupError, match="was not written by osk setup"):
        edit.apply("the user's own notes\n", False, None)
