"""A held-out table for the secret filter: the families issue 25 found missed, in the places
people paste them, and realistic negatives that share their words and shapes.

Written from how these credentials appear in the wild (AWS credentials files and the console's
CSV download, `aws configure`, URLs with a user and password, API-key headers and query
strings, Heroku's `.netrc` and Twilio's client calls, `.env` password lines), not from the
filter's patterns; every credential is generated here from a fixed seed to its documented
shape, so no secret-shaped literal is committed. ``tests/capture/secret_corpus.py`` is the
development table; this one is kept apart so its recall says something about text the patterns were
not tuned on. ``caught`` (a secret is gone when no 8-character piece of it survives) is shared.

``positives()`` gives ``Sample(family, text, secret)``; ``negatives()`` gives
``Negative(family, text)``: placeholders, hashes, UUIDs, code identifiers, git SHAs, base64 of
non-secrets, URLs with a user but no password, configuration that refers to a secret.
`tests/capture/test_secret_table.py` and `bench/secrets_bench.py --table heldout` read it.
"""

from __future__ import annotations

import base64
import string
import uuid
from collections.abc import Callable, Iterator

from secret_corpus import ALNUM, B64, HEX, LOWER, UPPER_ALNUM, URLSAFE, Negative, Sample, _Gen

SEED = 20261203
SPECIAL = "!@#%^*-_+=.~"


def _aws_id(g: _Gen) -> str:
    return "AKIA" + g(UPPER_ALNUM, 16)


def _aws_secret(g: _Gen) -> str:
    return g(B64, 40)


def _password(g: _Gen) -> str:
    shapes: list[Callable[[], str]] = [
        lambda: g(ALNUM, g.rng.randint(10, 18)),
        lambda: g(ALNUM + SPECIAL, g.rng.randint(12, 22)),
        lambda: g(LOWER, 5) + g.rng.choice("!@#$%&*") + g(string.digits, 3) + g(LOWER, 3),
        lambda: g(LOWER, 4) + "-" + g(LOWER, 5) + "-" + g(LOWER, 4) + g(string.digits, 2),
    ]
    return g.rng.choice(shapes)()


def _uuid(g: _Gen) -> str:
    return str(uuid.UUID(bytes=g.rng.randbytes(16), version=4))


# (family, template, secret maker); a template may use {id} (an AWS key id or a Twilio SID)
Row = tuple[str, str, Callable[[_Gen], str]]
ROWS: list[Row] = [
    # AWS secret access keys: after their key name (any spelling), in credentials files, in the
    # console's CSV download, in `aws configure`, in a title.
    ("aws-secret-access-key", "[default]\naws_access_key_id = {id}\naws_secret_access_key = {s}\n"
     "region = us-east-1", _aws_secret),
    ("aws-secret-access-key", "[profile ci]\naws_access_key_id={id}\naws_secret_access_key={s}",
     _aws_secret),
    ("aws-secret-access-key", "User name,Password,Access key ID,Secret access key,Console login "
     "link\nci-bot,,{id},{s},https://123456789012.signin.aws.amazon.com/console", _aws_secret),
    ("aws-secret-access-key", "Access key ID,Secret access key\n{id},{s}", _aws_secret),
    ("aws-secret-access-key", "aws_secret_access_key {s}", _aws_secret),
    ("aws-secret-access-key", "AWS_SECRET_ACCESS_KEY: {s}", _aws_secret),
    ("aws-secret-access-key", "aws configure set aws_secret_access_key {s} --profile ci",
     _aws_secret),
    ("aws-secret-access-key", 'provider "aws" {{\n  access_key = "{id}"\n  secret_key = "{s}"\n}}',
     _aws_secret),
    ("aws-secret-access-key", "export AWS_ACCESS_KEY_ID={id} AWS_SECRET_ACCESS_KEY={s}",
     _aws_secret),
    ("aws-secret-access-key", "the key pair is {id} / {s}", _aws_secret),
    ("aws-secret-access-key", "aws.secretKey={s}", _aws_secret),
    ("aws-secret-access-key", "AWS Secret Access Key [****************abcd]: {s}", _aws_secret),
    # Basic-auth URLs: scheme://user:password@host in every scheme and place.
    ("basic-auth-url", "https://admin:{s}@jenkins.example.com/job/deploy", _password),
    ("basic-auth-url", "git remote set-url origin https://oauth2:{s}@gitlab.example.com/g/r.git",
     lambda g: g(URLSAFE, 20)),
    ("basic-auth-url", "amqp://guest:{s}@rabbit.internal:5672/vhost", _password),
    ("basic-auth-url", "ftp://backup:{s}@files.example.org/dumps/", _password),
    ("basic-auth-url", '{{"registry": "https://ci:{s}@registry.example.com/v2/"}}', _password),
    ("basic-auth-url", "pip install --index-url https://user:{s}@pypi.example.com/simple pkg",
     _password),
    ("basic-auth-url", "<url>http://deploy:{s}@nexus.example.com/repository/</url>", _password),
    ("basic-auth-url", "proxy = http://me:{s}@proxy.corp:3128", _password),
    ("basic-auth-url", "smtp://mailer:{s}@smtp.example.com:587", _password),
    ("basic-auth-url", "clone it from https://bot:{s}@bitbucket.org/team/app.git then run make",
     _password),
    # Generic API keys: keyword assignments in every syntax, headers, query strings, flags.
    ("generic-api-key", "api_key={s}", lambda g: g(ALNUM, 32)),
    ("generic-api-key", "apikey: {s}", lambda g: g(HEX, 32)),
    ("generic-api-key", "curl -H 'x-api-key: {s}' https://api.example.com/v2/items",
     lambda g: g(ALNUM, 40)),
    ("generic-api-key", 'curl -H "X-API-Key: {s}" "$BASE/orders"', lambda g: g(URLSAFE, 32)),
    ("generic-api-key", "X-Api-Key: {s}\nAccept: application/json", lambda g: g(ALNUM, 36)),
    ("generic-api-key", "GET /v1/data?api_key={s}&limit=10 HTTP/1.1", lambda g: g(HEX, 32)),
    ("generic-api-key", 'headers = {{"x-api-key": "{s}", "accept": "json"}}',
     lambda g: g(ALNUM, 40)),
    ("generic-api-key", "fetch(url, {{ headers: {{ 'X-API-KEY': '{s}' }} }})",
     lambda g: g(ALNUM, 32)),
    ("generic-api-key", 'const apiKey = "{s}";', lambda g: g(ALNUM, 39)),
    ("generic-api-key", '{{"apiKey": "{s}", "projectId": "demo"}}', lambda g: g(URLSAFE, 39)),
    ("generic-api-key", "Ocp-Apim-Subscription-Key: {s}", lambda g: g(HEX, 32)),
    ("generic-api-key", "mytool --api-key {s} --region eu", lambda g: g(ALNUM, 32)),
    ("generic-api-key", 'client = Api(key="{s}")', lambda g: g(ALNUM, 32)),
    ("generic-api-key", "the API key is {s}", lambda g: g(ALNUM, 32)),
    ("generic-api-key", "API_KEY: {s}", lambda g: g(ALNUM, 48)),
    ("generic-api-key", "$headers = @{{ 'X-Api-Key' = '{s}' }}", lambda g: g(ALNUM, 32)),
    # Heroku: the API key (a UUID) after its name, in .netrc, from the CLI; the new format.
    ("heroku", "HEROKU_API_KEY={s}", _uuid),
    ("heroku", "machine api.heroku.com\n  login dev@example.com\n  password {s}\n"
     "machine git.heroku.com\n  login dev@example.com\n  password {s}", _uuid),
    ("heroku", "machine api.heroku.com login dev@example.com password {s}", _uuid),
    ("heroku", "$ heroku auth:token\n{s}", _uuid),
    ("heroku", "heroku_api_key: {s}", _uuid),
    ("heroku", 'env:\n  HEROKU_API_KEY: "{s}"', _uuid),
    ("heroku", "HEROKU_API_KEY={s}", lambda g: "HRKU-AA" + g(URLSAFE, 58)),
    ("heroku", "curl -n https://api.heroku.com/apps -H 'Authorization: Bearer {s}'", _uuid),
    # Twilio: the auth token (32 hex) beside its account SID, the API key secret.
    ("twilio", "TWILIO_ACCOUNT_SID={id}\nTWILIO_AUTH_TOKEN={s}", lambda g: g(HEX, 32)),
    ("twilio", "client = Client('{id}', '{s}')", lambda g: g(HEX, 32)),
    ("twilio", 'const client = require("twilio")("{id}", "{s}");', lambda g: g(HEX, 32)),
    ("twilio", "curl -X POST https://api.twilio.com/2010-04-01/Accounts/{id}/Messages.json "
     "-u {id}:{s}", lambda g: g(HEX, 32)),
    ("twilio", "account_sid = '{id}'\nauth_token = '{s}'", lambda g: g(HEX, 32)),
    ("twilio", "TWILIO_API_SECRET={s}", lambda g: g(ALNUM, 32)),
    ("twilio", "twilio api:core:messages:create --account-sid {id} --auth-token {s}",
     lambda g: g(HEX, 32)),
    ("twilio", "sid {id} token {s}", lambda g: g(HEX, 32)),
    # Password lines in .env files: every spelling of the name, every value shape.
    ("env-password", "PASSWORD={s}", _password),
    ("env-password", "DB_PASS={s}\nDB_HOST=localhost", _password),
    ("env-password", "MYSQL_ROOT_PASSWORD={s}", _password),
    ("env-password", 'SMTP_PASSWORD="{s}"', _password),
    ("env-password", "export PGPASSWORD='{s}'", _password),
    ("env-password", "REDIS_PASSWORD={s} # rotated monthly", _password),
    ("env-password", "MAIL_PASSWORD = {s}", _password),
    ("env-password", "ADMIN_PWD={s}", _password),
    ("env-password", "DATABASE_PASSWORD={s};", _password),
    ("env-password", "KEYSTORE_PASS={s}", _password),
    ("env-password", "rabbitmq_default_pass={s}", _password),
    ("env-password", "POSTGRES_PASSWORD={s}\nPOSTGRES_DB=app\nPOSTGRES_USER=app", _password),
]


def positives() -> list[Sample]:
    g = _Gen(SEED)
    out = []
    for family, template, make in ROWS:
        for _ in range(4):
            secret = make(g)
            ident = ("AC" + g(HEX, 32)) if family == "twilio" else _aws_id(g)
            out.append(Sample(family, template.format(s=secret, id=ident), secret))
    return out


# -- negatives --------------------------------------------------------------------------------

def _placeholders(g: _Gen) -> Iterator[str]:
    yield "aws_secret_access_key = YOUR_SECRET_ACCESS_KEY"
    yield "AWS_SECRET_ACCESS_KEY=<your-secret-access-key>"
    yield "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}"
    yield 'secret_key = var.aws_secret_key'
    yield "@SVC@_API_KEY=your-api-key-here"
    yield "@svc@_api_key: <@SVC@_API_KEY>"
    yield "curl -H 'x-api-key: $@SVC@_API_KEY' https://api.@svc@.example.com"
    yield 'curl -H "X-API-Key: ${{ secrets.@SVC@_API_KEY }}" https://@svc@.example.com'
    yield "HEROKU_API_KEY: ${{ secrets.HEROKU_API_KEY }}"
    yield "TWILIO_AUTH_TOKEN=your_auth_token"
    yield "@SVC@_PASSWORD=changeme"
    yield "@SVC@_PASSWORD=${@SVC@_PASSWORD:-}"
    yield "@SVC@_PASSWORD="
    yield "@SVC@_PASSWORD=xxxxxxxx"
    yield "https://user:password@example.com"
    yield "postgres://USER:PASSWORD@@svc@:5432/DB"
    yield "redis://:${@SVC@_PASSWORD}@@svc@:6379"
    yield "machine api.heroku.com login me@example.com password $HEROKU_API_KEY"
    yield "X-Api-Key: {@svc@_api_key}"
    yield "@svc@_password = getpass.getpass()"
    yield "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"
    yield "client = Client(account_sid, auth_token)"
    yield "client = Client(os.environ['TWILIO_ACCOUNT_SID'], os.environ['TWILIO_AUTH_TOKEN'])"
    yield f"ADMIN_PASSWORD_HASH={g(HEX, 64)}"


CODE = (
    '@svc@_api_key = os.environ["@SVC@_API_KEY"]',
    "@svc@ApiKey: string;",
    'headers["x-api-key"] = @svc@_api_key',
    "self.api_key = api_key or settings.@SVC@_API_KEY",
    "def login(username: str, password: str) -> Session:",
    "if not password_matches(user.password_hash, password):",
    "@svc@_secret_key = load_secret_key(@svc@_path)",
    "const { apiKey } = useConfig();",
    "request.headers['X-Api-Key'] = self._@svc@_key",
    "aws_secret_access_key=@svc@_credentials.secret_key,",
    "session = boto3.Session(aws_access_key_id=key_id, aws_secret_access_key=secret)",
    "twilio_client = Client(settings.TWILIO_SID, settings.TWILIO_TOKEN)",
    "url = f'https://{user}:{password}@{@svc@_host}/'",
    "DATABASE_URL = f\"postgres://{db_user}:{db_pass}@{db_host}/{db_name}\"",
    "@svc@_password_reset_token_ttl = 3600",
    "@SVC@_API_KEY_HEADER = 'X-Api-Key'",
    "TOKEN_URL = 'https://oauth2.googleapis.com/token'",
    "@svc@_apikey = request.args.get('api_key')",
    "password_field = forms.CharField(widget=forms.PasswordInput)",
)


def _code(g: _Gen) -> Iterator[str]:
    yield from CODE
    yield f"cache_key = '{g(LOWER, 8)}:' + str(user_id)"


def _shapes(g: _Gen) -> Iterator[str]:
    """Values with a credential's shape but none of its context."""
    sha = g(HEX, 40)
    yield f"commit {sha}\nMerge: {g(HEX, 7)} {g(HEX, 7)}"
    yield f"git reset --hard {sha}"
    yield f"request_id={_uuid(g)} status=200 elapsed=12ms"
    yield f"app id {_uuid(g)} (created by heroku apps:create)"
    yield f"etag: W/\"{g(HEX, 32)}\""
    yield f"checksum: sha1:{g(HEX, 40)}"
    yield f"integrity=\"sha384-{g.b64(48)}\""
    yield f"data = base64.b64decode('{base64.b64encode(g(LOWER, 30).encode()).decode()}')"
    yield f"Account SID: {'AC' + g(HEX, 32)}"
    yield f"arn:aws:iam::{g(string.digits, 12)}:user/ci-bot"
    yield f"x-request-id: {g(HEX, 32)}"
    yield f"X-Amz-Cf-Id: {g(URLSAFE, 56)}"
    yield f"session {g(ALNUM, 40)} expired at 12:00"
    yield f"ssh://git@github.com/{g(LOWER, 6)}/{g(LOWER, 5)}.git"
    yield f"https://{g(LOWER, 5)}@dev.azure.com/{g(LOWER, 6)}/project/_git/repo"
    yield f"https://example.com/@{g(LOWER, 6)}/post-{g(string.digits, 4)}"
    yield f"mailto:{g(LOWER, 6)}@example.com"
    yield f"docker pull registry.example.com:5000/{g(LOWER, 6)}@sha256:{g(HEX, 64)}"
    yield f"{g(LOWER, 6)}@{g(LOWER, 5)}.local:~/src$ make test"
    yield f"image: {g(LOWER, 6)}:1.4.2@sha256:{g(HEX, 64)}"


PROSE = (
    "Set AWS_SECRET_ACCESS_KEY in the @svc@ CI settings, never in the repository.",
    "The @svc@ API key goes in the X-Api-Key header; rotate it every 90 days.",
    "Heroku reads the API key from ~/.netrc after `heroku login`.",
    "Twilio's auth token is in the console under Account Info.",
    "Your @svc@ password must be at least 12 characters long.",
    "Use basic auth only over HTTPS: https://user:pass@host sends it in the clear.",
    "We switched @svc@ from api keys to OAuth2 client credentials.",
    "The .env file holds @SVC@_PASSWORD; it is gitignored.",
    "비밀번호는 .env 파일에만 두고 커밋하지 마세요.",
    "API 키는 헤더 x-api-key 로 보냅니다.",
)


def _prose(g: _Gen) -> Iterator[str]:
    return iter(PROSE)


SERVICES = ("stripe", "billing", "search", "maps", "mailer", "payments", "geo", "reports",
            "crm", "analytics", "ledger", "auth", "storage", "queue", "vision", "weather")


def negatives() -> list[Negative]:
    """Each template several times with fresh names and values; every text distinct."""
    g = _Gen(SEED + 1)
    out: dict[str, Negative] = {}
    for _ in range(6):
        for family, texts in (("placeholder", _placeholders(g)), ("code", _code(g)),
                              ("credential-shape", _shapes(g)), ("prose", _prose(g))):
            for text in texts:
                svc = g.rng.choice(SERVICES)
                text = text.replace("@svc@", svc).replace("@SVC@", svc.upper())
                out.setdefault(text, Negative(family, text))
    return list(out.values())
