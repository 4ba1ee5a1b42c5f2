"""`git papayu validate FILE…`: response/plan files, project.json, preferences, golden traces."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from papayu_git import golden, output, schemas, settings
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError, ValidationFailed
from papayu_git.git import find_toplevel
from papayu_git.golden import is_golden
from papayu_git.hooks import staged_snapshot
from papayu_git.paths import configured_protected
from papayu_git.plans import is_plan_record, record_errors
from papayu_git.protocol import parse_json_text, raw_actions
from papayu_git.validate import validate_response

FILE_KINDS = ("response", "plan", "project", "preferences", "golden")


@dataclass
class FileReport:
    file: str
    kind: str = ""
    errors: list[PapayuError] = field(default_factory=list)
    warnings: list[PapayuError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "kind": self.kind,
            "ok": self.ok,
            "errors": [e.to_dict() for e in self.errors],
            "warnings": [w.to_dict() for w in self.warnings],
        }


def detect_kind(path: Path, data: Any) -> str:
    if is_golden(data):
        return "golden"
    if is_plan_record(data):
        return "plan"
    if isinstance(data, dict) and "actions" not in data and "proposed_changes" not in data:
        if "project" in data or path.name == "project.json":
            return "project"
        if "user" in data or path.name == "preferences.json":
            return "preferences"
    return "response"


def _response_mode(data: Any) -> str:
    declared = data.get("mode") if isinstance(data, dict) else None
    if declared in ("fix-plan", "plan", "chat", "fixit"):
        return "plan"
    if declared == "apply":
        return "apply"
    return "apply" if raw_actions(data) else "plan"


def _validate_data(
    path: Path, data: Any, kind: str, protocol: int | None, mode: str | None, report: FileReport
) -> None:
    if kind in ("project", "preferences", "golden"):
        code = {
            "project": "ERR_PROJECT_INVALID",
            "preferences": "ERR_PREFERENCES_INVALID",
            "golden": "ERR_GOLDEN_INVALID",
        }[kind]
        report.errors.extend(schemas.schema_errors({"golden": "golden_trace"}.get(kind, kind), data, code))
        if kind == "golden" and not report.errors:
            report.errors.extend(golden.check_replay(data, path))
        return
    read_files = None
    if kind == "plan":
        report.errors.extend(record_errors(data))  # `apply FILE` refuses these (plans.from_record)
        if report.errors:
            return
        read_files, protocol, mode = data.get("files") or {}, protocol or data.get("protocol"), mode or data.get("mode")
        data = data.get("response")
    if protocol is None:
        protocol = 1 if isinstance(data, list) else settings.get_int("protocol_version")
    try:
        response = validate_response(
            data,
            protocol=protocol,
            mode=mode or _response_mode(data),
            read_files=read_files,
            protected=configured_protected(),
        )
        report.warnings.extend(response.warnings)
    except ValidationFailed as exc:
        report.errors.extend(exc.errors)
    except PapayuError as exc:  # a stored plan naming an unknown protocol or mode
        report.errors.append(exc)


def _expected_kind(detected: str, kinds: tuple[str, ...], report: FileReport) -> str | None:
    """The kind to validate as, or None (error recorded) when a hook got the wrong kind of file.

    "response" is only the fallback of detect_kind, so a hook expecting one other kind
    validates such a file as that kind: its schema then names what is missing.
    """
    if not kinds or detected in kinds:
        return detected
    if detected == "response" and len(kinds) == 1:
        return kinds[0]
    report.errors.append(
        PapayuError(
            "ERR_WRONG_FILE_KIND",
            f"this is a {detected} file; expected {' or '.join(kinds)}",
            hint="Move the file where files of its kind live (docs/FEATURES.md: pre-commit hooks), or fix its content.",
        )
    )
    return None


def validate_file(
    path: Path, protocol: int | None, mode: str | None, kinds: tuple[str, ...] = (), display: str | None = None
) -> FileReport:
    report = FileReport(display or str(path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        report.errors.append(PapayuError("ERR_FILE_NOT_FOUND", exc.strerror or str(exc)))
        return report
    try:
        data = parse_json_text(raw)
    except PapayuError as exc:
        report.errors.append(exc)
        return report
    report.kind = detect_kind(path, data)
    kind = _expected_kind(report.kind, kinds, report)
    if kind is not None:
        report.kind = kind
        _validate_data(path, data, kind, protocol, mode, report)
    return report


def _staged_reports(protocol: int | None, mode: str | None, kinds: tuple[str, ...]) -> list[FileReport]:
    """The index versions of hook-matched files (the shim in hooks/pre-commit)."""
    with staged_snapshot(find_toplevel()) as (tmp, todo):
        return [validate_file(tmp / rel, protocol, mode, kinds or hook_kinds, display=rel) for rel, hook_kinds in todo]


def _line(file: str, err: PapayuError) -> str:
    where = f"{err.path}: " if err.path else ""
    return f"{file}: {err.code}: {where}{err.reason} ({err.hint})"


def run(
    files: list[str],
    protocol: int | None = None,
    mode: str | None = None,
    as_json: bool = False,
    kinds: tuple[str, ...] = (),
    staged: bool = False,
) -> int:
    reports = [validate_file(Path(f), protocol, mode, kinds) for f in files]
    if staged:
        reports += _staged_reports(protocol, mode, kinds)
    if as_json:
        output.emit_json({"ok": all(r.ok for r in reports), "files": [r.to_dict() for r in reports]})
    else:
        for report in reports:
            for err in report.errors:
                output.result(_line(report.file, err))
            for warning in report.warnings:
                output.warn(_line(report.file, warning) + " [dropped]")
            if report.ok:
                output.result(f"{report.file}: ok ({report.kind})")
    return 0 if all(r.ok for r in reports) else 1


def _parse_kinds(value: str | None) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in (value or "").split(",") if k.strip())
    unknown = [k for k in kinds if k not in FILE_KINDS]
    if unknown:
        raise click.BadParameter(
            f"unknown kind {', '.join(unknown)}; choose from {', '.join(FILE_KINDS)}", param_hint="--kind"
        )
    return kinds


@click.command("validate")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--protocol",
    type=click.Choice(["1", "2"]),
    help="Protocol of response files (default: PAPAYU_PROTOCOL_VERSION, 2; an array is always v1).",
)
@click.option(
    "--mode",
    type=click.Choice(["plan", "apply"]),
    help="Validate as a PLAN or an APPLY answer (default: the response's own 'mode', else apply when it has actions).",
)
@click.option(
    "--kind",
    "kind",
    metavar="KIND[,KIND]",
    help="Accept only these kinds ("
    + ", ".join(FILE_KINDS)
    + "); another kind fails with ERR_WRONG_FILE_KIND. Used by the pre-commit hooks.",
)
@click.option(
    "--staged",
    is_flag=True,
    help="Validate the staged (index) versions of the files the pre-commit "
    "hooks cover (.papa-yu/*.json, golden traces); used by the hooks/pre-commit shim.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(
    files: tuple[str, ...], protocol: str | None, mode: str | None, kind: str | None, staged: bool, as_json: bool
) -> None:
    """Validate FILE… : model responses, stored plans, .papa-yu/project.json,
    preferences.json and golden traces (the kind is detected from the content).

    Prints `FILE: ERR_CODE: reason (hint)` per problem. Exit 0 when all are valid, 1 otherwise.
    """
    if not files and not staged:
        raise click.UsageError("give FILE… or --staged")
    kinds = _parse_kinds(kind)
    with handle_errors(as_json):
        raise SystemExit(run(list(files), int(protocol) if protocol else None, mode, as_json, kinds, staged))
