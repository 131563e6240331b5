"""Who said a round's words, when the round holds a transcript with its speakers named.

A round may carry several people's lines, each behind its speaker's name: a chat or meeting
notes pasted into a prompt ("Alice: ... Bob: ..."), an agent's answer quoting who said what,
a conversation captured turn by turn. A prompt that names one of them ("what did Bob decide
about the cache?") asks about that person's lines; the same words said by someone else answer
another question. The rule (``unsaid``): when a prompt names a person who speaks in a round
(a turn label: a capitalised word followed by ``:``, at the text's start or after white
space; named: the prompt writes the word capitalised too, as names are written, so "the
error" does not name an ``Error:`` line) and the round has other speakers the prompt does
not name, the prompt's words that only those others say are not the round's to count for
this prompt. Each line is read by sentence, for whom it speaks of: a question the named
person asks ("Bob: did you fix the deploy?") or a sentence they address to someone ("you",
"your": "Bob: your fix looks good") says nothing of what they did, so its words are not
theirs (nor anyone else's); another speaker's sentence addressed to someone ("Alice: thanks,
you saved the release") may speak of the named person, so its words count for them as well.
Words before the first label, the named person's other words, and the names themselves count
as before; a round with one speaker, or whose speakers the prompt names all or none of, is
left as it is. The round index keeps each round's text on one line, so a label is found
wherever it stands; a capitalised word before a colon inside someone's line ("Note:") cuts
it there too (what follows counts as that label's), a known limit of reading one line.

Standard library only: the prompt-submit hook reads it.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from osk.search.tokenize import tokenize_prose

# A turn label: one capitalised word (a name: letters, digits, ' . -) and a colon, then white
# space or the end. "Note:" is one too; it only splits the lines around it, and counts only
# when a prompt names it.
_CAPITALISED = re.compile(r"\b[A-Z][\w'.-]*")
# A sentence: up to its end mark (the last one without one runs to the text's end).
_SENTENCE = re.compile(r"[^.!?]*[.!?]+|[^.!?]+$")
# A sentence that addresses someone (English): it speaks of the one addressed.
_YOU = re.compile(r"\b(?:you|your|yours|yourself|y'all)\b", re.IGNORECASE)
_LABEL = re.compile(r"(?:^|(?<=\s))([A-Z][\w'.-]{0,39}):(?=\s|$)")


def turns(text: str) -> list[tuple[str, str]]:
    """``text`` cut at its turn labels: (speaker, what they said) in order; the text before
    the first label has the speaker ""."""
    found: list[tuple[str, str]] = []
    speaker, start = "", 0
    for match in _LABEL.finditer(text):
        found.append((speaker, text[start:match.start()]))
        speaker, start = match.group(1), match.end()
    found.append((speaker, text[start:]))
    return [(who, said) for who, said in found if who or said.strip()]


def names_in(prompt: str) -> frozenset[str]:
    """The terms of the words ``prompt`` writes capitalised, as a name is written ("Alice",
    "Alice's"), each as ``tokenize_prose`` makes it: a prompt asking about "the error" does
    not name the round's ``Error:`` label."""
    return frozenset(term for word in _CAPITALISED.findall(prompt)
                     for term in tokenize_prose(word))


def unsaid(text: str, asked: Collection[str], names: Collection[str]) -> frozenset[str]:
    """The terms of ``asked`` (a prompt's terms, as ``tokenize_prose`` makes them) that
    ``text`` holds only in the lines of speakers the prompt does not name, when it names one
    (``names``: ``names_in`` the prompt) who speaks in ``text`` and not every speaker there;
    else none."""
    if ":" not in text or not names:
        return frozenset()
    said = turns(text)
    labels = {who: set(tokenize_prose(who)) for who, _ in said if who}
    named = {who for who, terms in labels.items() if terms & set(names)}
    if not named or len(named) == len(labels):
        return frozenset()
    theirs: set[str] = set()
    others: set[str] = set()
    for who, words in said:
        for sentence in _SENTENCE.findall(words) if who else (words,):
            held = {term for term in tokenize_prose(sentence) if term in asked}
            if not who:
                theirs.update(held)
            elif who in named:  # what they ask, or say of someone they address, is not theirs
                if not sentence.rstrip().endswith("?") and not _YOU.search(sentence):
                    theirs.update(held)
            elif _YOU.search(sentence):  # another speaker's words of the one they address
                if not sentence.rstrip().endswith("?"):
                    theirs.update(held)
            else:
                others.update(held)
    return frozenset(others - theirs - {t for who in named for t in labels[who]})
