"""Reading a shell command line down to the commands that run (the package's door: __init__.py)."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol


class Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def read_blob(self, path: str) -> bytes | None: ...
    def names_in(self, directory: str) -> list[str]: ...


MAX_DEPTH = 12  # scripts calling scripts
MAX_LEAVES = 200

ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATOR = re.compile(r"[;&|()]+")
_REDIRECT = re.compile(r"[0-9]*[<>&|]*[<>][<>&|]*")


@dataclass(frozen=True)
class Leaf:
    """A command that runs: its words after variables and wrappers, the directory it runs in
    (from the root, "" the root itself), and the scripts it was reached through."""

    words: tuple[str, ...]
    where: str = ""
    via: tuple[str, ...] = ()  # () the check command's own text; else ("npm test", "packages/a: test", ...)
    node_options_replaced: bool = False  # a `NODE_OPTIONS=...` on the way dropped the variable's value

    @property
    def program(self) -> str:
        return posixpath.basename(self.words[0]) if self.words else ""

    def said(self) -> str:
        """`vitest run` (packages/a, through `npm test`)."""
        text = shlex.join(self.words)
        where = self.where or "."
        return f"`{text}` ({where}{', through `' + self.via[0] + '`' if self.via else ''})"


@dataclass(frozen=True)
class Runs:
    leaves: tuple[Leaf, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be followed, for the verdict and doctor
    scripts: bool = False  # the command runs package scripts (its runners are read from them)


@dataclass(frozen=True)
class State:
    """Where a command line is read: its directory, the scripts it came through, how deep."""

    where: str = ""
    via: tuple[str, ...] = ()
    depth: int = 0
    node_options_replaced: bool = False

    def deeper(self, where: str | None = None, via: tuple[str, ...] | None = None) -> State:
        """One script further down (in ``where``, reached through ``via``)."""
        where = self.where if where is None else where
        return replace(self, depth=self.depth + 1, where=where, via=self.via if via is None else via)


Handler = Callable[["Walk", list[str], State], None]


@dataclass
class Walk:
    """One reading of a command: the leaves found, what could not be followed."""

    tree: Tree | None
    handlers: dict[str, Handler]
    leaves: list[Leaf] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scripts: bool = False
    seen: set[tuple[str, str]] = field(default_factory=set)  # (directory, script) already read

    def command(self, text: str, state: State) -> None:
        if state.depth > MAX_DEPTH:
            self.notes.append(f"scripts nested deeper than {MAX_DEPTH} at {state.via[-1] if state.via else text!r}")
            return
        commands = split_commands(text)
        if commands is None:
            self.notes.append(f"`{text}` does not parse as a shell command line")
            return
        for words in commands:
            if words[0] == "cd" and len(words) <= 2:
                state = replace(state, where=cd(state.where, words[1] if len(words) > 1 else ""))
                continue
            self.simple(words, state)

    def simple(self, words: list[str], state: State) -> None:
        while words and ASSIGN.match(words[0]):
            state = assigned(state, words[0])
            words = words[1:]
        if not words:
            return
        handler = self.handlers.get(posixpath.basename(words[0]))
        if handler is not None:
            handler(self, words, state)
        else:
            self.leaf(words, state)

    def leaf(self, words: list[str], state: State) -> None:
        if len(self.leaves) < MAX_LEAVES:
            self.leaves.append(Leaf(tuple(words), state.where, state.via, state.node_options_replaced))


def split_commands(text: str) -> list[list[str]] | None:
    """The simple commands of a shell line, their words unquoted; None when it does not parse."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    out: list[list[str]] = []
    current: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif _REDIRECT.fullmatch(token) and not _SEPARATOR.fullmatch(token):
            if current and current[-1].isdigit():
                current.pop()  # `2>&1`: the descriptor is no argument
            skip = True  # the file or descriptor it names
        elif _SEPARATOR.fullmatch(token):
            if current:
                out.append(current)
            current = []
        else:
            current.append(token)
    if current:
        out.append(current)
    return out


def cd(where: str, target: str) -> str:
    if not target or target.startswith(("/", "~", "$")):
        return where  # home or absolute: outside what papayu reads; the leaf stays where it was
    joined = posixpath.normpath(posixpath.join(where or ".", target))
    return "" if joined == "." else joined


def assigned(state: State, assignment: str) -> State:
    """A `NODE_OPTIONS=...` that does not keep the variable's value drops papayu's hook (runners.py)."""
    name, _, value = assignment.partition("=")
    if name == "NODE_OPTIONS" and "$NODE_OPTIONS" not in value and "${NODE_OPTIONS}" not in value:
        return replace(state, node_options_replaced=True)
    return state
