"""Make TVMScript macros cheap to expand, and prim_funcs cheaper to parse.

TVM 0.27's `ScriptMacro._find_parser_def` finds the active parser with `inspect.getouterframes`, which
builds a FrameInfo (source line, module lookup over every loaded module) for every frame on the stack at
every macro call: 70-85 % of the build time of a model with the fast int8 kernels (vww: 16 s of 28 s).
Walking `frame.f_back` finds the same parser -- the first frame whose globals hold it -- without the
source lookups.

Every kernel builder defines its prim_func as a closure over the kernel's shapes, so TVMScript parses the
same source text once per kernel: `Source` reads the function's lines and its whole module's source, and
`Source.as_ast` turns the text into TVMScript's doc AST (twice per parse: once more for the
well-formedness check), about 40 % of a parse. Both depend on the code only, not on the closure's values:
they are kept per code object and per source text. The parser reads the doc AST and never changes it.
"""

from __future__ import annotations

import ast
import sys

from tvm.script.parser.core import doc, evaluator
from tvm.script.parser.core import utils as parser_utils
from tvm.script.parser.core.diagnostics import Source
from tvm.script.parser.core.parser import ScriptMacro


def _find_parser_def(self):
    frame = sys._getframe(1)
    while frame is not None:
        parser = frame.f_globals.get(ScriptMacro.parser_object_name)
        if parser is not None:
            return parser
        frame = frame.f_back
    raise RuntimeError(f"{ScriptMacro.parser_object_name} not available")


ScriptMacro._find_parser_def = _find_parser_def


_sources: dict = {}  # code object -> the Source fields read from it
_trees: dict = {}  # source text -> its doc AST
_read_source = Source.__init__
_to_doc = Source.as_ast


def _source_init(self, program):
    code = getattr(program, "__code__", None)
    if code is None:  # a string or a class: as TVM does
        _read_source(self, program)
        return
    fields = _sources.get(code)
    if fields is None:
        _read_source(self, program)
        fields = _sources[code] = dict(vars(self))
    vars(self).update(fields)


def _as_ast(self):
    tree = _trees.get(self.source)
    if tree is None:
        tree = _trees[self.source] = _to_doc(self)
    return tree


Source.__init__ = _source_init
Source.as_ast = _as_ast


# `T.prim_func` reads the source of the decorated function and parses it again (inspect.getsource + ast.parse)
# for the names its annotations use: a function of the source, kept per code object like the above.
_annotation_names = {}  # code object -> the names
_collect_annotation_names = parser_utils._collect_annotation_names


def _annotation_names_of(source_obj):
    code = getattr(source_obj, "__code__", None)
    if code is None:
        return _collect_annotation_names(source_obj)
    names = _annotation_names.get(code)
    if names is None:
        names = _annotation_names[code] = frozenset(_collect_annotation_names(source_obj))
    return set(names)


parser_utils._collect_annotation_names = _annotation_names_of


# TVMScript's expression evaluator turns every (sub)expression into a Python AST, compiles it and evals it. Most
# of its calls are a bare name or a constant (the operands of every operator it meets): their value is what eval
# gives -- the name looked up in the value table, the literal itself -- without the conversion and compile. The
# others (``T.int32``, ``T.max(a, b)``, ``A[i, j]`` over names the evaluator made) recur with the same shape in
# every kernel: their code object is kept by that shape and evaluated against the new values. Anything else
# goes the original way.
_eval_slow = evaluator._eval_expr
_MISSING = object()
_codes: dict = {}  # expression shape -> its compiled code


class _NoKey(Exception):
    """An expression outside the shapes kept (compiled each time, as TVM does)."""


def _shape(node):
    """A hashable description of an expression that fixes its compiled code: names, attributes, literals (with
    their type: 1, 1.0 and True compile differently) and structure; source positions are left out."""
    kind = type(node)
    if kind is doc.Name and type(node.ctx) is doc.Load:
        return ("n", node.id)
    if kind is doc.Constant:
        return ("c", type(node.value), repr(node.value))
    if kind is doc.Attribute and type(node.ctx) is doc.Load:
        return ("a", _shape(node.value), node.attr)
    if kind is doc.Call:
        return ("f", _shape(node.func), tuple(_shape(a) for a in node.args),
                tuple((k.arg, _shape(k.value)) for k in node.keywords))  # fmt: skip
    if kind is doc.Subscript and type(node.ctx) is doc.Load:
        return ("s", _shape(node.value), _shape(node.slice))
    if kind is doc.Tuple and type(node.ctx) is doc.Load:
        return ("t", tuple(_shape(e) for e in node.elts))
    raise _NoKey


def _eval_expr(node, dict_globals):
    kind = type(node)
    if type(dict_globals) is not dict:
        return _eval_slow(node, dict_globals)
    if kind is doc.Name and type(node.ctx) is doc.Load:
        value = dict_globals.get(node.id, _MISSING)
        if value is not _MISSING:
            return value
        return _eval_slow(node, dict_globals)
    if kind is doc.Constant:
        return node.value
    try:
        key = _shape(node)
    except _NoKey:
        return _eval_slow(node, dict_globals)
    code = _codes.get(key)
    if code is None:
        if len(_codes) > 100_000:  # a long process (tests, the fuzzer): bounded memory
            _codes.clear()
        tree = ast.fix_missing_locations(ast.Expression(body=doc.from_doc(node)))
        code = _codes[key] = compile(tree, filename="<ast>", mode="eval")
    return eval(code, dict_globals)  # what TVM's evaluator does with the same code


evaluator._eval_expr = _eval_expr
