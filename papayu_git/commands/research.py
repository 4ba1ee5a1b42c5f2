"""`git papayu research QUERY`: search the web, read a few pages, summarize them with sources
(docs/DESIGN.md, "Online research")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from papayu_git import output
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import find_toplevel


def run(query: str, as_json: bool) -> int:
    from papayu_git import research
    from papayu_git.git import papayu_dir
    from papayu_git.llm.session import open_client
    from papayu_git.repository import open_repo

    root = find_toplevel()
    research.require_enabled(str(root))
    pdir = papayu_dir(open_repo(root))
    stats: dict[str, Any] = {}
    found, error = None, None
    try:
        with open_client(root) as client:
            found = research.run(query, client, pdir, cwd=str(root), reason="command", stats=stats)
    except PapayuError as exc:
        error = exc.code
        raise
    finally:
        _trace(pdir, query, stats, found, error)
    if as_json:
        output.emit_json({"ok": True, **found.to_json()})
        return 0
    for line in found.lines():
        output.result(line)
    output.result(f"next: git papayu plan GOAL --use-research {found.id}")
    return 0


def _trace(pdir: Path, query: str, stats: dict[str, Any], found: Any, error: str | None) -> None:
    """A trace of the research's model calls, when it made any (a failed summary too): `stats`
    counts their tokens and cost like those of plans (docs/DESIGN.md, "Traces")."""
    calls = stats.get("usage")
    if not calls:
        return
    from papayu_git import traces

    traces.write_record(
        pdir,
        traces.new_trace_id(),
        "research",
        goal=query,
        validation_outcome="ok" if found is not None else "error",
        error_code=error,
        request={
            "mode": "research",
            "provider": stats.get("provider"),
            "model": stats.get("model"),
            "calls": len(calls),
            "usage": calls,
        },
        online_research={
            "id": found.id if found is not None else None,
            **{k: stats[k] for k in ("results", "pages_ok", "pages_failed", "cache_hit") if k in stats},
        },
    )


@click.command("research")
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(query: str, as_json: bool) -> None:
    """Search the web for QUERY, read a few result pages and have the model summarize them.

    \b
    Needs PAPAYU_ONLINE_RESEARCH=1 and a search provider (PAPAYU_ONLINE_SEARCH_PROVIDER: tavily with
    PAPAYU_ONLINE_TAVILY_API_KEY, or searxng with PAPAYU_ONLINE_SEARXNG_URL). Pages are fetched under the
    SSRF rules (public http(s) addresses only, size and type limits). Prints the answer with
    numbered sources and stores it as .git/papayu/research/<id>.json.
    Then: git papayu plan GOAL --use-research <ID>.
    """
    with handle_errors(as_json):
        raise SystemExit(run(query, as_json))
