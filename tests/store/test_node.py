"""The node contract: exactly the contract's keys, each checked, errors that name file and key."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from osk.errors import ContractError
from osk.store import contract, node, sources

HEADER_TRIALS = int(os.environ.get("OSK_HEADER_TRIALS", "4000"))

GOOD = {
    "id": "01938a6e-0000-7000-8000-000000000001",
    "created": "2026-11-29T18:02+09:00",
    "updated": "2026-11-29T09:05+00:00",
    "author": "agent",
    "drafter": "claude-opus-4",
    "summary": "Release builds run cargo dist, not cargo build.",
    "derived-from": ["[[_raw/app/conv-1#Round 3]]", "[[Release process]]"],
}


def text_with(**changes: object) -> str:
    meta = {**GOOD, **changes}
    lines = ["---"]
    for key, value in meta.items():
        if value is None:
            continue
        lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines) + "\n---\nBody.\n"


def test_render_then_parse_round_trips_the_contract_and_the_body():
    meta = contract.Frontmatter.model_validate(GOOD)
    body = "# 배포\n\nKorean and English body.\n---\nA horizontal rule is body text.\n"
    parsed = node.parse("Scope/app/release/Cargo dist.md", node.render(meta, body))
    assert parsed.meta == meta
    assert parsed.body == body
    assert (parsed.title, parsed.space, parsed.scope, parsed.cluster) == (
        "Cargo dist", "Scope", "app", "release")


def test_render_writes_keys_in_contract_order_and_quotes_ambiguous_scalars():
    meta = contract.Frontmatter.model_validate({**GOOD, "summary": "yes: it works #1"})
    text = node.render(meta, "Body.\n")
    assert text == (
        "---\n"
        "id: 01938a6e-0000-7000-8000-000000000001\n"
        "created: 2026-11-29T18:02+09:00\n"
        "updated: 2026-11-29T09:05+00:00\n"
        "author: agent\n"
        "drafter: claude-opus-4\n"
        'summary: "yes: it works #1"\n'
        "derived-from:\n"
        '  - "[[_raw/app/conv-1#Round 3]]"\n'
        '  - "[[Release process]]"\n'
        "---\n"
        # the sources section (docs/FORMAT.md §2): the links again, outside the body
        f"{sources.OPEN}\n"
        "- Derived from [[_raw/app/conv-1#Round 3|app/conv-1, round 3]], [[Release process]]\n"
        f"{sources.CLOSE}\n"
        "\n"
        "Body.\n"
    )


def test_an_unknown_key_is_refused_naming_the_file_and_the_key():
    with pytest.raises(ContractError) as caught:
        node.parse("Domain/x/A.md", text_with(tags=["a"]))
    assert caught.value.key == "tags"
    assert "Domain/x/A.md" in str(caught.value) and "not a contract key" in str(caught.value)


@pytest.mark.parametrize("key", ["id", "created", "updated", "author", "drafter", "summary"])
def test_a_missing_required_key_is_refused_by_name(key: str):
    with pytest.raises(ContractError) as caught:
        node.parse("Domain/A.md", text_with(**{key: None}))
    assert caught.value.key == key and "required" in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "key", "expected"),
    [
        ({"created": "2026-11-29T18:02"}, "created", "UTC offset"),
        ({"updated": "2026-11-29"}, "updated", "UTC offset"),
        ({"created": "2026-11-29T18:02:33+09:00"}, "created", "minutes"),
        ({"author": "bot"}, "author", "'user' or 'agent'"),
        ({"summary": "two\nlines"}, "summary", "one non-empty line"),
        ({"summary": "x" * 301}, "summary", "at most 300"),
        ({"derived-from": ["Plain title"]}, "derived-from", "[[target]]"),
        ({"derived-from": ["[[A]]", "[[A]]"]}, "derived-from", "at most once"),
    ],
)
def test_a_malformed_value_names_the_key_and_what_was_expected(changes, key, expected):
    with pytest.raises(ContractError) as caught:
        node.parse("Person/A.md", text_with(**changes))
    assert caught.value.key == key
    assert expected in str(caught.value)


def test_timestamps_with_any_offset_are_read_as_the_same_instant():
    from osk.store import clock

    assert clock.parse("2026-11-29T18:02+09:00") == clock.parse("2026-11-29T09:02+00:00")
    assert clock.parse("2026-11-29T09:02Z") == clock.parse("2026-11-29T09:02+00:00")


@pytest.mark.parametrize(
    "text",
    ["no front matter\n", "---\nid: x\n", "---\n- a list\n---\n", "---\nid: [unclosed\n---\n"],
)
def test_a_file_without_a_valid_front_matter_block_is_a_contract_error(text: str):
    with pytest.raises(ContractError):
        node.parse("Domain/A.md", text)


def test_trust_state_defaults_from_the_author():
    assert contract.Frontmatter.model_validate(GOOD).trust_state == "inferred"
    user = contract.Frontmatter.model_validate({**GOOD, "author": "user"})
    assert user.trust_state == "confirmed"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, derandomize=True, deadline=None)
@given(summary=st.text(min_size=1, max_size=80).filter(
           lambda s: s.strip() and contract._printable_line(s)),
       drafter=st.sampled_from(["claude-opus-4", "yes", "1.5", "2026-11-29", "a: b", "x #y",
                                "null", "gpt 5 ", "human", "True", "yES", "n", "on", "Off"]),
       files=st.lists(st.sampled_from(["file:Cargo.toml", "file:src/app.py", "file:a b.md",
                                       "file:docs/on: off.md", "file:yes", "file:x#y.py"]),
                      max_size=3, unique=True))
def test_the_fast_header_reader_agrees_with_yaml_on_everything_render_writes(summary, drafter,
                                                                             files):
    import yaml

    meta = contract.Frontmatter.model_validate({
        **GOOD, "summary": summary, "drafter": drafter,
        "derived-from": [*GOOD["derived-from"], *files]})
    text = node.render(meta, "Body.\n")
    header = text[len("---\n"):text.index("\n---\n") + 1]
    fast = node._canonical_header(header)
    assert fast is not None
    assert fast == yaml.safe_load(header)
    # a read of some keys alone gives them as the whole read does
    links = node._canonical_header(header, ("derived-from", "summary"))
    assert links == {key: fast[key] for key in ("derived-from", "summary")}


def test_control_characters_and_line_separators_are_not_a_summary():
    for bad in ("tab\u0007bell", "next\u0085line", "para\u2029graph", "del\u007f"):
        text = text_with(summary="PLACEHOLDER").replace('"PLACEHOLDER"', json.dumps(bad))
        with pytest.raises(ContractError, match="printable"):
            node.parse("Domain/A.md", text)


def test_a_node_citing_a_project_file_is_read_without_yaml():
    """osk writes a file: link bare; reading a node's links back (as a fresh search reads its
    hits') must not cost an import of YAML (8 ms of a fresh search whose hit cites a file)."""
    meta = contract.Frontmatter.model_validate(
        {**GOOD, "derived-from": ["[[Release process]]", "file:Cargo.toml"]})
    text = node.render(meta, "Body.\n")
    assert "\n  - file:Cargo.toml\n" in text
    program = ("import sys; from osk.store import node; "
               f"front, _ = node.split_frontmatter('Domain/A.md', {text!r}, ('derived-from',)); "
               "assert front == {'derived-from': ['[[Release process]]', 'file:Cargo.toml']}; "
               "print('yaml' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_letter_led_scalars_are_answered_as_yaml_would_or_left_to_it():
    """The YAML-free answer for a scalar that starts with a letter: never "a string" where
    YAML reads something else; "not a string" only for spellings of YAML's words."""
    import yaml

    words = ["yes", "Yes", "YES", "yES", "no", "No", "true", "True", "TRUE", "false", "on",
             "On", "OFF", "off", "null", "Null", "NULL", "nULL", "y", "n", "Y", "N", "human",
             "claude-opus-4", "file:Cargo.toml", "file:a b.md", "x1.5", "e10", "inf", "nan",
             "yesterday", "nothing", "one", "t"]
    for word in words:
        answer = node._reads_as_string(word)
        if answer:
            assert yaml.safe_load(word) == word, word
        else:
            assert word.lower() in node._AMBIGUOUS, word


def test_hand_written_yaml_falls_back_to_the_yaml_reader():
    header = "id: x\nsummary: >\n  folded\n"
    assert node._canonical_header(header) is None
    assert node._canonical_header("summary: 42\n") is None
    # a key not asked for is not read, but its line must still be osk's form
    assert node._canonical_header(header, ("id",)) is None
    assert node._canonical_header("summary: 42\nid: x\n", ("id",)) == {"id": "x"}
    assert node._canonical_header('derived-from:\n  - "[[A]]"\nid: x\nid: y\n',
                                  ("derived-from",)) is None  # a key twice: YAML's call


def test_a_key_with_nothing_after_it_reads_as_null_as_yaml_reads_it():
    """Obsidian writes a property left empty as ``key:`` alone. YAML reads that as null: an
    optional key left empty is absent, not an empty list the contract refuses."""
    import yaml

    header = ('id: x\ncreated: 2026-11-29T18:00+00:00\nupdated: 2026-11-29T18:00+00:00\n'
              'author: agent\ndrafter: m\nsummary: s\ntrust:\nderived-from:\n'
              '  - "[[A]]"\nvalid_to:\n')
    fast = node._canonical_header(header)
    assert fast == yaml.safe_load(header)
    assert fast is not None and fast["trust"] is None and fast["valid_to"] is None
    text = f"---\n{header}---\nBody.\n"
    parsed = node.parse("Domain/A.md", text)
    assert parsed.meta.trust is None and parsed.meta.valid_to is None
    assert parsed.meta.derived_from == ["[[A]]"]
    # a list key left empty (its last item deleted) is null too: no links, to the contract
    emptied = text.replace('derived-from:\n  - "[[A]]"\n', "derived-from:\n")
    assert node.split_frontmatter("Domain/A.md", emptied)[0]["derived-from"] is None
    assert node.parse("Domain/A.md", emptied).meta.derived_from == []
    assert contract.Frontmatter.model_validate(
        {**GOOD, "derived-from": None, "conflicts": None}).conflicts == []


# Hand-written front matter: scalars YAML reads in other ways (numbers, dates, booleans, null,
# flow collections, anchors, comments), quoted and not, in lines near osk's own form.
_TRICKY = ["[[A]]", "[[A|b]]", "file:x.py", "file:a b.py", "a: b", "x #y", "x#y", "yes", "No",
           "0:", "12", "1e3", "2026-11-29", "2026-11-29T18:00+00:00", "2026-11-29 18:00", "~",
           "null", "human", "-", "a-b", ".5", "+1", "0x1F", "0o17", "1_000", ":", "a:b", "-a",
           "?", "@x", "%x", "!x", "&a", "*a", "|", ">", "a\tb", "é", "한국어", "a ", "", "true",
           "on", "n", ".inf", ".nan", "1:20", "0b101", "012", "1.", "x1.5", "a,b", "{a}", "[a]",
           'b"c', "00:00"]
_KEYS = [*node.KEYS, "tags"]


def _hand_written_header(rng: random.Random) -> str:
    def scalar() -> str:
        value, form = rng.choice(_TRICKY), rng.random()
        if form < 0.25:
            return json.dumps(value, ensure_ascii=rng.random() < 0.5)
        return "'" + value.replace("'", "''") + "'" if form < 0.3 else value

    lines = []
    for _ in range(rng.randint(1, 3)):
        key, form = rng.choice(_KEYS), rng.random()
        if form < 0.45:
            separator = rng.choice([": "] * 8 + [":", ":  ", ":\t"])
            lines.append(key + separator + scalar() + rng.choice([""] * 10 + [" # c", " "]))
        elif form < 0.6:
            lines.append(f"{key}: " + rng.choice(["[]", "[ ]", "[a]", '["[[A]]"]', "{}", ""]))
        else:
            lines.append(f"{key}:" + rng.choice(["", "", " # c"]))
            lines.extend(rng.choice(["  - "] * 10 + ["- ", "    - ", "  -", "\t- "]) + scalar()
                         for _ in range(rng.randint(0, 3)))
    return "\n".join(lines) + "\n"


def test_the_fast_header_reader_agrees_with_yaml_on_every_hand_written_header_it_reads():
    """Whatever header the YAML-free reader answers (it leaves the rest to YAML), YAML reads
    the same: a key left empty, a list's items indented otherwise, quoted scalars, numbers,
    dates and YAML's words among them. OSK_HEADER_TRIALS headers (seeded)."""
    import yaml

    rng, answered = random.Random(20261207), 0
    for _ in range(HEADER_TRIALS):
        header = _hand_written_header(rng)
        fast = node._canonical_header(header)
        if fast is not None:
            answered += 1
            assert fast == yaml.load(header, Loader=node._yaml_loader()), header
    assert answered > HEADER_TRIALS // 20  # the reader answered a fair share of them


def test_the_keys_a_read_names_without_the_model_are_the_models():
    fields = contract.Frontmatter.model_fields
    assert node.KEYS == contract.KEYS == tuple(f.alias or name for name, f in fields.items())
    assert node.REQUIRED_KEYS == contract.REQUIRED_KEYS
    assert all(fields[key].alias is None for key in node.REQUIRED_KEYS)  # the catalog's check
