"""Escaping of untrusted text (tensor names, model file names, board-file strings) for each generated language.

A model, a board file or a file name may hold any character; none of them may end a comment, a string or a
line of the file it is written into. Each function here returns text that is inert in one context, whatever
its input (tests/test_escaping.py feeds every byte value to the real gcc, make, sh and cmake):

    c_comment       inside /* ... */ (also linker scripts)     c_string       a C string literal, quotes included
    line_comment    after # in a Makefile or CMakeLists.txt     make_word      one shell word in a Makefile variable
    cmake_quoted    inside "..." of a CMake quoted argument     md_text/md_code  Markdown text / a code span
    cmake_unix_command  words for separate_arguments(UNIX_COMMAND)
    c_identifier    an identifier edgemem made (checked, never escaped)   json_in_html  JSON inside <script>
    json_value      a JSON value (a string with its quotes)  yaml_string   a YAML double-quoted scalar
    plain_text      words inert in any line-based format (Kconfig prompts and help, Arduino's library.properties)

Comments are for people: a character that could end one (newline, '*/', a trailing backslash, '??' trigraphs
under -std=c11) or that is not printable ASCII is spelled \\xNN, byte by byte of its UTF-8. Strings carry the
exact bytes (C octal escapes, CMake escapes, shell quoting). HTML is jinja2's autoescape (report.html).
"""

from __future__ import annotations

import re
import shlex

_PRINTABLE = range(0x20, 0x7F)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def utf8(text: str) -> bytes:
    """The bytes a name stands for: UTF-8, and a file name's undecodable bytes (surrogateescape) as they were."""
    try:
        return str(text).encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no byte decoded to
        return str(text).encode("utf-8", "surrogatepass")


def _hex(b: int) -> str:
    return f"\\x{b:02X}"


def line_comment(text: str) -> str:
    """Text for a comment that ends at the end of its line (# in make and CMake): printable ASCII, one line,
    no backslash (a trailing one would continue a make comment onto the next line), no leading '['."""
    out = "".join(chr(b) if b in _PRINTABLE and b != 0x5C else _hex(b) for b in utf8(text))
    return _hex(0x5B) + out[1:] if out.startswith("[") else out  # '#[[' would open a CMake bracket comment


def c_comment(text: str) -> str:
    """Text for a /* ... */ comment of C or of a GNU ld script: as line_comment, and no '*/' or '/*' (a '/' next
    to a '*' is spelled \\x2F), no '??' (a trigraph under -std=c11), no '*' or '/' at either end."""
    out: list[str] = []
    for ch in line_comment(text):
        prev = out[-1] if out else ""
        if ch == "/" and prev.endswith("*"):
            ch = _hex(0x2F)
        elif ch == "*" and prev == "/":
            out[-1] = _hex(0x2F)
        elif ch == "?" and prev == "?":
            ch = _hex(0x3F)
        out.append(ch)
    if out and out[0] in ("*", "/"):
        out[0] = _hex(ord(out[0]))
    if out and out[-1] in ("*", "/"):
        out[-1] = _hex(ord(out[-1]))
    return "".join(out)


def c_string(text: str) -> str:
    """A C string literal (with its quotes) whose bytes are exactly the UTF-8 of ``text``. Octal escapes: at most
    three digits, so the next character never joins them as a hex escape's would; '?' escaped (trigraphs)."""
    parts = []
    for b in utf8(text):
        ch = chr(b)
        if b in _PRINTABLE and ch not in '"\\?':
            parts.append(ch)
        else:
            parts.append(f"\\{b:03o}")
    return '"' + "".join(parts) + '"'


def make_word(text: str) -> str:
    """One shell word on the right of a Makefile variable assignment (``VAR = a b``), as the recipe's shell
    receives it: shell-quoted, then '$' doubled and '#' escaped for make. A control character cannot travel on
    a make line (a newline ends it), so each is spelled \\xNN in the word (the value then differs, and says so)."""
    word = "".join(ch if ch == "\t" or not (ord(ch) < 0x20 or ord(ch) == 0x7F) else _hex(ord(ch)) for ch in str(text))
    # make reads '\#' as '#' and halves the backslashes before it: a run of n before '#' is written 2n, then '\#'
    return re.sub(r"(\\*)#", lambda m: m.group(1) * 2 + "\\#", shlex.quote(word).replace("$", "$$"))


def make_words(items) -> str:
    return " ".join(make_word(str(x)) for x in items)


_CMAKE_QUOTED = {"\\": "\\\\", '"': '\\"', "$": "\\$", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def cmake_quoted(text: str) -> str:
    """The inside of a CMake quoted argument ("...") whose value is exactly ``text``: backslash, quote and '$'
    escaped (no variable reference), newline/CR/tab as \\n \\r \\t (';' is kept as it is: a quoted argument is
    one argument). Other control characters (CMake has no escape for them) are spelled \\\\xNN."""
    out = []
    for ch in str(text):
        if ch in _CMAKE_QUOTED:
            out.append(_CMAKE_QUOTED[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\\\x" + f"{ord(ch):02X}")
        else:
            out.append(ch)
    return "".join(out)


_UNIX_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+", re.ASCII)


def cmake_unix_command(words) -> str:
    """Words joined so that CMake's separate_arguments(UNIX_COMMAND) splits them back into exactly these words:
    each character outside a plain set behind a backslash (CMake's UNIX_COMMAND honours a backslash inside
    quotes too, so POSIX shell quoting would not do). ';', '[', ']' and '\\' survive it, not CMake's lists."""
    return " ".join(w if _UNIX_SAFE.fullmatch(w) else "".join(c if _UNIX_SAFE.fullmatch(c) else "\\" + c for c in w) or "''"
                    for w in map(str, words))  # fmt: skip


_MD_SPECIAL = set("\\`*[]!|~>")  # what can open emphasis, code, links, tables or quotes mid-line


def md_text(text: str) -> str:
    """Markdown text after a line's start (a heading's words): one line, '<' and '&' as HTML entities (no raw
    HTML), the characters that could open markup mid-line backslash-escaped; '_' too unless it sits between two
    letters or digits (CommonMark never opens emphasis there, and file names are full of them)."""
    body = line_comment(text)
    out = []
    for i, ch in enumerate(body):
        inner = 0 < i < len(body) - 1 and body[i - 1].isalnum() and body[i + 1].isalnum()
        if ch == "<":
            out.append("&lt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch in _MD_SPECIAL or (ch == "_" and not inner):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def md_code(text: str) -> str:
    """A Markdown code span showing ``text`` (one line): delimited by one backtick more than its longest run."""
    body = line_comment(text)
    runs = re.findall(r"`+", body)
    fence = "`" * (max((len(r) for r in runs), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def c_identifier(name: str) -> str:
    """``name`` if it is a plain C identifier; anything else is refused (identifiers are edgemem's, made from
    indices or from names checked where they enter; this is the last check before a template writes one)."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{name!r} is not a C identifier; edgemem writes only identifiers it made into C")
    return name


def json_in_html(text: str) -> str:
    """JSON text for a <script> element: '<', '>' and '&' as \\u escapes, so no '</script>' can end it."""
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def json_value(value) -> str:
    """``value`` as JSON text, ASCII only (every other character as a \\u escape)."""
    import json

    return json.dumps(value, ensure_ascii=True)


def yaml_string(text: str) -> str:
    """A YAML double-quoted scalar whose value is exactly ``text`` (as a str): printable ASCII as it is but for '"'
    and '\\', everything else as \\xNN, \\uNNNN or \\UNNNNNNNN (YAML's escapes, so no line break, '#' or ': '
    can end it)."""
    out = []
    for ch in str(text):
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\x{code:02X}" if code < 0x100 else f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}")
    return '"' + "".join(out) + '"'


_PLAIN = re.compile(r"[A-Za-z0-9 ._,:;+=@/()!?'*-]", re.ASCII)


def plain_text(text: str) -> str:
    """Text inert in any line-based format (a Kconfig string or help line, Arduino's library.properties, whose
    values take no escapes): letters, digits, spaces and a few punctuation marks as they are, every other byte of
    the UTF-8 as %XX (so no quote, backslash, '$', '#' or line break survives), and no space at either end."""
    body = "".join(ch if _PLAIN.fullmatch(ch) else f"%{ord(ch):02X}" for ch in utf8(text).decode("latin-1"))
    lead = len(body) - len(body.lstrip(" "))
    body = "%20" * lead + body[lead:]
    trail = len(body) - len(body.rstrip(" "))
    return body[: len(body) - trail] + "%20" * trail


FILTERS = {
    "c_comment": c_comment, "c_string": c_string, "line_comment": line_comment, "make_word": make_word,
    "make_words": make_words, "cmake_quoted": cmake_quoted, "md_text": md_text, "md_code": md_code,
    "c_identifier": c_identifier, "json_value": json_value, "yaml_string": yaml_string, "plain_text": plain_text,
}  # fmt: skip
