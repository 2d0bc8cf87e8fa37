"""The secret guard's corpora, shared by tests/test_secrets.py and benchmarks/bench_secrets.py.

`positives()`: a fake of every kind the guard refused before issue 32 — each
provider format and rule of `fsmem/format/secrets.py`, the planted fakes of its
tests, and assignments of literals in the languages `REFERENCES` covers. They
are drawn from a fixed seed at run time and none is a real credential; building
them keeps key-shaped literals out of the repository. Every one stays refused.

`REFERENCES`: lines that name or point at a secret the way code, configuration
and notes do — an environment lookup, a settings or config lookup, a call, a
placeholder, a key's name, a variable, a URI or path to a secret store — in
Python, JavaScript/TypeScript, Go, Rust, Java/Kotlin, C#, Ruby, PHP, shell,
YAML (Compose, Kubernetes, Ansible, Actions), HCL, .env and prose. Written for
this corpus, not copied. Every one is accepted.

`NEAR_MISSES`: what notes are full of that is shaped like a secret (hashes,
ids, placeholders, prose with "password" or "token" in it). Every one is accepted.
"""

from __future__ import annotations

import random
import string

rng = random.Random(20261130)
UP, DIGITS, HEX = string.ascii_uppercase, string.digits, "0123456789abcdef"
AN = string.ascii_letters + string.digits


def r(chars: str, n: int) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def pem(kind: str) -> tuple[str, str]:
    body = "\n".join(r(AN + "+/", 64) for _ in range(5)) + "\n" + r(AN + "+/", 40) + "=="
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----", body


def positives() -> list[tuple[str, str, str]]:
    """(kind expected, note text, the secret in it): every one refused, the secret inside the span found."""
    items: list[tuple[str, str, str]] = []

    def add(kind: str, template: str, secret: str) -> None:
        items.append((kind, template.format(s=secret), secret))

    # the planted fakes of tests/test_secrets.py (issue 19), as they were
    add("AWS access key id", "- aws access key id for the billing bot: {s}", "AKIA" + r(UP + "234567", 16))
    add("AWS access key id", "Temporary STS key {s} expires tonight.", "ASIA" + r(UP + "234567", 16))
    add("secret assignment", "- aws_secret_access_key = {s}", r(AN + "+/", 40))
    add("GitHub token", "- GitHub token for the release workflow: {s}", "ghp_" + r(AN, 36))
    add("GitHub token", "Maria pasted her OAuth token `{s}` in the ticket.", "gho_" + r(AN, 36))
    add("GitHub token", "- fine-grained PAT: {s}", "github_pat_11" + r(UP + DIGITS, 20) + "_" + r(AN, 59))
    add("Slack token", "- slack bot token: {s}", f"xoxb-{r(DIGITS, 11)}-{r(DIGITS, 13)}-{r(AN, 24)}")
    add(
        "Slack webhook",
        "- incident webhook: {s}",
        f"https://hooks.slack.com/services/T{r(UP, 8)}/B{r(UP, 10)}/{r(AN, 24)}",
    )
    add("Stripe key", "- stripe: {s}", "sk_live_" + r(AN, 24))
    add("OpenAI API key", "- OPENAI_API_KEY={s}", "sk-" + r(AN, 20) + "T3BlbkFJ" + r(AN, 20))
    add("OpenAI API key", "- openai key {s}", "sk-proj-" + r(AN + "-_", 48))
    add("Anthropic API key", "- anthropic key: {s}", "sk-ant-api03-" + r(AN + "-_", 93) + "AA")
    add("Google API key", "- maps api key: {s}", "AIza" + r(AN + "-_", 35))
    add("GitLab token", "- gitlab: {s}", "glpat-" + r(AN + "-_", 20))
    add("npm token", "//registry.npmjs.org/:_authToken={s}", "npm_" + r(AN, 36))
    add("Hugging Face token", "- HF token {s}", "hf_" + r(AN, 34))
    add("SendGrid API key", "- sendgrid key: {s}", "SG." + r(AN + "-_", 22) + "." + r(AN + "-_", 43))
    add("Twilio API key", "Twilio API key {s}", "SK" + r(HEX, 32))
    add("Telegram bot token", "- telegram bot: {s}", f"{r(DIGITS[1:], 1)}{r(DIGITS, 8)}:AA{r(AN + '-_', 33)}")
    add("JSON web token", "- session JWT: {s}", f"eyJ{r(AN, 30)}.eyJ{r(AN, 40)}.{r(AN + '-_', 43)}")
    add("URL password", "- db: postgres://billing:{s}@db.acme.internal:5432/billing", r(AN, 14))
    add("URL password", "- [admin console](https://admin:{s}@console.globex.io/login)", r(AN, 20))
    add("secret assignment", "- password: {s}", "hunter2")
    add("secret assignment", 'PASSWORD="{s}"', "Spring2026!")
    add("password", "Adam's VPN password is {s}", "Winter2025!x")
    add("secret assignment", "- api_key = {s}", r(HEX, 32))
    add("secret assignment", "export SERVICE_TOKEN={s}", r(AN, 32))
    block, body = pem("RSA PRIVATE KEY")
    items.append(("private key", f"Deploy key for atlas-prod:\n\n```\n{block}\n```", body))

    # the provider formats the tests above leave out: one fake of each, from its pattern
    add("GitHub token", "- user-to-server token {s}", "ghu_" + r(AN, 36))
    add("GitHub token", "- server-to-server token {s}", "ghs_" + r(AN, 36))
    add("GitHub token", "- refresh token {s}", "ghr_" + r(AN, 36))
    add("GitLab token", "- deploy token {s}", "gldt-" + r(AN, 24))
    add("Slack token", "- user token {s}", f"xoxp-{r(DIGITS, 11)}-{r(DIGITS, 12)}-{r(AN, 32)}")
    add("Slack token", "- app token {s}", f"xapp-1-A{r(UP + DIGITS, 10)}-{r(DIGITS, 13)}-{r(HEX, 64)}")
    add("DigitalOcean token", "- doctl token {s}", "dop_v1_" + r(HEX, 64))
    add("Databricks token", "- workspace token {s}", "dapi" + r(HEX, 32))
    add("Shopify token", "- shop admin token {s}", "shpat_" + r(HEX, 32))
    add("Mailchimp API key", "- mailchimp {s}", r(HEX, 32) + "-us14")
    add("Discord bot token", "- discord bot {s}", "M" + r(AN, 25) + "." + r(AN, 6) + "." + r(AN + "_-", 27))
    add("Stripe key", "- restricted key {s}", "rk_test_" + r(AN, 24))
    add("Anthropic API key", "- admin key {s}", "sk-ant-admin01-" + r(AN + "-_", 90))
    add("OpenAI API key", "- service account {s}", "sk-svcacct-" + r(AN + "-_", 40))
    add("OpenAI API key", "- legacy key {s}", "sk-" + r(AN, 48))
    add("npm token", "- npm publish token {s}", "npm_" + r(AN, 36))
    add("PyPI token", "- twine password {s}", "pypi-AgEIcHlwaS5vcmc" + r(AN + "-_", 60))
    add("Azure storage key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s};", r(AN + "+/", 86) + "==")
    add("URL password", "- broker: amqp://rabbit:{s}@mq.acme.internal:5672/", r(AN, 16) + "!")
    add("URL password", "- redis://default:{s}@cache.acme.internal:6379", r(AN, 24))
    for kind in (
        "EC PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ):
        block, body = pem(kind)
        items.append(("private key", f"key:\n{block}\n", body))

    # literals assigned to secret-named keys, in the languages and formats REFERENCES covers
    pw = lambda: r(AN, 8) + rng.choice("!#%&*") + r(DIGITS, 2)  # noqa: E731
    add("secret assignment", "DB_PASSWORD={s}", pw())
    add("secret assignment", "  POSTGRES_PASSWORD: {s}", pw())
    add("secret assignment", "password: '{s}'", pw())
    add("secret assignment", '"password": "{s}",', pw())
    add("secret assignment", "    'PASSWORD': '{s}',", pw())
    add("secret assignment", 'const dbPassword = "{s}";', pw())
    add("secret assignment", 'password := "{s}"', pw())
    add("secret assignment", 'let password = "{s}";', pw())
    add("secret assignment", 'String password = "{s}";', pw())
    add("secret assignment", "spring.datasource.password={s}", pw())
    add("secret assignment", "$db_password = '{s}';", pw())
    add("secret assignment", "password = {s}", pw())
    add("secret assignment", "SECRET_KEY = '{s}'", "django-insecure-" + r(AN + "!@#%^&*(-_=+)", 50))
    add("secret assignment", "secret_key_base: {s}", r(HEX, 128))
    add("secret assignment", "client_secret = '{s}'", r(AN, 40))
    add("secret assignment", 'token: "{s}"', r(AN + "_-", 40))
    add("secret assignment", "AUTH_TOKEN={s}", r(HEX, 40))
    add("secret assignment", "access_token = {s}", r(AN, 44))
    add("secret assignment", "jwt_secret: {s}", r(AN, 32))
    add("password", "The wifi password was still {s} when I left.", pw())
    add("password", "- login: admin / {s}", pw())
    add("password", "credentials: deploy / {s}", pw())
    return items


# name or point at a secret: never one (each accepted under `refuse`)
REFERENCES = [
    # Python
    "    'PASSWORD': os.environ.get('DB_PASSWORD'),",
    "        'PASSWORD': os.environ['POSTGRES_PASSWORD'],",
    "secret_key = settings.SECRET_KEY",
    "SECRET_KEY = os.getenv('DJANGO_SECRET_KEY', '')",
    "password = XML.find('wachtwoord').text",
    "password = getpass.getpass('Password: ')",
    "api_key = config['openai']['api_key']",
    "token = request.headers.get('Authorization')",
    'db_password = environ.get("DATABASE_PASSWORD")',
    "client_secret = secrets_manager.get_secret_value(SecretId='prod/db')['SecretString']",
    'password=os.environ["PGPASSWORD"],',
    "conn = psycopg.connect(host=host, user=user, password=db_password)",
    "hashed_password = generate_password_hash(password)",
    "password: str = Field(..., min_length=12)",
    "api_key: Optional[str] = None",
    "self.password = kwargs.pop('password', None)",
    "access_token = create_access_token(data={'sub': user.email})",
    "password = input('Enter your password: ')",
    # JavaScript, TypeScript
    "const password = process.env.DB_PASSWORD;",
    "  password: process.env.POSTGRES_PASSWORD || '',",
    "const apiKey = import.meta.env.VITE_API_KEY;",
    "const token = localStorage.getItem('token');",
    "  secret: config.jwt.secret,",
    "const { password } = req.body;",
    "password: string;",
    "const secret = await getSecret('stripe/webhook');",
    'const password = Deno.env.get("DB_PASSWORD");',
    "token = this.authService.getToken();",
    # Go
    'password := os.Getenv("DB_PASSWORD")',
    "Password: cfg.Database.Password,",
    'secret, ok := os.LookupEnv("APP_SECRET")',
    'Token string `json:"token"`',
    # Rust
    'let password = env::var("DB_PASSWORD")?;',
    'let api_key = std::env::var("OPENAI_API_KEY").expect("OPENAI_API_KEY is set");',
    "pub password: Option<String>,",
    "password: settings.database.password.clone(),",
    # Java, Kotlin, C#
    'String password = System.getenv("DB_PASSWORD");',
    '@Value("${spring.datasource.password}")',
    "spring.datasource.password=${DB_PASSWORD}",
    'val token = System.getenv("GITHUB_TOKEN") ?: error("no token")',
    'var password = Environment.GetEnvironmentVariable("DB_PASSWORD");',
    'var apiKey = configuration["OpenAI:ApiKey"];',
    "private final String secretKey;",
    # Ruby
    "password = ENV['DB_PASSWORD']",
    "  password: ENV.fetch('DATABASE_PASSWORD') { nil },",
    "secret_key_base = Rails.application.credentials.secret_key_base",
    "  password: <%= ENV['POSTGRES_PASSWORD'] %>",
    'token = "#{ENV["API_TOKEN"]}"',
    # PHP
    "'password' => env('DB_PASSWORD'),",
    "$password = getenv('DB_PASSWORD');",
    "$db_pass = $_ENV['DB_PASS'];",
    "$token = $request->bearerToken();",
    # shell, .env, Docker
    'export DB_PASSWORD="$(vault kv get -field=password secret/db)"',
    "PGPASSWORD=$DB_PASS psql -h db -U app",
    "export GITHUB_TOKEN=${GITHUB_TOKEN:?set it first}",
    "DB_PASSWORD=changeme",
    "API_KEY=your_api_key_here",
    "SECRET_KEY=<generate with openssl rand -hex 32>",
    "TOKEN=xxx",
    "password=********",
    "$env:API_KEY = Read-Host -AsSecureString",
    "set DB_PASSWORD=%DB_PASSWORD%",
    "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}",
    "      POSTGRES_PASSWORD_FILE: /run/secrets/db_password",
    "      - DB_PASSWORD=${DB_PASSWORD:-}",
    # YAML: Kubernetes, Ansible, GitHub Actions, Home Assistant, Helm
    "          secretKeyRef:",
    "            key: password",
    "    password: {{ .Values.postgresql.auth.password | quote }}",
    'ansible_become_password: "{{ vault_become_password }}"',
    "          token: ${{ secrets.GITHUB_TOKEN }}",
    "password: !secret wifi_password",
    "api_key: !vault |",
    "  password: env://POSTGRES_PASSWORD",
    '  "password": "env://POSTGRES_PASSWORD",',
    "  client_secret: vault:secret/data/oauth#client_secret",
    "  token: op://Engineering/deploy-bot/credential",
    "  password: arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db",
    # HCL, INI, JSON configuration
    "  password = var.db_password",
    "  password = random_password.master.result",
    "  master_password = data.aws_secretsmanager_secret_version.db.secret_string",
    "password = <your-password>",
    '  "apiKey": "<YOUR_API_KEY>",',
    '  "token": "YOUR_TOKEN_HERE",',
    "api_key = ...",
    # prose and notes that say where to find it
    "- config: the app reads password = os.environ.get('DB_PASSWORD') at start",
    "- the deploy token lives in 1Password, item deploy-bot; token: see vault",
    "- db password: in the team vault under prod/postgres (password = VAULT_DB_PASSWORD)",
    "- Set password_env: DB_PASSWORD in fsmem.yaml of the service",
    "Rotate the secret: run `aws secretsmanager rotate-secret --secret-id prod/db`.",
]

NEAR_MISSES = [
    "- fixed in commit 11f6ad8ec52a2984abaafd7c3b516503785c2072",
    "- request id 0d115c04-2652-4962-8573-82cfdbada795 failed twice",
    "consolidated: sha256-0123abcd4567ef89",
    "- artifact digest sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
    "- md5 of the export: 4a8a08f09d37b73795649038408b5f33",
    "created: 2026-11-20T10:00:00+00:00",
    "- see [the runbook](https://wiki.acme.internal/ops/runbook#rollback)",
    "- email adam.smith@acme.example when the invoice bounces",
    "- clone git@github.com:acme/atlas.git",
    "- api_key: <your-api-key>",
    "- password: ${DB_PASSWORD}",
    "- token: ****",
    "AWS documents AKIAIOSFODNN7EXAMPLE as its sample key.",
    "- Adam forgot his password again; reset it through the portal.",
    "- The secret: practice every day.",
    "- token budget: 4000",
    "- employer: Globex ([2026-11-20](../../sessions/2026/11/20/support-0140.md))",
    "- ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx is the placeholder in the docs",
]
