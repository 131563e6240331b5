"""A labelled table for the secret filter: fake credentials of many families, and negatives.

Every credential is generated here, from a fixed seed, to the shape its vendor documents (prefix,
alphabet, length), so no secret-shaped literal is committed for a scanner or a person to take
for a real one. The families come from vendors' documented token formats and from the families
gitleaks and detect-secrets name; the generators are our own.

``positives()`` gives ``Sample(family, text, secret)``: each family's secret in several
contexts (bare, an env line, JSON, YAML, a header, English and Korean prose, a code fence), or,
for the keyword families (passwords in env/YAML/JSON/INI/XML, connection strings, command
lines), in the places those appear. ``negatives()`` gives ``Negative(family, text)``: code (the
osk sources and standard-library modules full of ``password`` and ``token`` code), lockfile
hashes, UUIDs, git SHAs, base64 blobs, public keys and certificates, hex digests, config with
references instead of values, and English and Korean prose about credentials.

A sample is caught when its secret is gone from the filtered text (no 8-character piece of it
survives); a negative is a false positive when the filter changes it at all. The test
(`tests/capture/test_secret_table.py`) and the bench (`bench/secrets_bench.py`) both read this
table.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import random
import re
import string
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

SEED = 20261202
DIGITS = string.digits
LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = LOWER + DIGITS
UPPER_ALNUM = UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper()


@dataclass(frozen=True)
class Sample:
    family: str
    text: str
    secret: str


@dataclass(frozen=True)
class Negative:
    family: str
    text: str


class _Gen:
    """Random text to a shape; mixes every character class its alphabet has (real tokens do)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, alphabet: str, length: int) -> str:
        groups = [set(DIGITS), set(UPPER), set(LOWER)]
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(length))
            if length < 6 or all(not (g & set(alphabet)) or g & set(value) for g in groups):
                return value

    def b64(self, nbytes: int, urlsafe: bool = False, pad: bool = True) -> str:
        raw = self.rng.randbytes(nbytes)
        text = (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()
        return text if pad else text.rstrip("=")

    def digits(self, length: int) -> str:
        return str(self.rng.randint(10 ** (length - 1), 10**length - 1))


def _jwt(g: _Gen, alg: str = "HS256") -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    claims = {"sub": g(ALNUM, 12), "iat": 1700000000 + g.rng.randint(0, 10**7), "scope": "api"}
    return f"{part({'alg': alg, 'typ': 'JWT'})}.{part(claims)}.{g.b64(32, True, False)}"


def _pem(g: _Gen, label: str, lines: int = 8) -> str:
    body = "\n".join(g(B64, 64) for _ in range(lines)) + "\n" + g(B64, 24) + "=="
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


# (family, env-variable name, generator). Formats as the vendors document them.
Vendor = tuple[str, str, Callable[[_Gen], str]]
VENDORS: list[Vendor] = [
    ("aws-access-key-id", "AWS_ACCESS_KEY_ID", lambda g: "AKIA" + g(UPPER_ALNUM, 16)),
    ("aws-session-key-id", "AWS_ACCESS_KEY_ID", lambda g: "ASIA" + g(UPPER_ALNUM, 16)),
    ("github-classic-pat", "GITHUB_TOKEN", lambda g: "ghp_" + g(ALNUM, 36)),
    ("github-oauth", "GH_OAUTH", lambda g: "gho_" + g(ALNUM, 36)),
    ("github-app", "GH_APP_TOKEN", lambda g: "ghs_" + g(ALNUM, 36)),
    ("github-fine-grained", "GITHUB_PAT",
     lambda g: "github_pat_" + g(ALNUM, 22) + "_" + g(ALNUM, 59)),
    ("gitlab-pat", "GITLAB_TOKEN", lambda g: "glpat-" + g(URLSAFE, 20)),
    ("gitlab-runner", "RUNNER_TOKEN", lambda g: "glrt-" + g(URLSAFE, 20)),
    ("gitlab-deploy", "DEPLOY_TOKEN", lambda g: "gldt-" + g(URLSAFE, 20)),
    ("slack-bot", "SLACK_BOT_TOKEN",
     lambda g: f"xoxb-{g.digits(12)}-{g.digits(13)}-{g(ALNUM, 24)}"),
    ("slack-app", "SLACK_APP_TOKEN",
     lambda g: f"xapp-1-A{g(UPPER_ALNUM, 10)}-{g.digits(13)}-{g(HEX, 64)}"),
    ("openai", "OPENAI_API_KEY", lambda g: "sk-proj-" + g(URLSAFE, 156)),
    ("anthropic", "ANTHROPIC_API_KEY", lambda g: "sk-ant-api03-" + g(URLSAFE, 93) + "AA"),
    ("stripe-secret", "STRIPE_SECRET_KEY", lambda g: "sk_" + "live_" + g(ALNUM, 99)),
    ("stripe-restricted", "STRIPE_KEY", lambda g: "rk_" + "live_" + g(ALNUM, 24)),
    ("stripe-webhook-secret", "STRIPE_WEBHOOK_SECRET", lambda g: "whsec_" + g(ALNUM, 32)),
    ("google-api-key", "GOOGLE_API_KEY", lambda g: "AIza" + g(URLSAFE, 35)),
    ("google-oauth-client-secret", "GOOGLE_CLIENT_SECRET", lambda g: "GOCSPX-" + g(URLSAFE, 28)),
    ("google-oauth-access-token", "GOOGLE_ACCESS_TOKEN", lambda g: "ya29." + g(URLSAFE, 120)),
    ("npm", "NPM_TOKEN", lambda g: "npm_" + g(ALNUM, 36)),
    ("pypi", "TWINE_PASSWORD", lambda g: "pypi-AgEIcHlwaS5vcmc" + g(URLSAFE, 70)),
    ("huggingface", "HF_TOKEN", lambda g: "hf_" + g(ALNUM, 34)),
    ("sendgrid", "SENDGRID_API_KEY", lambda g: "SG." + g(URLSAFE, 22) + "." + g(URLSAFE, 43)),
    ("twilio-api-key", "TWILIO_API_KEY", lambda g: "SK" + g(HEX, 32)),
    ("mailgun", "MAILGUN_API_KEY", lambda g: "key-" + g(LOWER_ALNUM, 32)),
    ("mailchimp", "MAILCHIMP_API_KEY", lambda g: g(HEX, 32) + "-us" + str(g.rng.randint(1, 21))),
    ("shopify", "SHOPIFY_ACCESS_TOKEN", lambda g: "shpat_" + g(HEX, 32)),
    ("digitalocean", "DIGITALOCEAN_TOKEN", lambda g: "dop_v1_" + g(HEX, 64)),
    ("doppler", "DOPPLER_TOKEN", lambda g: "dp.pt." + g(ALNUM, 43)),
    ("databricks", "DATABRICKS_TOKEN", lambda g: "dapi" + g(HEX, 32)),
    ("hashicorp-vault", "VAULT_TOKEN", lambda g: "hvs." + g(URLSAFE, 90)),
    ("terraform-cloud", "TFE_TOKEN",
     lambda g: g(LOWER_ALNUM, 14) + ".atlasv1." + g(URLSAFE, 67)),
    ("linear", "LINEAR_API_KEY", lambda g: "lin_api_" + g(ALNUM, 40)),
    ("notion", "NOTION_TOKEN", lambda g: "ntn_" + g(DIGITS, 11) + g(ALNUM, 35)),
    ("postman", "POSTMAN_API_KEY", lambda g: "PMAK-" + g(HEX, 24) + "-" + g(HEX, 34)),
    ("grafana-service-account", "GRAFANA_TOKEN",
     lambda g: "glsa_" + g(ALNUM, 32) + "_" + g(HEX, 8)),
    ("sentry-user", "SENTRY_AUTH_TOKEN", lambda g: "sntryu_" + g(HEX, 64)),
    ("planetscale", "PLANETSCALE_TOKEN", lambda g: "pscale_tkn_" + g(URLSAFE, 43)),
    ("pulumi", "PULUMI_ACCESS_TOKEN", lambda g: "pul-" + g(HEX, 40)),
    ("rubygems", "GEM_HOST_API_KEY", lambda g: "rubygems_" + g(HEX, 48)),
    ("atlassian", "JIRA_API_TOKEN", lambda g: "ATATT3xFfGF0" + g(URLSAFE, 170) + "=" + g(HEX, 8)),
    ("square", "SQUARE_ACCESS_TOKEN", lambda g: "EAAA" + g(URLSAFE, 60)),
    ("dropbox", "DROPBOX_TOKEN", lambda g: "sl." + g(URLSAFE, 135)),
    ("age-secret-key", "AGE_KEY", lambda g: "AGE-SECRET-KEY-1" + g(BECH32, 58)),
    ("1password-secret-key", "OP_SECRET_KEY",
     lambda g: "A3-" + "-".join(g(UPPER_ALNUM, n) for n in (6, 6, 5, 5, 5, 5))),
    ("flyio", "FLY_API_TOKEN", lambda g: "fo1_" + g(URLSAFE, 43)),
    ("figma", "FIGMA_TOKEN", lambda g: "figd_" + g(URLSAFE, 40)),
    ("supabase", "SUPABASE_ACCESS_TOKEN", lambda g: "sbp_" + g(HEX, 40)),
    ("heroku", "HEROKU_API_KEY", lambda g: "HRKU-AA" + g(URLSAFE, 58)),
    ("groq", "GROQ_API_KEY", lambda g: "gsk_" + g(ALNUM, 52)),
    ("perplexity", "PPLX_API_KEY", lambda g: "pplx-" + g(ALNUM, 48)),
    ("xai", "XAI_API_KEY", lambda g: "xai-" + g(ALNUM, 80)),
    ("replicate", "REPLICATE_API_TOKEN", lambda g: "r8_" + g(ALNUM, 37)),
    ("newrelic", "NEW_RELIC_API_KEY", lambda g: "NRAK-" + g(UPPER_ALNUM, 27)),
    ("dynatrace", "DT_API_TOKEN",
     lambda g: "dt0c01." + g(UPPER_ALNUM, 24) + "." + g(UPPER_ALNUM, 64)),
    ("cloudflare-origin-ca", "CF_ORIGIN_CA_KEY",
     lambda g: "v1.0-" + g(HEX, 24) + "-" + g(HEX, 146)),
    ("telegram-bot", "TELEGRAM_BOT_TOKEN", lambda g: g.digits(10) + ":AA" + g(URLSAFE, 33)),
    ("discord-bot", "DISCORD_TOKEN",
     lambda g: base64.b64encode(g.digits(18).encode()).decode() + "." + g(URLSAFE, 6) + "."
     + g(URLSAFE, 38)),
    ("alibaba-access-key-id", "ALIBABA_ACCESS_KEY_ID", lambda g: "LTAI" + g(ALNUM, 20)),
    ("azure-ad-client-secret", "AZURE_CLIENT_SECRET",
     lambda g: g(ALNUM, 3) + str(g.rng.randint(0, 9)) + "Q~" + g(ALNUM + "_~.-", 34)),
    ("docker-hub", "DOCKERHUB_TOKEN", lambda g: "dckr_pat_" + g(URLSAFE, 27)),
    ("artifactory", "ARTIFACTORY_API_KEY", lambda g: "AKCp8" + g(ALNUM, 68)),
    ("easypost", "EASYPOST_API_KEY", lambda g: "EZAK" + g(ALNUM, 54)),
    ("twitter-bearer", "TWITTER_BEARER_TOKEN",
     lambda g: "A" * 22 + g(ALNUM, 28) + "%3D" + g(ALNUM, 52)),
    ("brevo", "BREVO_API_KEY", lambda g: "xkeysib-" + g(HEX, 64) + "-" + g(ALNUM, 16)),
    ("clojars", "CLOJARS_TOKEN", lambda g: "CLOJARS_" + g(LOWER_ALNUM, 60)),
    ("facebook", "FB_ACCESS_TOKEN", lambda g: "EAACEdEose0cBA" + g(ALNUM, 150)),
    ("buildkite", "BUILDKITE_API_TOKEN", lambda g: "bkua_" + g(HEX, 40)),
    ("netlify", "NETLIFY_AUTH_TOKEN", lambda g: "nfp_" + g(ALNUM, 36)),
    ("jwt", "ACCESS_TOKEN", _jwt),
    ("mapbox-secret", "MAPBOX_SECRET_TOKEN",
     lambda g: "sk." + _jwt(g).split(".")[1] + "." + g(URLSAFE, 22)),
]

VENDOR_CONTEXTS = [
    "{s}",
    "export {var}={s}",
    '{{"{key}": "{s}", "region": "eu-west-1"}}',
    "{key}: {s}\n",
    "I rotated it; the new one is {s} for now.",
    "새 키는 {s} 입니다. 확인 부탁드려요.",
    "curl -H 'X-Api-Key: {s}' https://api.example.com/v1/items",
    "```\n{s}\n```",
]


def _vendor_samples(g: _Gen) -> Iterator[Sample]:
    for family, var, make in VENDORS:
        for context in VENDOR_CONTEXTS:
            secret = make(g)
            yield Sample(family, context.format(s=secret, var=var, key=var.lower()), secret)


def _password(g: _Gen) -> str:
    shapes = [
        lambda: g(ALNUM, g.rng.randint(10, 20)),
        lambda: g(ALNUM + "!@#%^*-_+", g.rng.randint(12, 24)),
        lambda: g(LOWER, 6) + g(DIGITS, 2) + g.rng.choice("!@#%") + g(UPPER, 2),
    ]
    return g.rng.choice(shapes)()


# (family, template, secret generator). Keyword assignments in the places people paste them.
KEYWORD: list[tuple[str, str, Callable[[_Gen], str]]] = [
    ("env-password", "DB_PASSWORD={s}", _password),
    ("env-password", "POSTGRES_PASSWORD={s}\nPOSTGRES_USER=app", _password),
    ("env-password", "export ADMIN_PASS={s}", _password),
    ("env-secret", "SESSION_SECRET={s}", lambda g: g(ALNUM, 32)),
    ("env-secret", "JWT_SECRET={s}", lambda g: g(B64, 44)),
    ("env-token", "ACCESS_TOKEN={s}", lambda g: g(ALNUM, 40)),
    ("env-api-key", "MAPS_API_KEY={s}", lambda g: g(ALNUM, 32)),
    ("yaml-password", "database:\n  user: app\n  password: {s}\n  port: 5432", _password),
    ("yaml-password", "  db_password: \"{s}\"", _password),
    ("yaml-password", "- name: POSTGRES_PASSWORD\n  value: {s}", _password),
    ("yaml-secret", "auth:\n  client_secret: {s}\n", lambda g: g(ALNUM, 40)),
    ("yaml-secret", "secret: {s}", lambda g: g(ALNUM, 24)),
    ("json-password", '{{"username": "deploy", "password": "{s}"}}', _password),
    ("json-password", '  "db_pass": "{s}",', _password),
    ("json-secret", '{{"client_id": "web", "client_secret": "{s}"}}', lambda g: g(ALNUM, 40)),
    ("json-token", '{{"refresh_token": "{s}"}}', lambda g: g(URLSAFE, 64)),
    ("ini-password", "[client]\nuser = root\npassword = {s}\n", _password),
    ("toml-password", 'password = "{s}"', _password),
    ("xml-password", "<server>\n  <id>nexus</id>\n  <password>{s}</password>\n</server>",
     _password),
    ("xml-password", '<add key="ClearTextPassword" value="{s}" />', _password),
    ("code-password", 'conn = psycopg.connect(host="db", password="{s}")', _password),
    ("code-password", 'const password = "{s}";', _password),
    ("code-secret", "SECRET_KEY = '{s}'", lambda g: g(ALNUM + "!@#$%^&*(-_=+)", 50)),
    ("code-api-key", 'client = Client(api_key="{s}")', lambda g: g(ALNUM, 32)),
    ("url-password", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", _password),
    ("url-password", "mongodb+srv://admin:{s}@cluster0.ab1cd.mongodb.net/test",
     lambda g: g(ALNUM, 20)),
    ("url-password", "redis://:{s}@cache:6379/0", lambda g: g(ALNUM, 18)),
    ("url-password", "git clone https://deploy:{s}@git.example.com/team/repo.git",
     lambda g: g(ALNUM, 20)),
    ("connection-string-password",
     "Server=tcp:db.example.net,1433;Database=app;User ID=sa;Password={s};Encrypt=True;",
     _password),
    ("connection-string-password", "Driver={{ODBC Driver 18}};Server=db;Uid=app;Pwd={s};",
     _password),
    ("azure-storage-connection-string",
     "DefaultEndpointsProtocol=https;AccountName=store1;AccountKey={s};"
     "EndpointSuffix=core.windows.net", lambda g: g.b64(64)),
    ("azure-service-bus-connection-string",
     "Endpoint=sb://bus1.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
     "SharedAccessKey={s}", lambda g: g.b64(32)),
    ("azure-sas-token",
     "https://store1.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r"
     "&se=2026-12-31T00:00:00Z&sig={s}", lambda g: g.b64(32).replace("+", "%2B")
     .replace("/", "%2F").replace("=", "%3D")),
    ("aws-secret-access-key", "aws_secret_access_key = {s}", lambda g: g(B64, 40)),
    ("aws-secret-access-key", '"SecretAccessKey": "{s}",', lambda g: g(B64, 40)),
    ("cli-password", "mysql -u root --password={s} app", _password),
    ("cli-password", "psql --password {s} -h db", _password),
    ("cli-password", "curl -u deploy:{s} https://ci.example.com/api", _password),
    ("header-bearer", "Authorization: Bearer {s}", lambda g: g(URLSAFE, 48)),
    ("header-basic", "Authorization: Basic {s}",
     lambda g: base64.b64encode(f"ci:{g(ALNUM, 14)}".encode()).decode()),
    ("header-token", '-H "Authorization: token {s}"', lambda g: g(ALNUM, 40)),
    ("docker-config-auth", '{{"auths": {{"registry.example.com": {{"auth": "{s}"}}}}}}',
     lambda g: base64.b64encode(f"bot:{g(ALNUM, 16)}".encode()).decode()),
    ("npmrc-auth", "//registry.npmjs.org/:_password={s}", lambda g: g.b64(18)),
    ("prose-password", "the password is {s} — please change it after login", _password),
    ("prose-password", "비밀번호는 {s} 입니다", _password),
    ("prose-password", "pw: {s}", _password),
    # Written after the patterns above, as a held-out check (docs/performance.md has the
    # figures before they were fixed); kept here so they stay caught.
    ("prose-password", "암호는 {s} 입니다", _password),
    ("prose-password", "패스워드: {s}", _password),
    ("cli-password", "mysql -uroot -p{s} app", _password),
    ("cli-password", "sshpass -p '{s}' ssh host", _password),
    ("cli-password", "htpasswd -b .htpasswd admin {s}", _password),
    ("env-password", "PGPASSWORD={s} psql -h db", _password),
    ("env-password", '$env:DB_PASSWORD = "{s}"', _password),
    ("env-password", "ENV DB_PASSWORD={s}", _password),
    ("connection-string-password", "user=admin password={s} host=db", _password),
    ("url-password", "jdbc:postgresql://db/app?user=app&password={s}", _password),
]


def _keyword_samples(g: _Gen) -> Iterator[Sample]:
    for family, template, make in KEYWORD:
        for _ in range(4):
            secret = make(g)
            yield Sample(family, template.format(s=secret), secret)


def _structured_samples(g: _Gen) -> Iterator[Sample]:
    """Private keys of every armour, webhook URLs whose path is the credential."""
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY",
                  "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):
        for template in ("{s}", "$ cat ~/.ssh/id\n{s}\n$ ls", '  "private_key": "{s}\\n",'):
            key = _pem(g, label)
            if template.startswith("  \""):
                key = key.replace("\n", "\\n")
            yield Sample("private-key", template.format(s=key), key)
    for _ in range(4):
        lines = "\n".join(g(B64, 64) for _ in range(6))
        putty = (f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: me\n"
                 f"Public-Lines: 2\n{g(B64, 64)}\n{g(B64, 20)}\nPrivate-Lines: 6\n{lines}\n"
                 f"Private-MAC: {g(HEX, 64)}")
        yield Sample("private-key", putty, lines)
    webhooks = [
        ("slack-webhook", lambda: "https://hooks.slack.com/services/T" + g(UPPER_ALNUM, 10)
         + "/B" + g(UPPER_ALNUM, 10) + "/" + g(ALNUM, 24), 34),
        ("discord-webhook", lambda: "https://discord.com/api/webhooks/" + g.digits(18) + "/"
         + g(URLSAFE, 68), 52),
        ("teams-webhook", lambda: f"https://contoso.webhook.office.com/webhookb2/{uuid4(g)}@"
         f"{uuid4(g)}/IncomingWebhook/{g(HEX, 32)}/{uuid4(g)}", 45),
        ("zapier-webhook", lambda: "https://hooks.zapier.com/hooks/catch/" + g.digits(7) + "/"
         + g(LOWER_ALNUM, 7) + "/", 30),
    ]
    for family, make, keep in webhooks:
        for template in ("{s}", "WEBHOOK_URL={s}", "curl -X POST {s} -d '{{\"text\": \"hi\"}}'",
                         "알림은 {s} 로 보냅니다"):
            url = make()
            yield Sample(family, template.format(s=url), url[keep:])


def uuid4(g: _Gen) -> str:
    return str(uuid.UUID(bytes=g.rng.randbytes(16), version=4))


def positives() -> list[Sample]:
    g = _Gen(SEED)
    return [*_vendor_samples(g), *_keyword_samples(g), *_structured_samples(g)]


def caught(sample: Sample, filtered: str) -> bool:
    """The secret is gone: no 8-character piece of it survives (a partial redaction leaks),
    except a piece the text holds elsewhere too (``"github_pat": "github_pat_…"``)."""
    secret = sample.secret
    filtered = re.sub(r"\[REDACTED:[a-z0-9-]+\]", "\0", filtered)  # a kind may echo a prefix
    context = sample.text.replace(secret, "\0")
    pieces = [secret[i:i + 8] for i in range(0, max(len(secret) - 7, 1), 4)]
    return not any(piece in filtered and piece not in context for piece in pieces)


# -- negatives --------------------------------------------------------------------------------

_STDLIB = ("getpass", "smtplib", "imaplib", "ftplib", "poplib", "netrc", "hmac", "secrets",
           "base64", "ssl", "http.client", "urllib.request", "urllib.parse", "email.utils",
           "argparse", "json.decoder", "tokenize", "configparser", "hashlib", "uuid")


def _chunks(text: str, lines: int = 6) -> Iterator[str]:
    rows = text.splitlines()
    for i in range(0, len(rows), lines):
        chunk = "\n".join(rows[i:i + lines])
        if chunk.strip():
            yield chunk


def _code_negatives() -> Iterator[Negative]:
    import importlib
    for name in _STDLIB:
        for chunk in _chunks(inspect.getsource(importlib.import_module(name))):
            yield Negative("code-stdlib", chunk)
    root = Path(__file__).resolve().parents[2] / "osk"
    for path in sorted(root.rglob("*.py")):
        if path.name in ("secrets.py", "secret_detectors.py", "secret_values.py"):
            continue  # its own patterns and docstring examples are not ordinary code
        for chunk in _chunks(path.read_text(encoding="utf-8")):
            yield Negative("code-osk", chunk)


def _lockfile_negatives(g: _Gen) -> Iterator[Negative]:
    for _ in range(60):
        sha512 = g.b64(64)
        sha256 = g(HEX, 64)
        name = g(LOWER, 7)
        yield Negative("lockfile-npm", f'      "resolved": "https://registry.npmjs.org/{name}/-/'
                       f'{name}-1.2.3.tgz",\n      "integrity": "sha512-{sha512}",')
        yield Negative("lockfile-yarn", f'{name}@^1.0.0:\n  version "1.0.4"\n  resolved '
                       f'"https://registry.yarnpkg.com/{name}/-/{name}-1.0.4.tgz#{g(HEX, 40)}"'
                       f'\n  integrity sha512-{sha512}')
        yield Negative("lockfile-poetry", f'files = [\n    {{file = "{name}-2.0.tar.gz", '
                       f'hash = "sha256:{sha256}"}},\n]')
        yield Negative("lockfile-pip", f"{name}==2.0.1 \\\n    --hash=sha256:{sha256} \\\n"
                       f"    --hash=sha256:{g(HEX, 64)}")
        yield Negative("lockfile-cargo", f'[[package]]\nname = "{name}"\nversion = "0.4.2"\n'
                       f'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
                       f'checksum = "{sha256}"')
        yield Negative("lockfile-go", f"github.com/{name}/{name} v1.4.0 h1:{g.b64(32)}\n"
                       f"github.com/{name}/{name} v1.4.0/go.mod h1:{g.b64(32)}")
        yield Negative("lockfile-pnpm", f"  /{name}@3.1.0:\n    resolution: {{integrity: "
                       f"sha512-{sha512}}}")


def _identifier_negatives(g: _Gen) -> Iterator[Negative]:
    for _ in range(60):
        u4, u7 = uuid4(g), str(uuid.UUID(int=g.rng.getrandbits(128) & ~(0xF << 76) | (7 << 76)))
        sha = g(HEX, 40)
        yield Negative("uuid", f'id: {u4}\nparent: "{u7}"')
        yield Negative("uuid", f'{{"request_id": "{u4}", "trace": "{u7}"}}')
        yield Negative("uuid", f"2026-12-02 04:11 session {u4} started (token budget 8000)")
        yield Negative("git-sha", f"commit {sha}\nAuthor: Dev <dev@example.com>")
        yield Negative("git-sha", f"git checkout {sha[:12]} && git cherry-pick {sha}")
        yield Negative("git-sha", f'  rev: "{sha}"\n  sha: {g(HEX, 40)}')
        yield Negative("hex-digest", f"sha256 {g(HEX, 64)}  dist/app.tar.gz\nmd5 {g(HEX, 32)}")
        yield Negative("hex-digest", f"content_hash: {g(HEX, 64)}\nkey_id: {g(HEX, 16)}")


def _blob_negatives(g: _Gen) -> Iterator[Negative]:
    for _ in range(40):
        yield Negative("base64", g.b64(g.rng.randint(200, 3000)))
        yield Negative("base64", f'<img src="data:image/png;base64,{g.b64(1500)}" alt="x">')
        yield Negative("base64", f'"attachment": "{g.b64(600)}"')
        yield Negative("public-key", f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.b64(32)[:43]} "
                       "dev@laptop")
        yield Negative("public-key", f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{g.b64(380)} me")
        yield Negative("public-key", _pem(g, "CERTIFICATE").replace("\n", "\n", 1))
        yield Negative("public-key", _pem(g, "PUBLIC KEY", 4))


_KO = [
    "비밀번호는 절대 채팅에 붙여넣지 마세요.", "토큰 만료 시간은 30분으로 설정했습니다.",
    "API 키는 환경 변수에서 읽어 옵니다.", "세션 토큰을 갱신하는 로직을 추가했어요.",
    "비밀번호 해시는 bcrypt로 저장합니다.", "접근 키를 교체한 뒤 배포를 다시 실행했습니다.",
    "시크릿 값은 금고(vault)에 보관하고 코드에는 참조만 둡니다.",
    "토큰 수가 너무 많아 요약했습니다.",
    "로그인 실패 시 비밀번호 재설정 링크를 보냅니다.", "인증 헤더가 빠져서 401이 났어요.",
    "키 회전 주기는 90일입니다.", "암호화 키는 KMS에서 관리합니다.",
]
_EN = [
    "The password field is required and must be at least 12 characters.",
    "Rotate the API token every 90 days; never commit it.",
    "We store only the password hash (argon2id) and the salt.",
    "The tokenizer counts tokens before the prompt is sent.",
    "Set the secret in the CI settings, not in the repository.",
    "Authorization: Basic authentication is deprecated; use tokens instead.",
    "Password: see the team wiki.",
    "Use --token carefully; it reads a value from your keychain.",
    "The access key is created in the console under IAM > Users.",
    "If the token is expired, the client refreshes it once and retries.",
]


def _prose_negatives(g: _Gen) -> Iterator[Negative]:
    for _ in range(120):
        yield Negative("prose-korean", " ".join(g.rng.sample(_KO, 3)))
        yield Negative("prose-english", " ".join(g.rng.sample(_EN, 3)))


_CONFIG = [
    "password: ${DB_PASSWORD}", 'token: "{{ vault_token }}"', "api_key: <your key here>",
    'secret: "********"', "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
    'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
    "echo $GITHUB_TOKEN | gh auth login --with-token", "password_hash: {hex}",
    "PWD=/home/dev/project", "docker run -u 1000:1000 image", "token_count: 8000",
    "max_tokens = 4096", "auth: oauth2", '"auth": "none"', "secret_ref: projects/p/secrets/db",
    "key: value", "passwordless: true", "TOKEN_TTL=3600", "password: !vault |",
    "https://example.com/search?q=token&page=2", "ssh://git@host.example.com:22/srv/repo.git",
    "mysql --password", "sig: {hex}", "AccountName=store1;EndpointSuffix=core.windows.net",
    "mysql -u root -p app", "sshpass -f ~/.nas-pass ssh host", "htpasswd -c .htpasswd admin",
    "mysql -p$MYSQL_PWD app", "암호화 키는 KMS에서 관리합니다.", "비번은 금고에 있어요.",
]


def _config_negatives(g: _Gen) -> Iterator[Negative]:
    for _ in range(8):
        for line in _CONFIG:
            yield Negative("config-reference", line.replace("{hex}", g(HEX, 64)))


def negatives() -> list[Negative]:
    g = _Gen(SEED + 1)
    return [*_code_negatives(), *_lockfile_negatives(g), *_identifier_negatives(g),
            *_blob_negatives(g), *_prose_negatives(g), *_config_negatives(g)]


def digest() -> str:
    """A fingerprint of the generated table (changes when a generator changes)."""
    h = hashlib.sha256()
    for s in positives():
        h.update(s.text.encode())
    return h.hexdigest()[:12]
