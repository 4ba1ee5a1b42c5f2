"""The string a Python expression makes when its parts are constants (check/reach_python.py).

`"_py" "test"`, `"_py" + "test"`, `"%stest" % "_py"`, `"{}test".format("_py")`, `f"{p}test"` with
`p = "_py"`, `"".join(["_", "pytest"])`, `"tsetyp_"[::-1]`, `"".join(map(chr, [95, ...]))`,
`[chr(c) for c in (...)]`, base64, hex and `codecs` (rot13) decodings: each is folded to what it
makes, without running anything. A name counts when the module binds it once, to a foldable
expression. Anything else is None: not a constant.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
from collections.abc import Callable

MAX_DEPTH = 20
_STR_METHODS = frozenset(
    ["replace", "upper", "lower", "strip", "lstrip", "rstrip", "removeprefix", "removesuffix", "title", "swapcase"]
)
_BASE64 = ("b64decode", "b32decode", "b16decode", "b85decode", "a85decode", "urlsafe_b64decode")


def value_of(node: ast.AST | None, bound: dict[str, ast.expr], depth: int = 0) -> object:
    """The value of ``node`` (a str, bytes, int, or a tuple of them), or None. ``bound``: the
    module's names bound once (a comprehension binds its own for a while)."""
    if node is None or depth > MAX_DEPTH:
        return None
    folder = _FOLDERS.get(type(node))
    if folder is None:
        return None
    try:
        return folder(_Fold(bound, depth + 1), node)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError, binascii.Error, LookupError):
        return None


def called(node: ast.Call) -> str:
    """The name a call calls: `f` of `f(x)` and of `m.f(x)`."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def dotted(node: ast.AST | None) -> str:
    """`a.b.c` for an attribute chain on a name, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


class _Fold:
    def __init__(self, bound: dict[str, ast.expr], depth: int) -> None:
        self.bound, self.depth = bound, depth

    def of(self, node: ast.AST | None) -> object:
        return value_of(node, self.bound, self.depth)

    def constant(self, node: ast.Constant) -> object:
        value = node.value
        return value if isinstance(value, str | bytes | int) and not isinstance(value, bool) else None

    def name(self, node: ast.Name) -> object:
        return self.of(self.bound.get(node.id))

    def joined(self, node: ast.JoinedStr) -> object:
        parts = []
        for value in node.values:
            part = self.of(value.value if isinstance(value, ast.FormattedValue) else value)
            if isinstance(value, ast.FormattedValue) and part is not None:
                spec = self.of(value.format_spec) if value.format_spec is not None else ""
                part = format(part, spec if isinstance(spec, str) else "")
            if not isinstance(part, str | int):
                return None
            parts.append(str(part))
        return "".join(parts)

    def binop(self, node: ast.BinOp) -> object:
        left, right = self.of(node.left), self.of(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            return left % right
        if isinstance(node.op, ast.Add) and type(left) is type(right) and not isinstance(left, tuple | int):
            return left + right  # type: ignore[operator]
        if isinstance(node.op, ast.Add) and isinstance(left, tuple) and isinstance(right, tuple):
            return left + right
        if isinstance(node.op, ast.Mult) and isinstance(left, str | bytes) and isinstance(right, int):
            return left * right
        return None

    def sequence(self, node: ast.Tuple | ast.List) -> object:
        values = [self.of(e) for e in node.elts]
        return None if any(v is None for v in values) else tuple(values)

    def subscript(self, node: ast.Subscript) -> object:
        value = self.of(node.value)
        if not isinstance(value, str | bytes | tuple):
            return None
        if isinstance(node.slice, ast.Slice):
            bounds = [
                self.of(p) if p is not None else None for p in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            lower, upper, step = (b if isinstance(b, int) else None for b in bounds)
            if any(b is not None and not isinstance(b, int) for b in bounds):
                return None
            return value[slice(lower, upper, step)]
        index = self.of(node.slice)
        return value[index] if isinstance(index, int) else None

    def unary(self, node: ast.UnaryOp) -> object:
        value = self.of(node.operand)
        return -value if isinstance(node.op, ast.USub) and isinstance(value, int) else None

    def call(self, node: ast.Call) -> object:
        name, whole = called(node), dotted(node.func)
        if name == "map" and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == "chr":
            codes = self.of(node.args[1])
            return tuple(chr(c) for c in codes if isinstance(c, int)) if isinstance(codes, tuple) else None
        args = [self.of(a) for a in node.args]
        if any(a is None for a in args) or (node.keywords and name != "format"):
            return None
        owner = self.of(node.func.value) if isinstance(node.func, ast.Attribute) else None
        if isinstance(owner, str | bytes):
            return self._method(owner, name, args, node)
        return self._function(name, whole, args)

    def _method(self, owner: str | bytes, name: str, args: list[object], node: ast.Call) -> object:
        if name == "join" and len(args) == 1 and isinstance(args[0], tuple):
            return owner.join(args[0])
        if name == "format" and isinstance(owner, str):
            keywords = {k.arg: self.of(k.value) for k in node.keywords if k.arg}
            return None if any(v is None for v in keywords.values()) else owner.format(*args, **keywords)
        if name in _STR_METHODS and all(isinstance(a, type(owner)) for a in args):
            return getattr(owner, name)(*args)
        if name == "decode" and isinstance(owner, bytes) and all(isinstance(a, str) for a in args):
            return owner.decode(*args)  # type: ignore[arg-type]
        if name == "encode" and isinstance(owner, str) and all(isinstance(a, str) for a in args):
            return owner.encode(*args)  # type: ignore[arg-type]
        return None

    def _function(self, name: str, whole: str, args: list[object]) -> object:
        one = args[0] if len(args) == 1 else None
        if name == "chr" and isinstance(one, int):
            return chr(one)
        if name == "str" and isinstance(one, str):
            return one
        if name == "bytes" and isinstance(one, tuple) and all(isinstance(b, int) for b in one):
            return bytes(one)
        if name == "fromhex" and isinstance(one, str):
            return bytes.fromhex(one)
        if whole.endswith(_BASE64) and isinstance(one, str | bytes):
            decoded: bytes = getattr(base64, whole.rsplit(".", 1)[-1])(one)
            return decoded
        if whole.endswith(("unhexlify", "a2b_hex")) and isinstance(one, str | bytes):
            return binascii.unhexlify(one)
        if whole in ("codecs.decode", "codecs.encode") and len(args) == 2 and isinstance(args[1], str):
            text, codec = args[0], args[1]
            if isinstance(text, str | bytes):
                return codecs.decode(text, codec) if whole.endswith("decode") else codecs.encode(text, codec)  # type: ignore[arg-type]
        if name == "reversed" and isinstance(one, str | tuple):
            return tuple(reversed(one))
        if name in ("list", "tuple") and isinstance(one, tuple | str):
            return tuple(one)
        return None

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp) -> object:
        """`[chr(c) for c in (95, 112)]`: one generator over constants, an element of its name."""
        if len(node.generators) != 1 or node.generators[0].ifs or not isinstance(node.generators[0].target, ast.Name):
            return None
        items = self.of(node.generators[0].iter)
        if not isinstance(items, tuple | str):
            return None
        name = node.generators[0].target.id
        out = []
        for item in items:
            value = value_of(node.elt, {**self.bound, name: ast.Constant(item)}, self.depth)
            if value is None:
                return None
            out.append(value)
        return tuple(out)


_FOLDERS: dict[type, Callable[[_Fold, ast.AST], object]] = {
    ast.Constant: _Fold.constant,  # type: ignore[dict-item]
    ast.Name: _Fold.name,  # type: ignore[dict-item]
    ast.JoinedStr: _Fold.joined,  # type: ignore[dict-item]
    ast.BinOp: _Fold.binop,  # type: ignore[dict-item]
    ast.Tuple: _Fold.sequence,  # type: ignore[dict-item]
    ast.List: _Fold.sequence,  # type: ignore[dict-item]
    ast.Subscript: _Fold.subscript,  # type: ignore[dict-item]
    ast.UnaryOp: _Fold.unary,  # type: ignore[dict-item]
    ast.Call: _Fold.call,  # type: ignore[dict-item]
    ast.ListComp: _Fold.comprehension,  # type: ignore[dict-item]
    ast.GeneratorExp: _Fold.comprehension,  # type: ignore[dict-item]
}
