"""Context blocks: the value objects the engine produces and the text the model reads (docs/DESIGN.md, "Context").

A block renders as a header line and a body. The FILE header is part of the protocol
(docs/DESIGN.md, "Context": FILE blocks): the model copies the sha256 into base_sha256, so it is
always the whole blob's hash and never shortened, whatever happens to the body.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class BlockKind(StrEnum):
    FILE = "FILE"
    SEARCH = "SEARCH"
    LOGS = "LOGS"
    ENV = "ENV"
    NOTE = "NOTE"


# Priorities: lower is more important. 0 = what the model asked for or the innermost error
# location (keeps >= 4k chars under the diet), 1 = other frames / tests, 2 = manifests, 3 = extras.
PRIORITY_TOP, PRIORITY_HIGH, PRIORITY_MANIFEST, PRIORITY_LOW = 0, 1, 2, 3


@dataclass(frozen=True)
class ContextBlock:
    kind: BlockKind
    title: str  # FILE: the path; SEARCH: the query; LOGS: the source; NOTE: a label
    text: str  # the body sent to the model
    priority: int = PRIORITY_HIGH
    path: str = ""  # repo-relative path of a FILE block
    sha256: str = ""  # sha256 of the whole base blob (FILE blocks of text files)
    requested: bool = False  # asked for by the model (context_requests): dropped last
    truncated: bool = False  # the body was shortened by the diet
    dirty: bool = False  # the working tree differs from the base blob
    binary: bool = False  # described, not dumped; not counted as "shown" for UPDATE_FILE
    detail: str = ""  # header detail: line range, glob, match count, log file

    def header(self) -> str:
        if self.kind is BlockKind.FILE:
            # Exactly `FILE[path] (sha256=<64 hex>):`, the protocol's form; a DIRTY marker may follow it.
            return f"FILE[{self.path}] (sha256={self.sha256}):" if self.sha256 else f"FILE[{self.path}]:"
        if self.kind is BlockKind.ENV:
            return "ENV:"
        if self.kind is BlockKind.NOTE:
            return f"NOTE[{self.title}]:"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.kind.value}[{self.title}]{detail}:"

    def render(self) -> str:
        lines = [self.header()]
        if self.kind is BlockKind.FILE and self.dirty:
            lines.append(
                "...[DIRTY: the working tree has uncommitted changes to this file; "
                "shown is the base commit's version]..."
            )
        lines.append(self.text)
        return "\n".join(lines)

    def with_text(self, text: str, *, truncated: bool) -> ContextBlock:
        return replace(self, text=text, truncated=truncated or self.truncated)

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "title": self.title,
            "path": self.path,
            "sha256": self.sha256,
            "priority": self.priority,
            "requested": self.requested,
            "truncated": self.truncated,
            "dirty": self.dirty,
            "binary": self.binary,
            "detail": self.detail,
            "chars": len(self.text),
        }


BLOCK_SEPARATOR = "\n\n"


def render_blocks(blocks: list[ContextBlock]) -> str:
    return BLOCK_SEPARATOR.join(block.render() for block in blocks)


def note(label: str, text: str) -> ContextBlock:
    return ContextBlock(BlockKind.NOTE, label, text, priority=PRIORITY_TOP)
