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

import sys

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
