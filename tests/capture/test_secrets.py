"""The secret filter: recall on real-shaped (generated, fake) secrets, precision on ordinary code
and prose, and idempotency.

Every sample secret is generated at test time from a fixed seed, so no secret-shaped literal
sits in this file for a scanner (or a person) to mistake for a real one.
"""

from __future__ import annotations

import base64
import random
import string
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from osk.capture.secret_detectors import KINDS
from osk.capture.secrets import marker, mask_secrets

RNG = random.Random(20251129)
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = string.ascii_letters + string.digits + "+/"
URLSAFE = string.ascii_letters + string.digits + "-_"


def rand(alphabet: str, length: int) -> str:
    """Random text that mixes upper case, lower case and digits when the alphabet has them."""
    while True:
        value = "".join(RNG.choice(alphabet) for _ in range(length))
        wanted = [set(string.digits), set(string.ascii_uppercase), set(string.ascii_lowercase)]
        if all(not (group & set(alphabet)) or group & set(value) for group in wanted):
            return value


def pem(label: str, lines: int = 6, headers: str = "") -> str:
    body = "\n".join(rand(B64, 64) for _ in range(lines)) + "\n" + rand(B64, 20) + "=="
    return f"-----BEGIN {label}-----\n{headers}{body}\n-----END {label}-----"


def jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = base64.urlsafe_b64encode(
        f'{{"sub":"{rand(ALNUM, 10)}","iat":1700000000}}'.encode()).decode().rstrip("=")
    return f"{header}.{claims}.{rand(URLSAFE, 43)}"


def aws_secret() -> str:
    return rand(B64, 40)


def gh(prefix: str) -> str:
    return "gh" + prefix + "_" + rand(ALNUM, 36)


def slack(prefix: str) -> str:
    return f"xox{prefix}-{RNG.randint(10**11, 10**12)}-{RNG.randint(10**12, 10**13)}-" + rand(
        ALNUM, 24)


# (id, template, secret, kind): the expected output is template.format(s=marker(kind)).
RECALL: list[tuple[str, str, str, str]] = [
    ("rsa-key", "{s}", pem("RSA PRIVATE KEY"), "private-key"),
    ("ec-key", "key:\n{s}\ndone", pem("EC PRIVATE KEY", 3), "private-key"),
    ("dsa-key", "{s}\n", pem("DSA PRIVATE KEY"), "private-key"),
    ("openssh-key", "$ cat ~/.ssh/id_ed25519\n{s}\n$ ", pem("OPENSSH PRIVATE KEY", 4),
     "private-key"),
    ("pkcs8-key", "{s}", pem("PRIVATE KEY"), "private-key"),
    ("encrypted-pem", "{s}",
     pem("RSA PRIVATE KEY", 4, "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
         + rand("0123456789ABCDEF", 32) + "\n\n"), "private-key"),
    ("pgp-key", "{s}", pem("PGP PRIVATE KEY BLOCK", 5, "Version: GnuPG v2\n\n"),
     "private-key"),
    ("json-escaped-key", '  "private_key": "{s}",',
     pem("PRIVATE KEY").replace("\n", "\\n") + "\\n", "private-key"),
    ("unterminated-key", "here it is:\n{s}\n",
     "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(rand(B64, 64) for _ in range(5)),
     "private-key"),
    ("aws-id-env", "AWS_ACCESS_KEY_ID={s}", "AKIA" + rand(UPPER_DIGITS, 16),
     "aws-access-key-id"),
    ("aws-session-id", "Credential={s}/20240101/us-east-1/s3/aws4_request",
     "ASIA" + rand(UPPER_DIGITS, 16), "aws-access-key-id"),
    ("aws-id-json", '{{"AccessKeyId": "{s}"}}', "AKIA" + rand(UPPER_DIGITS, 16),
     "aws-access-key-id"),
    ("aws-secret-ini", "aws_secret_access_key = {s}", aws_secret(), "aws-secret-key"),
    ("aws-secret-env", "export AWS_SECRET_ACCESS_KEY={s}", aws_secret(), "aws-secret-key"),
    ("aws-secret-json", '"SecretAccessKey": "{s}",', aws_secret(), "aws-secret-key"),
    ("aws-configure", "AWS Secret Access Key [None]: {s}", aws_secret(), "aws-secret-key"),
    ("github-ghp", "GITHUB_TOKEN={s}", gh("p"), "github-token"),
    ("github-gho", "oauth token {s} expires", gh("o"), "github-token"),
    ("github-ghu", "{s}", gh("u"), "github-token"),
    ("github-ghs", "token: {s}", gh("s"), "github-token"),
    ("github-ghr", "refresh={s}", gh("r"), "github-token"),
    ("github-fine-grained", "gh auth login --with-token <<< {s}",
     "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59), "github-token"),
    ("github-in-remote", "git remote add origin https://x-access-token:{s}@github.com/o/r.git",
     gh("s"), "github-token"),
    ("github-after-korean", "토큰은 {s} 입니다", gh("p"), "github-token"),
    ("slack-bot", "SLACK_BOT_TOKEN={s}", slack("b"), "slack-token"),
    ("slack-user", "client = WebClient('{s}')", slack("p"), "slack-token"),
    ("slack-app", "{s}", slack("a"), "slack-token"),
    ("slack-refresh", "{s}", slack("r"), "slack-token"),
    ("slack-legacy", "{s}", slack("s"), "slack-token"),
    ("slack-webhook", "curl -X POST https://hooks.slack.com/services/{s} -d '{{}}'",
     "T" + rand(UPPER_DIGITS, 10) + "/B" + rand(UPPER_DIGITS, 10) + "/" + rand(ALNUM, 24),
     "slack-webhook"),
    ("openai-legacy", "OPENAI_API_KEY={s}", "sk-" + rand(ALNUM, 48), "openai-key"),
    ("openai-project", "client = OpenAI(api_key='{s}')",
     "sk-proj-" + rand(URLSAFE, 156), "openai-key"),
    ("anthropic", "ANTHROPIC_API_KEY={s}", "sk-ant-api03-" + rand(URLSAFE, 93) + "AA",
     "anthropic-key"),
    ("anthropic-in-prose", "I used {s} for that call.", "sk-ant-api03-" + rand(URLSAFE, 95),
     "anthropic-key"),
    ("jwt-cookie", "Cookie: session={s}; path=/", jwt(), "jwt"),
    ("jwt-bearer", "Authorization: Bearer {s}", jwt(), "jwt"),
    ("stripe", "stripe.api_key = '{s}'", "sk_" + "live_" + rand(ALNUM, 24), "stripe-key"),
    ("google", "key={s}", "AIza" + rand(URLSAFE, 35), "google-api-key"),
    ("npm", "//registry.npmjs.org/:_authToken={s}", "npm_" + rand(ALNUM, 36), "npm-token"),
    ("pypi", "password = {s}", "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 60), "pypi-token"),
    ("huggingface", "HF_TOKEN={s}", "hf_" + rand(ALNUM, 34), "huggingface-token"),
    ("gitlab", "PRIVATE-TOKEN: {s}", "glpat-" + rand(URLSAFE, 20), "gitlab-token"),
    ("bearer-header", "Authorization: Bearer {s}", rand(ALNUM, 32), "bearer-token"),
    ("bearer-curl", "curl -H 'Authorization: Bearer {s}' https://api.example.com",
     rand(ALNUM + "._-", 40), "bearer-token"),
    ("bearer-json", '{{"headers": {{"Authorization": "Bearer {s}"}}}}', rand(ALNUM, 40),
     "bearer-token"),
    ("basic-header", "authorization: Basic {s}",
     base64.b64encode(f"deploy:{rand(ALNUM, 12)}".encode()).decode(), "basic-auth"),
    ("proxy-authorization", "Proxy-Authorization: Basic {s}",
     base64.b64encode(f"proxy:{rand(ALNUM, 9)}".encode()).decode(), "basic-auth"),
    ("token-scheme", "Authorization: token {s}", rand(ALNUM, 40), "auth-token"),
    ("postgres-url", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", rand(ALNUM, 16),
     "password"),
    ("mysql-url", "engine = create_engine('mysql+pymysql://root:{s}@localhost/db')",
     rand(ALNUM + "!*", 14), "password"),
    ("mongodb-srv", "mongodb+srv://admin:{s}@cluster0.ab1cd.mongodb.net/test",
     rand(ALNUM, 20), "password"),
    ("redis-no-user", "REDIS_URL=redis://:{s}@cache:6379/0", rand(ALNUM, 18), "password"),
    ("amqp-url", "amqp://guest:{s}@rabbit//", rand(ALNUM, 12), "password"),
    ("env-password", "DB_PASSWORD={s}", rand(ALNUM + "!#%", 14), "password"),
    ("env-passwd", "passwd={s}", rand(ALNUM, 10), "password"),
    ("python-password", 'password = "{s}"', rand(ALNUM + " !", 12), "password"),
    ("python-kwarg", 'conn = connect(host="db", password="{s}")', rand(ALNUM, 12), "password"),
    ("json-password", '{{"user": "app", "password": "{s}"}}', rand(ALNUM, 12), "password"),
    ("yaml-password", "database:\n  password: {s}\n  port: 5432", rand(ALNUM, 12), "password"),
    ("yaml-quoted", "  db_password: '{s}'", rand(ALNUM, 12), "password"),
    ("yaml-list", "- password: {s}", rand(ALNUM, 12), "password"),
    ("ini-password", "[client]\npassword = {s}\n", rand(ALNUM, 12), "password"),
    ("java-properties", "spring.datasource.password={s}", rand(ALNUM, 12), "password"),
    ("go-password", 'password := "{s}"', rand(ALNUM, 12), "password"),
    ("ruby-rocket", ':password => "{s}",', rand(ALNUM, 12), "password"),
    ("js-camel", "const config = {{ apiKey: \"{s}\" }};", rand(ALNUM, 24), "api-key"),
    ("cli-equals", "mysql --password={s} -u root", rand(ALNUM, 12), "password"),
    ("cli-space", "mysql -u root --password {s} mydb", rand(ALNUM, 12), "password"),
    ("passphrase", "GPG_PASSPHRASE={s}", rand(ALNUM, 16), "password"),
    ("secret-env", "secret={s}", rand(ALNUM, 16), "secret"),
    ("client-secret", 'client_secret: "{s}"', rand(ALNUM, 24), "secret"),
    ("django-secret-key", "SECRET_KEY = '{s}'", rand(ALNUM + "!@#$%^&*(-_=+)", 50), "secret"),
    ("token-env", "token={s}", rand(ALNUM, 32), "token"),
    ("token-query", "GET /export?format=csv&access_token={s}&page=2", rand(ALNUM, 32),
     "token"),
    ("camel-token", '{{"accessToken": "{s}"}}', rand(ALNUM, 40), "token"),
    ("api-key-python", 'api_key = "{s}"', rand(ALNUM, 32), "api-key"),
    ("api-key-env", "WEATHER_API_KEY={s}", rand(ALNUM, 32), "api-key"),
    ("twilio-client", "client = Client('AC" + "0123456789abcdef" * 2 + "', '{s}')",
     rand("0123456789abcdef", 32), "twilio-auth-token"),
    ("access-key", "const minio = new Client({{ accessKey: \"{s}\" }});", rand(ALNUM, 20),
     "access-key"),
]


@pytest.mark.parametrize(("template", "secret", "kind"),
                         [case[1:] for case in RECALL], ids=[case[0] for case in RECALL])
def test_each_sample_secret_is_replaced_by_a_marker_naming_its_kind(template, secret, kind):
    text = template.format(s=secret)
    result = mask_secrets(text)
    assert result.text == template.format(s=marker(kind))
    assert result.findings == [(kind, 1)]


def test_the_recall_tables_cover_every_kind_the_filter_names():
    from secret_corpus import positives

    table = {kind for sample in positives() for kind, _ in mask_secrets(sample.text).findings}
    assert {case[3] for case in RECALL} | table == set(KINDS)


def test_an_env_file_with_several_secrets_keeps_its_names_and_counts_each_kind():
    github, password, aws_id = gh("p"), rand(ALNUM, 14), "AKIA" + rand(UPPER_DIGITS, 16)
    text = (f"# deploy settings\nDEBUG=false\nGITHUB_TOKEN={github}\nDB_PASSWORD={password}\n"
            f"AWS_ACCESS_KEY_ID={aws_id}\nADMIN_PASSWORD={rand(ALNUM, 10)}\nWORKERS=4\n")
    result = mask_secrets(text)
    assert result.text == (
        "# deploy settings\nDEBUG=false\nGITHUB_TOKEN=[REDACTED:github-token]\n"
        "DB_PASSWORD=[REDACTED:password]\nAWS_ACCESS_KEY_ID=[REDACTED:aws-access-key-id]\n"
        "ADMIN_PASSWORD=[REDACTED:password]\nWORKERS=4\n"
    )
    assert result.findings == [("aws-access-key-id", 1), ("github-token", 1), ("password", 2)]
    assert result.changed and result.count == 4


ORDINARY_CODE = '''\
import getpass
import hashlib
import os


class Login:
    password: str
    token: str | None = None
    max_tokens: int = 1024

    def __init__(self, user: str, password: str, token=None) -> None:
        self.user = user
        self.password = password
        self.token = token
        password_hash = hashlib.sha256(password.encode()).hexdigest()
        token_count = 3
        self.secret_ref = os.environ.get("APP_SECRET_REF")

    def check(self, token):
        if token == None:
            return False
        if token != self.token or len(password) < 8:
            return False
        for token in tokens:
            print(token)
        return True


password = getpass.getpass()
api_key = os.environ["OPENAI_API_KEY"]
secret = None
token = request.headers.get("X-Token")
token = self.refresh(token)
password = pw
client.login(user=user, password=password)
client.login(
    user=user,
    password=self.password,
    token=parts["token"],
)
settings = Settings(password=SecretStr(raw), secret_key=load_key())
print(f"password={password!r}")
TOKEN_KIND = "token"
PASSWORD_FIELD = "password"
CHALLENGE_PASSWORD = "challengePassword"
token = ","
tokens = tokenize(source)
if kind == "secret": pass
'''

ORDINARY_JS = '''\
const token = await getToken();
if (password.length < 8) { throw new Error("too short"); }
export function login(user: string, password: string): Promise<Session> {
  const headers = { Authorization: `Bearer ${token}` };
  return fetch(url, { headers, body: JSON.stringify({ user, password }) });
}
interface Config { apiKey?: string; token: string; }
let secret: string;
'''

ORDINARY_CONFIG = '''\
database:
  host: db.internal
  password: ${DB_PASSWORD}
  token: "{{ vault_token }}"
  password_hash: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
  secret: <your secret here>
  api_key: "********"
export PATH=$PATH:/usr/local/bin
echo $GITHUB_TOKEN | gh auth login --with-token
curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/items
curl -u "$USER:$PASSWORD" https://example.com
DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app
git clone git@github.com:octo/repo.git
ssh://git@host.example.com:22/srv/repo.git
https://example.com:8443/search?q=token&email=a@b.example
mysql --password
'''

ORDINARY_PROSE = '''\
The tokenizer splits text into tokens; a token is a word or a punctuation mark.
Password: see the team wiki, never paste it here.
The secret: we cache the parsed AST.
Authorization: Basic authentication is deprecated in favour of tokens.
Use --token carefully; it takes a value from your keychain.
토큰 수를 세는 함수입니다. 비밀번호는 저장하지 않고 해시만 보관합니다.
사용자 인증은 세션 토큰으로 처리하고, 만료 시간은 30분입니다.
commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)
sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty.txt
id 0195f1a2-7b3c-7def-8a90-1b2c3d4e5f60 and 123e4567-e89b-42d3-a456-426614174000
The scikit-learn docs (sk-learn-compatibility-layer-notes) and risk-assessment-2024-q3.
Email ops@example.com or visit https://docs.example.com/guide#tokens.
PEM_HEADER = "-----BEGIN PRIVATE KEY-----"
if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):
    parse(line)
elif line == "-----END RSA PRIVATE KEY-----":
    done()
'''


def data_uri_image() -> str:
    payload = random.Random(7).randbytes(12_000)
    return ("<img src=\"data:image/png;base64," + base64.b64encode(payload).decode()
            + "\" alt=\"diagram\">\n")


@pytest.mark.parametrize("text", [ORDINARY_CODE, ORDINARY_JS, ORDINARY_CONFIG, ORDINARY_PROSE,
                                  data_uri_image()],
                         ids=["python", "typescript", "config-and-shell", "prose", "image"])
def test_ordinary_code_and_prose_pass_through_byte_for_byte(text):
    result = mask_secrets(text)
    assert result.text == text
    assert result.findings == [] and not result.changed


def test_long_hex_and_base64_runs_pass_through_unchanged():
    rng = random.Random(11)
    text = "\n".join([rng.randbytes(4096).hex(), base64.b64encode(rng.randbytes(6000)).decode(),
                      base64.urlsafe_b64encode(rng.randbytes(6000)).decode()])
    assert mask_secrets(text).text == text


@pytest.mark.parametrize("text", [case[1].format(s=case[2]) for case in RECALL],
                         ids=[case[0] for case in RECALL])
def test_redacting_twice_equals_redacting_once(text):
    once = mask_secrets(text)
    twice = mask_secrets(once.text)
    assert twice.text == once.text
    assert twice.findings == []


FRAGMENTS = [
    "password=", "password = ", "token: ", '"secret": "', "Authorization: Bearer ", "api_key=",
    "postgres://u:", "@db/x", "-----BEGIN RSA PRIVATE KEY-----\n", "-----END RSA PRIVATE KEY-----",
    "[REDACTED:password]", "[REDACTED:", "]", '"', "'", " ", "\n", "=", ":", ",", "(", ")",
    "hunter2", "abc123XYZ", "ghp_", "sk-", "eyJ", "AKIA", "xoxb-", "토큰", "self.token",
    rand(ALNUM, 36), rand(B64, 64), rand(ALNUM, 8), "&", "?", "--password ", "$TOKEN",
]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14))
def test_redaction_is_idempotent_on_arbitrary_mixtures(pieces):
    once = mask_secrets("".join(pieces)).text
    assert mask_secrets(once).text == once


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=10),
       st.sampled_from([case for case in RECALL if case[3] not in {"password", "secret",
                                                                     "token", "api-key"}]))
def test_a_token_never_survives_whatever_surrounds_it(pieces, case):
    _, template, secret, _ = case
    text = "".join(pieces) + " " + template.format(s=secret) + " " + "".join(reversed(pieces))
    assert secret not in mask_secrets(text).text


def test_markers_hold_only_the_kind_never_any_part_of_the_secret():
    secret = gh("p")
    result = mask_secrets(f"t={secret}")
    assert secret[4:] not in result.text and secret[:8] not in result.text


def test_the_filter_module_imports_only_the_standard_library():
    code = "import sys, osk.capture.secrets; print(*sys.modules)"
    out = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert not set(out.split()) & {"pydantic", "yaml", "mcp", "git", "numpy", "filelock"}


def test_a_named_value_is_judged_as_an_assignment_of_the_same_key_is():
    """``- name: KEY`` / ``value: …`` and ``<KEY>…</KEY>`` follow the rules of ``KEY=…``: a
    working directory given as PWD is no password in either form; a real password is one."""
    for text in ("PWD=/home/dev", "- name: PWD\n  value: /home/dev\n", "<pwd>/home/dev</pwd>"):
        assert not mask_secrets(text).changed, text
    for text in ("DB_PASSWORD=Zq8-frog-Lamp", "- name: DB_PASSWORD\n  value: Zq8-frog-Lamp\n",
                 "<password>Zq8-frog-Lamp</password>"):
        assert "Zq8-frog-Lamp" not in mask_secrets(text).text, text


@pytest.mark.parametrize("placeholder", ["AKIA" + "IOSFODNN7" + "EXAMPLE", "AKIA" + "X" * 16],
                         ids=["aws-documentation-key", "aws-masked-key"])
def test_an_aws_key_id_that_is_a_placeholder_is_left_alone(placeholder):
    # AWS's own documentation key and a key masked to one letter name no account; a key of
    # the same shape beside them is still masked
    real = "AKIA" + rand(UPPER_DIGITS, 16)
    found = mask_secrets(f"the docs show {placeholder}; ours was {real}")
    assert placeholder in found.text
    assert real not in found.text
    assert found.findings == [("aws-access-key-id", 1)]
