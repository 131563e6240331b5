"""What the secret filter (``osk.capture.secrets``) looks for: one detector per kind of secret
(vendor tokens, private key blocks, credentials in context: auth headers, URL passwords,
assignments, command-line flags, config files, prose), each reporting the spans it finds.
Standard library only (the hook path runs the filter on every capture).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from osk.capture.patterns import lazy
from osk.capture.secret_values import (
    KEYWORDS,
    MARKER,
    TYPE_WORDS,
    Found,
    credential_like,
    each_match,
    ends_statement,
    has_digit,
    identifier_like,
    is_placeholder,
    line_prefix,
    literal_like,
    mixed_token,
    names_itself,
    rest_of_line,
)


def _secret_groups(pattern: re.Pattern[str], kind: str) -> Callable[[str], Found]:
    """A detector that reports every match's ``secret`` group as ``kind``."""
    def detect(text: str) -> Found:
        for match in pattern.finditer(text):
            yield match.start("secret"), match.end("secret"), kind
    return detect

@cache
def _pattern(source: str) -> re.Pattern[str]:
    """A detector's pattern, compiled on first use: every hook process imports the filter,
    and most texts never reach the detectors that need these."""
    return re.compile(source)


def _matches_at(pattern: re.Pattern[str], text: str, words: tuple[str, ...]
                ) -> list[re.Match[str]]:
    """Matches of ``pattern`` tried only where one of ``words`` (lower case) begins: a
    substring search finds the few places a case-blind pattern could start far faster than
    the pattern's own scan of every position."""
    lower = text.lower() if text.isascii() else text.casefold()
    if len(lower) != len(text):  # case folding moved offsets (rare letters): scan instead
        return list(pattern.finditer(text))
    starts = sorted({i for word in words for i in _occurrences(lower, word)})
    found: list[re.Match[str]] = []
    for start in starts:
        if found and start < found[-1].end():
            continue
        match = pattern.match(text, start)
        if match is not None:
            found.append(match)
    return found


def _occurrences(text: str, word: str) -> list[int]:
    found, at = [], text.find(word)
    while at >= 0:
        found.append(at)
        at = text.find(word, at + 1)
    return found


def _example_key(body: str) -> bool:
    """AWS's documentation key (``AKIAIOSFODNN7EXAMPLE``) and masks (``AKIAXXXXXXXXXXXXXXXX``)."""
    return body.endswith("EXAMPLE") or len(set(body[4:])) <= 2


# -- detectors: whole-match tokens ------------------------------------------------------------

# (kind, pattern, check on the part after the first "-", substrings one of which must occur)
_TOKENS: tuple[tuple[str, re.Pattern[str], Callable[[str], bool] | None, tuple[str, ...]],
               ...] = (
    ("aws-access-key-id", lazy(
        r"(?<![A-Za-z0-9+/])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)"
        r"[A-Z0-9]{16}(?![A-Za-z0-9])"), lambda body: not _example_key(body),
     ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA",
      "ASCA")),
    ("github-token", lazy(
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})"
        r"(?![A-Za-z0-9_])"), None, ("gh", "github_pat_")),
    ("gitlab-token", lazy(
        r"(?<![A-Za-z0-9_-])gl(?:pat|ptt|dt|rt|cbt|soat|ffct|ft|imt|agent|oas)-[A-Za-z0-9_-]{20,}"),
     None, ("gl",)),
    ("slack-token", lazy(
        r"(?<![A-Za-z0-9_-])(?:xox[abeoprs]|xoxe\.xox[bp]|xapp)-[A-Za-z0-9-]{10,}"), has_digit,
     ("xox", "xapp-")),
    ("anthropic-key", lazy(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"), None,
     ("sk-ant-",)),
    ("openai-key", lazy(
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), mixed_token,
     ("sk-",)),
    ("stripe-key", lazy(
        r"(?<![A-Za-z0-9_])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{32,})"),
     None, ("k_live_", "k_test_", "whsec_")),
    ("google-api-key", lazy(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
     None, ("AIza",)),
    ("npm-token", lazy(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), None,
     ("npm_",)),
    ("pypi-token", lazy(r"(?<![A-Za-z0-9_-])pypi-AgE[A-Za-z0-9_-]{50,}"), None,
     ("pypi-AgE",)),
    ("huggingface-token", lazy(
        r"(?<![A-Za-z0-9_])(?:hf|api_org)_[A-Za-z0-9]{34,40}(?![A-Za-z0-9])"), None,
     ("hf_", "api_org_")),
    ("jwt", lazy(
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{6,}\.ey[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*"), None,
     ("eyJ",)),
)


# Vendor tokens whose documented shape is distinctive on its own: a fixed prefix, an alphabet and
# a length (read from each vendor's documentation and the families gitleaks and detect-secrets
# name; the patterns are ours). Each is (kind, pattern, needles); a pattern with a ``secret``
# group redacts only that group. Compiled on first use: most texts hold none of the needles,
# and the hook path should not pay for compiling what it never runs.
_B = r"(?<![A-Za-z0-9_-])"  # not inside a longer word
_E = r"(?![A-Za-z0-9_-])"
_VENDOR_TOKENS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("sendgrid-key", _B + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _E, ("SG.",)),
    ("twilio-key", _B + r"SK[0-9a-f]{32}" + _E, ("SK",)),
    ("mailgun-key", _B + r"key-(?=[a-z]*[0-9])[0-9a-z]{32}" + _E, ("key-",)),
    ("mailchimp-key", _B + r"[0-9a-f]{32}-us[0-9]{1,2}" + _E, ("-us",)),
    ("shopify-token", _B + r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}" + _E, ("shp",)),
    ("digitalocean-token", _B + r"do[opr]_v1_[0-9a-f]{64}" + _E, ("_v1_",)),
    ("doppler-token", _B + r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}" + _E,
     ("dp.",)),
    ("databricks-token", _B + r"dapi[0-9a-f]{32}(?:-[0-9])?" + _E, ("dapi",)),
    ("vault-token", _B + r"hv[sbr]\.(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{24,}" + _E,
     ("hvs.", "hvb.", "hvr.")),
    ("terraform-token", _B + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,70}" + _E,
     (".atlasv1.",)),
    ("linear-key", _B + r"lin_(?:api|oauth)_[A-Za-z0-9]{40}" + _E, ("lin_",)),
    ("notion-token", _B + r"(?:ntn_[A-Za-z0-9]{46}|secret_(?=[A-Za-z]*[0-9])[A-Za-z0-9]{43})"
     + _E, ("ntn_", "secret_")),
    ("postman-key", _B + r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}" + _E, ("PMAK-",)),
    ("grafana-token", _B + r"(?:glsa_[A-Za-z0-9]{32}_[0-9a-f]{8}|glc_[A-Za-z0-9+/]{32,400}={0,2})"
     + _E, ("glsa_", "glc_")),
    ("sentry-token", _B + r"(?:sntryu_[0-9a-f]{64}|sntrys_eyJ[A-Za-z0-9+/=_-]{60,})" + _E,
     ("sntry",)),
    ("planetscale-token", _B + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}" + _E,
     ("pscale_",)),
    ("pulumi-token", _B + r"pul-[0-9a-f]{40}" + _E, ("pul-",)),
    ("rubygems-key", _B + r"rubygems_[0-9a-f]{48}" + _E, ("rubygems_",)),
    ("clojars-token", _B + r"CLOJARS_[a-z0-9]{60}" + _E, ("CLOJARS_",)),
    ("atlassian-token", _B + r"ATATT3[A-Za-z0-9_=-]{150,}" + _E, ("ATATT3",)),
    ("square-token", _B + r"(?:EAAA[A-Za-z0-9_-]{60}|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43})" + _E,
     ("EAAA", "sq0")),
    ("facebook-token", _B + r"EAA[A-Za-z0-9]*[0-9][A-Za-z0-9]{90,}" + _E, ("EAA",)),
    ("dropbox-token", r"(?<![A-Za-z0-9_.-])sl\.(?:u\.)?[A-Za-z0-9_-]{130,}" + _E, ("sl.",)),
    ("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
     ("AGE-SECRET-KEY-",)),
    ("1password-key", _B + r"(?:A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})"
     r"(?:-[A-Z0-9]{5}){3}|ops_eyJ[A-Za-z0-9+/=_-]{200,})" + _E, ("A3-", "ops_eyJ")),
    ("flyio-token", _B + r"(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/=_-]{100,})" + _E,
     ("fo1_", "fm1", "fm2")),
    ("figma-token", _B + r"fig[dhu]_[A-Za-z0-9_-]{40}" + _E, ("fig",)),
    ("supabase-key", _B + r"(?:sbp_[0-9a-f]{40}|sb_secret_[A-Za-z0-9_-]{31,})" + _E,
     ("sbp_", "sb_secret_")),
    ("heroku-key", _B + r"HRKU-AA[A-Za-z0-9_-]{58}" + _E, ("HRKU-",)),
    ("groq-key", _B + r"gsk_[A-Za-z0-9]{52}" + _E, ("gsk_",)),
    ("perplexity-key", _B + r"pplx-[A-Za-z0-9]{48}" + _E, ("pplx-",)),
    ("xai-key", _B + r"xai-[A-Za-z0-9]{80}" + _E, ("xai-",)),
    ("replicate-token", _B + r"r8_[A-Za-z0-9]{37}" + _E, ("r8_",)),
    ("newrelic-key", _B + r"(?:NR(?:AK|II|AA|IQ)-[A-Z0-9]{27,32}|NRJS-[0-9a-f]{19})" + _E,
     ("NRAK-", "NRII-", "NRAA-", "NRIQ-", "NRJS-")),
    ("dynatrace-token", _B + r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}" + _E, ("dt0c01.",)),
    ("cloudflare-origin-ca-key", _B + r"v1\.0-[0-9a-f]{24}-[0-9a-f]{146}" + _E, ("v1.0-",)),
    ("telegram-bot-token", r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}" + _E, (":AA",)),
    ("discord-token", r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\."
     r"[A-Za-z0-9_-]{27,38}" + _E, ("MT", "Mj", "Mz", "ND", "NT", "Nj", "Nz", "OD", "OT")),
    ("alibaba-access-key-id", _B + r"LTAI(?=[A-Za-z]*[0-9])[A-Za-z0-9]{12,20}" + _E, ("LTAI",)),
    ("azure-client-secret", r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"
     r"(?![A-Za-z0-9_~.-])", ("Q~",)),
    ("docker-hub-token", _B + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}" + _E, ("dckr_",)),
    ("artifactory-key", _B + r"AKCp[0-9][A-Za-z0-9]{67,}" + _E, ("AKCp",)),
    ("easypost-key", _B + r"EZ[AT]K[A-Za-z0-9]{54}" + _E, ("EZAK", "EZTK")),
    ("twitter-bearer-token", _B + r"A{20,}(?=[A-Za-z0-9%]*[0-9])[A-Za-z0-9%]{40,}" + _E,
     ("A" * 20,)),
    ("brevo-key", _B + r"xkeysib-[0-9a-f]{64}-[A-Za-z0-9]{16}" + _E, ("xkeysib-",)),
    ("mapbox-token", _B + r"sk\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}" + _E, ("sk.eyJ",)),
    ("google-oauth-secret", _B + r"GOCSPX-[A-Za-z0-9_-]{28}" + _E, ("GOCSPX-",)),
    ("google-oauth-token", _B + r"ya29\.[A-Za-z0-9_-]{30,}" + _E, ("ya29.",)),
    ("buildkite-token", _B + r"bkua_[0-9a-f]{40}" + _E, ("bkua_",)),
    ("netlify-token", _B + r"nfp_[A-Za-z0-9]{36}" + _E, ("nfp_",)),
    ("webhook-url", r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{6,}/"
     r"(?P<secret>[A-Za-z0-9_-]{30,})", ("/api/webhooks/",)),
    ("webhook-url", r"https://[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/"
     r"(?P<secret>[^\s\"'<>]{20,})", (".webhook.office.com/",)),
    ("webhook-url", r"https://hooks\.zapier\.com/hooks/catch/(?P<secret>[0-9]+/[A-Za-z0-9]+)",
     ("hooks.zapier.com/",)),
    ("azure-storage-key", r"(?i:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{40,88}"
     r"={0,2})", ("AccountKey=", "SharedAccessKey=")),
    ("azure-sas-signature", r"[?&;]sig=(?P<secret>[A-Za-z0-9%+/]{30,}(?:=|%3[Dd]){0,2})",
     ("sig=",)),
)


def _vendor_detector(kind: str, source: str) -> Callable[[str], Found]:
    def detect(text: str) -> Found:
        pattern = _pattern(source)
        group = "secret" if "secret" in pattern.groupindex else 0
        for match in pattern.finditer(text):
            yield match.start(group), match.end(group), kind
    return detect


def _token_detector(kind: str, pattern: re.Pattern[str],
                    check: Callable[[str], bool] | None) -> Callable[[str], Found]:
    def accept(match: re.Match[str]) -> tuple[int, int, str] | None:
        body = match.group().split("-", 1)[-1]
        return (match.start(), match.end(), kind) if check is None or check(body) else None

    def detect(text: str) -> Found:
        return each_match(pattern, text, accept)
    return detect


# -- detectors: private key blocks ------------------------------------------------------------

_PEM_BEGIN = lazy(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = lazy(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PEM_HEADER_LINE = lazy(r"(?m)^[ \t]*[A-Za-z][A-Za-z-]*:[^\n]*$")
_PEM_JUNK = lazy(r"\\[nr]|\s")
_PEM_BODY = lazy(r"[A-Za-z0-9+/=]{16,}")
# An unterminated block (a paste cut short): the base64 lines that follow the BEGIN line.
_PEM_TAIL = lazy(
    r"(?:(?:\\n|\r?\n)(?:[ \t]*(?:\\n|\r?\n))?[ \t]*"
    r"(?:[A-Za-z][A-Za-z-]*: [^\n\\]*|[A-Za-z0-9+/=]{16,}(?=[ \t]*(?:\\n|\r?\n|$|[\"',]))))+"
)


def _private_keys(text: str) -> Found:
    position = 0
    end: re.Match[str] | None = None
    while (begin := _PEM_BEGIN.search(text, position)) is not None:
        if end is not None and end.start() < begin.end():
            end = None
        if end is None:
            end = _PEM_END.search(text, begin.end())
            if end is None:  # no END anywhere later: every remaining block is unterminated
                yield from _unterminated_keys(text, begin)
                return
        following = _PEM_BEGIN.search(text, begin.end(), end.start())
        if following is None:
            body = _PEM_JUNK.sub("", _PEM_HEADER_LINE.sub("", text[begin.end():end.start()]))
            if _PEM_BODY.fullmatch(body):
                yield begin.start(), end.end(), "private-key"
            else:  # something else sits before END: judge the BEGIN block on its own
                yield from _unterminated_keys(text, begin, limit=end.start())
            position = end.end()
            continue
        yield from _unterminated_keys(text, begin, limit=following.start())
        position = following.start()


def _unterminated_keys(text: str, begin: re.Match[str] | None, limit: int | None = None) -> Found:
    """A block cut short (a paste that lost its END line): BEGIN and the base64 lines after."""
    while begin is not None:
        stop = len(text) if limit is None else limit
        tail = _PEM_TAIL.match(text, begin.end(), stop)
        if tail is not None and _PEM_BODY.search(tail.group()):
            yield begin.start(), tail.end(), "private-key"
        if limit is not None:
            return
        begin = _PEM_BEGIN.search(text, begin.end())


# -- detectors: credentials in context --------------------------------------------------------

_AWS_SECRET = lazy(
    r"(?i)(?<![A-Za-z0-9])(?:aws[-_ .]?secret[-_ ]?(?:access[-_ ]?)?key"
    r"|secret[-_ ]?access[-_ ]?key)"
    r"(?:[ \t]*\[[^\]\n]*\])?[\"']?(?:[ \t]*(?:=>|:=|=|:)[ \t]*|[ \t]+)[\"']?"
    r"(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
)
# A secret access key beside its key id: the console's CSV download (``AKIA…,secret``), a key
# pair written ``AKIA… / secret`` or ``AKIA…:secret``.
_AWS_PAIR = (
    r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}[\"']?[ \t]*[,;:|/][ \t]*[\"']?"
    r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)


def _aws_secrets(text: str) -> Found:
    matches = [*_matches_at(_AWS_SECRET, text, ("aws", "secret")),
               *_pattern(_AWS_PAIR).finditer(text)]
    for match in matches:
        if mixed_token(match["secret"]) or any(c in "/+" for c in match["secret"]):
            yield match.start("secret"), match.end("secret"), "aws-secret-key"


_AUTH_HEADER = lazy(
    r"(?i)(?<![A-Za-z0-9-])(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?P<scheme>bearer|basic|token|bot)[ \t]+(?P<secret>[A-Za-z0-9._~+/=-]++)(?!:)"
)
_AUTH_KINDS = {"bearer": "bearer-token", "basic": "basic-auth", "token": "auth-token",
               "bot": "auth-token"}


def _auth_headers(text: str) -> Found:
    def accept(match: re.Match[str]) -> tuple[int, int, str] | None:
        scheme = match["scheme"].lower()
        if not credential_like(match["secret"], scheme):
            return None
        return match.start("secret"), match.end("secret"), _AUTH_KINDS[scheme]
    return each_match(_AUTH_HEADER, text, accept)


_SLACK_WEBHOOK = lazy(
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>T[A-Z0-9]{6,}/"
    r"[A-Za-z0-9/_-]{8,})"
)


_slack_webhooks = _secret_groups(_SLACK_WEBHOOK, "slack-webhook")


_URL_PASSWORD = lazy(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://(?P<user>[^\s:/@'\"<>\[\]]*)"
    r":(?P<secret>[^\s/'\"<>]+)@(?=[A-Za-z0-9\[])"
)


def _url_passwords(text: str) -> Found:
    """``scheme://user:password@host``; a password pasted unencoded may hold ``#``, ``?`` or
    ``@`` (the last ``@`` before the host ends it). ``host:8080?q=a@b`` is a port, not one."""
    def accept(match: re.Match[str]) -> tuple[int, int, str] | None:
        secret = match["secret"]
        if is_placeholder(secret) or re.match(r"[0-9]+(?:[?#]|$)", secret):
            return None
        return match.start("secret"), match.end("secret"), "password"
    return each_match(_URL_PASSWORD, text, accept)


# Key names (lower-cased, separators removed) whose value is a secret, by suffix.
_KEY_SUFFIXES = (
    ("passphrase", "password"), ("password", "password"), ("passwd", "password"),
    ("secretkey", "secret"), ("secret", "secret"), ("apikey", "api-key"),
    ("accesskey", "access-key"), ("privatekey", "private-key"), ("token", "token"),
)
_KEY_SEPARATORS = lazy(r"[-_.]")

_ASSIGNMENT = lazy(
    r"(?<![A-Za-z0-9_.$@-])(?P<dash>--?)?(?P<kq>[\"']?)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*+)(?P=kq)"
    r"(?P<pre>[ \t]*)(?P<sep>:=|=>|=(?!=)|:(?![:/]))(?P<post>[ \t]*)"
    r"(?P<value>\[REDACTED:[a-z0-9-]+\]|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|`[^`\n]*`"
    r"|[^\s\"'`,;&)}\]]+)?"
)


# ``ADMIN_PASS``, ``db_pass``, ``adminPass``, ``Pwd`` name a password; ``bypass`` and ``compass``
# do not, so the short forms count only after a separator, at a camel hump, or alone.
_SHORT_PASSWORD_KEY = lazy(r"(?i:(?:^|[-_.])(?:pass|pwd))$|[a-z0-9](?:Pass|Pwd)$")


def _key_kind(key: str) -> str | None:
    flat = _KEY_SEPARATORS.sub("", key.lower())
    for suffix, kind in _KEY_SUFFIXES:
        if flat.endswith(suffix):
            return kind
    return "password" if _SHORT_PASSWORD_KEY.search(key) else None


def _path_like(value: str) -> bool:
    """``PWD=/home/dev``: the shell's working directory, not a password."""
    return (value.startswith(("/", "~/", "./", "../")) or value == "~"
            or bool(re.match(r"[A-Za-z]:[\\/]", value)))


def _token_shaped(value: str) -> bool:
    """A ``token`` key also names parser tokens (``token = "def"``); real ones look random."""
    if len(value) < 8 or any(c.isspace() for c in value):
        return False
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return any(c.isdigit() for c in value) or (mixed and len(value) >= 20)


def _assignments(text: str) -> Found:
    position = 0
    while (match := _ASSIGNMENT.search(text, position)) is not None:
        span = _assignment_span(text, match)
        if span is None:
            position = match.end("key")  # a rejected value may hold the next key: look again
            continue
        yield span
        position = match.end()


def _value_kind(key: str, literal: str) -> str | None:
    """What kind of secret ``literal`` is as the value of ``key`` (unquoted), or None: a key
    that names no secret, a placeholder or marker, a value that names itself or its kind, a
    parser token, a path given as ``PWD``, a public key."""
    kind = _key_kind(key)
    if kind is None or not literal or MARKER.fullmatch(literal) or is_placeholder(literal):
        return None
    if kind == "token" and not _token_shaped(literal):
        return None
    if names_itself(literal, kind) or "public" in key.lower():
        return None
    if kind == "password" and _path_like(literal):
        return None
    return kind


def _assignment_span(text: str, match: re.Match[str]) -> tuple[int, int, str] | None:
    value = match["value"]
    if not value:
        return None
    quoted = value[0] in "\"'`"
    kind = _value_kind(match["key"], value[1:-1] if quoted else value)
    if kind is None:
        return None
    start = match.start("value")
    if quoted:
        return start + 1, match.end("value") - 1, kind
    return (start, match.end("value"), kind) if _unquoted_secret(text, match, value) else None


def _unquoted_secret(text: str, match: re.Match[str], value: str) -> bool:
    """Decide whether an unquoted value is a literal secret or code (a name, a call, a type)."""
    if is_placeholder(value) or value.lower() in KEYWORDS:
        return False
    rest = rest_of_line(text, match.end("value"))
    if match["sep"] == ":":
        # YAML or a Python/TS annotation: only a key that begins its line, a value that ends
        # it, and a value that is not a type name.
        prefix = line_prefix(text, match.start())
        bare = value.rstrip(";,")
        return (prefix.strip() in ("", "-") and ends_statement(rest, yaml=True)
                and bare.lower() not in TYPE_WORDS
                and not re.fullmatch(r"[A-Z][A-Za-z]*", bare)
                and value[0] not in "|>!&*[{")
    previous = line_prefix(text, match.start()).rstrip()[-1:]
    code = (bool(match["pre"] or match["post"]) or match["sep"] != "="
            or previous in ("(", ",") or rest.lstrip().startswith((",", ")")))
    if code and not match["dash"]:
        return ends_statement(rest) and literal_like(value)
    # KEY=value in an env file, a shell line, a URL query or --flag=value; a call, an index or
    # a value cut short by a quote (``parts['x']``) is still code.
    return not any(c in value for c in "([{") and rest[:1] not in ("'", '"')


_CLI_FLAG = lazy(
    r"(?<![A-Za-z0-9_-])--?(?P<key>password|passwd|pass|token|secret|api-key|apikey|"
    r"access-token|auth-token)[ \t]+(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-][^\s\"';,)]*)"
)


def _cli_flags(text: str) -> Found:
    return each_match(_CLI_FLAG, text, _cli_span)


def _cli_span(match: re.Match[str]) -> tuple[int, int, str] | None:
    value = match["value"]
    kind = _key_kind(match["key"]) or "password"
    quoted = value[0] in "\"'"
    literal = value[1:-1] if quoted else value
    if (kind == "token" and not _token_shaped(literal)) or is_placeholder(literal):
        return None
    if quoted:
        return match.start("value") + 1, match.end("value") - 1, kind
    return (match.start("value"), match.end("value"), kind) if literal_like(value) else None


_PUTTY_PRIVATE = lazy(
    r"Private-Lines:[ \t]*[0-9]+[ \t]*\r?\n(?P<secret>(?:[A-Za-z0-9+/=]{4,}[ \t]*(?:\r?\n|$))+)")


_putty_keys = _secret_groups(_PUTTY_PRIVATE, "private-key")


_CURL_USER = lazy(
    r"(?<![A-Za-z0-9_-])(?:-u|--user)[ \t]+(?P<q>[\"']?)(?P<user>[^\s:\"'$]+)"
    r":(?P<secret>[^\s\"']+)(?P=q)"
)


def _curl_users(text: str) -> Found:
    """``curl -u deploy:pw``; ``docker run -u 1000:1000`` is a user and group id."""
    def accept(match: re.Match[str]) -> tuple[int, int, str] | None:
        secret = match["secret"]
        if is_placeholder(secret) or match["user"].isdigit() or secret.isdigit():
            return None
        return match.start("secret"), match.end("secret"), "password"
    return each_match(_CURL_USER, text, accept)


_DOCKER_AUTH = lazy(r"\"auth\"[ \t]*:[ \t]*\"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})\"")


def _docker_auths(text: str) -> Found:
    """``"auth": "…"`` in a Docker or npm config is base64 of ``user:password``."""
    import binascii
    from base64 import b64decode

    for match in _DOCKER_AUTH.finditer(text):
        try:
            decoded = b64decode(match["secret"] + "=" * (-len(match["secret"]) % 4))
        except (binascii.Error, ValueError):
            continue
        if b":" in decoded:
            yield match.start("secret"), match.end("secret"), "basic-auth"


_SECRET_NAME = r"[A-Za-z0-9_:.-]*(?i:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key)"
_XML_ELEMENT = lazy(
    r"<(?P<key>" + _SECRET_NAME + r")>(?P<value>[^<>\n]{3,200})</(?P=key)>")
_XML_PAIR = lazy(r"key=\"(?P<key>" + _SECRET_NAME + r")\"[ \t]+value=\"(?P<value>[^\"\n]*)\"")
_YAML_PAIR = lazy(
    r"(?m)^[ \t]*-?[ \t]*name:[ \t]*[\"']?(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*\r?\n"
    r"[ \t]*value:[ \t]*(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)[ \t]*(?:#[^\n]*)?$")


def _named_values(text: str) -> Found:
    """A secret named by one field and held by the next: ``<password>…</password>``, NuGet's
    ``key="ClearTextPassword" value="…"``, Kubernetes' ``- name: DB_PASSWORD`` / ``value: …``."""
    for pattern in (_XML_ELEMENT, _XML_PAIR, _YAML_PAIR):
        for match in pattern.finditer(text):
            start, end = match.span("value")
            value = match["value"]
            if value[:1] in "\"'" and len(value) >= 2:
                start, end, value = start + 1, end - 1, value[1:-1]
            kind = _value_kind(match["key"].rsplit(":", 1)[-1], value)
            if kind is not None and value.lower() not in KEYWORDS:
                yield start, end, kind


_PROSE_PASSWORD = lazy(
    r"(?i)(?<![A-Za-z0-9_])(?:password|passphrase|passwd|pwd|pw)"
    r"(?:[ \t]+(?:is|was|will be)[ \t]+|[ \t]*:[ \t]*)[\"'`]?(?P<secret>[^\s\"'`]+)"
    r"|(?:비밀번호|비번|암호|패스워드)(?:(?:는|은|가)[ \t]+|[ \t]*[:=][ \t]*)[\"'`]?"
    r"(?P<ko>[^\s\"'`]+)"
)


def _password_like(value: str) -> bool:
    """A word in a sentence after 'password is': a secret only if it looks like one (letters
    with digits or symbols, six characters or more), never a word, code (a call, an index, a
    YAML tag), a path or a reference."""
    bare = value.rstrip(".,;:)")
    if len(bare) < 6 or is_placeholder(bare) or _path_like(bare) or "://" in bare:
        return False
    if bare[0] in "!&*|>" or any(c in bare for c in "()[]{}<>") or "%s" in bare:
        return False
    letters = any(c.isalpha() for c in bare)
    marks = any(c.isdigit() or c in "!@#$%^&*+=~?-_" for c in bare)
    return letters and marks and not identifier_like(bare)


def _prose_passwords(text: str) -> Found:
    for match in _PROSE_PASSWORD.finditer(text):
        group = "secret" if match["secret"] is not None else "ko"
        if _password_like(match[group]):
            start = match.start(group)
            yield start, start + len(match[group].rstrip(".,;:)")), "password"


# Command lines whose tools take a password in their own syntax: ``mysql -pSECRET`` (no space),
# ``sshpass -p SECRET``, ``htpasswd -b FILE USER SECRET``.
_TOOL_PASSWORD = lazy(
    r"(?<![A-Za-z0-9_-])(?:mysql(?:dump|admin)?\b[^\n]*?[ \t]-p(?P<my>[^\s'\"]+)"
    r"|sshpass\b[^\n]*?[ \t]-p[ \t]*(?P<q>['\"]?)(?P<ssh>[^\s'\"]+)(?P=q)"
    r"|htpasswd\b[^\n]*?[ \t]-[a-zA-Z]*b[a-zA-Z]*(?:[ \t]+[^\s-][^\s]*){2}[ \t]+"
    r"(?P<ht>[^\s'\"]+))"
)


def _tool_passwords(text: str) -> Found:
    for match in _TOOL_PASSWORD.finditer(text):
        group = next(g for g in ("my", "ssh", "ht") if match[g] is not None)
        if not is_placeholder(match[group]):
            yield match.start(group), match.end(group), "password"


# API keys sent in a header or a field named for them, wherever the name sits (quoted in a curl
# -H, a JSON or JS object, a PowerShell hashtable): ``x-api-key``, ``Ocp-Apim-Subscription-Key``,
# ``X-Auth-Token``, ``Private-Token``. The value must look random (letters and digits, 16+).
_KEY_HEADER = (
    r"(?i)(?:api-?key|api-?secret|api-?token|auth-token|access-token|private-token|"
    r"subscription-key)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?P<secret>[A-Za-z0-9._~+/=-]{16,})"
)
# ``key="…"`` alone names many things (a cache or dict key); only a random-looking value counts.
_BARE_KEY = (
    r"(?<![A-Za-z0-9_.-])key[ \t]*=[ \t]*(?P<q>[\"'])(?P<secret>[A-Za-z0-9_-]{24,})(?P=q)")


def _random_looking(value: str) -> bool:
    return mixed_token(value) or (any(c.isdigit() for c in value)
                                  and any(c.isalpha() for c in value) and len(value) >= 24)


_KEY_HEADER_WORDS = ("api", "auth-token", "access-token", "private-token", "subscription-key")


def _key_headers(text: str) -> Found:
    for match in _matches_at(_pattern(_KEY_HEADER), text, _KEY_HEADER_WORDS):
        secret = match["secret"].rstrip(".")
        if _random_looking(secret) and not is_placeholder(secret):
            yield match.start("secret"), match.start("secret") + len(secret), "api-key"


def _bare_keys(text: str) -> Found:
    for match in _pattern(_BARE_KEY).finditer(text):
        if mixed_token(match["secret"]):
            yield match.start("secret"), match.end("secret"), "api-key"


# ``the API key is …``, ``token: …`` in a sentence: a key word, then a random-looking value.
_PROSE_KEY = (
    r"(?i)(?<![A-Za-z0-9_])(?:api[ _-]?key|access[ _-]?key|secret[ _-]?key|auth[ _-]?token|"
    r"access[ _-]?token|token|secret)(?:[ \t]+(?:is|was|will be)[ \t]+|[ \t]*:[ \t]*|[ \t]+)"
    r"[\"'`]?(?P<secret>[A-Za-z0-9._~+/=-]{16,})"
)


def _prose_keys(text: str) -> Found:
    words = ("api", "access", "secret", "auth", "token")
    for match in _matches_at(_pattern(_PROSE_KEY), text, words):
        secret = match["secret"].rstrip(".")
        if _random_looking(secret) and not is_placeholder(secret) and not _hex_id(secret):
            yield match.start("secret"), match.start("secret") + len(secret), "secret"


def _hex_id(value: str) -> bool:
    """A git SHA or a digest (40 or 64 hex digits) after ``token`` is rarely the token."""
    return len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value)


# ``.netrc`` (Heroku keeps its API key there): ``machine HOST login USER password SECRET``, on
# one line or several; and the key ``heroku auth:token`` prints on the next line.
_NETRC_PASSWORD = r"(?m)(?:^|[ \t])password[ \t]+(?P<secret>[^\s]+)"
_HEROKU_TOKEN = r"heroku[ \t]+auth:token[^\n]*\r?\n[ \t]*(?P<secret>[A-Za-z0-9_-]{20,})"


def _netrc_passwords(text: str) -> Found:
    if re.search(r"(?m)(?:^|[ \t])machine[ \t]+\S", text):
        for match in _pattern(_NETRC_PASSWORD).finditer(text):
            if not is_placeholder(match["secret"]):
                yield match.start("secret"), match.end("secret"), "password"
    for match in _pattern(_HEROKU_TOKEN).finditer(text):
        yield match.start("secret"), match.end("secret"), "api-key"


# Twilio's auth token (32 hex digits) written beside its account SID: ``Client('AC…', '…')``,
# ``sid AC… token …``.
_TWILIO_PAIR = (
    r"(?<![A-Za-z0-9])AC[0-9a-f]{32}(?:[\"']?[ \t]*[,:][ \t]*[\"']?|[ \t]+(?:auth[-_ ]?)?token"
    r"[ \t:=]+[\"']?)(?P<secret>[0-9a-f]{32})(?![0-9A-Za-z])"
)


def _twilio_tokens(text: str) -> Found:
    for match in _pattern(_TWILIO_PAIR).finditer(text):
        yield match.start("secret"), match.end("secret"), "twilio-auth-token"


# Most specific first: a merged span is named by the earliest detector that found part of it.
# Each detector runs only when one of its needles occurs (lower-case needles are looked for in
# the lower-cased text): a substring test is far cheaper than a regex scan.
DETECTORS: tuple[tuple[Callable[[str], Found], tuple[str, ...], tuple[str, ...]], ...] = (
    (_private_keys, ("PRIVATE KEY",), ()),
    (_putty_keys, ("Private-Lines:",), ()),
    (_aws_secrets, ("AKIA", "ASIA"), ("secret",)),
    *((_token_detector(kind, pattern, check), needles, ())
      for kind, pattern, check, needles in _TOKENS),
    *((_vendor_detector(kind, source), needles, ()) for kind, source, needles in _VENDOR_TOKENS),
    (_slack_webhooks, ("hooks.slack.com",), ()),
    (_twilio_tokens, ("AC",), ()),
    (_auth_headers, (), ("authorization",)),
    (_url_passwords, ("://",), ()),
    (_cli_flags, (), ("pass", "token", "secret", "apikey", "api-key")),
    (_assignments, (), ("pass", "secret", "token", "key", "pwd")),
    (_curl_users, (), ("-u ", "--user")),
    (_docker_auths, ('"auth"',), ()),
    (_named_values, (), ("value", "</")),
    (_prose_passwords, (), ("pass", "pw", "비밀번호", "비번", "암호", "패스워드")),
    (_tool_passwords, (), ("mysql", "sshpass", "htpasswd")),
    (_key_headers, (), _KEY_HEADER_WORDS),
    (_bare_keys, ("key",), ()),
    (_netrc_passwords, (), ("machine", "auth:token")),
    (_prose_keys, (), ("key", "token", "secret")),
)

KINDS = (
    "private-key", "aws-secret-key", "twilio-auth-token",
    *(kind for kind, _, _, _ in _TOKENS),
    *dict.fromkeys(kind for kind, _, _ in _VENDOR_TOKENS), "slack-webhook",
    "bearer-token", "basic-auth", "auth-token", "password", "secret", "token", "api-key",
    "access-key",
)
