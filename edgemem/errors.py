"""edgemem's user-facing errors: one paragraph (what, where, what to do) and a distinct exit code.

The CLI prints the message and exits with `exit_code`; a traceback is shown only with --debug. Under --json it
also prints {"schema": .., "error": {"exit_code", "kind", "message"}} on stdout, with the `kind` of its exit code
(KINDS, README "JSON output") for scripts.
"""


class EdgememError(Exception):
    """Base class: a problem the user can act on."""

    exit_code = 2


class ModelFileError(EdgememError):
    """The .tflite file is missing, unreadable, truncated or not a TFLite flatbuffer."""

    exit_code = 3


class UnsupportedModelError(EdgememError):
    """The model uses an operator, type or structure edgemem does not implement."""

    exit_code = 4


class DoesNotFitError(EdgememError):
    """The model needs more RAM or flash than the board has."""

    exit_code = 5


class ToolchainError(EdgememError):
    """A compiler, emulator or flasher is missing or failed."""

    exit_code = 6


class DeviceError(EdgememError):
    """The device (or QEMU) faulted, timed out or reported something unexpected."""

    exit_code = 7


# The exit codes as words, for scripts reading an error under --json (one per code, so a subclass with its own
# code, such as validate.MismatchError, has its own kind); 128 + N is a signal (the CLI's "interrupted").
KINDS = {1: "internal", 2: "usage", 3: "model_file", 4: "unsupported", 5: "does_not_fit", 6: "toolchain", 7: "device",
         8: "outputs_differ"}  # fmt: skip


_SPELLED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(name: str) -> str:
    """A name the model supplies (tensor, operator, subgraph), as a message shows it: control characters and line
    or paragraph separators spelled as escapes (``\\n``, ``\\x1B``, ``\\u2028``), so that a message naming it stays
    one paragraph. The name itself is kept elsewhere (report.html, model.h escape it for their own language)."""
    import unicodedata

    def spell(ch: str) -> str:
        if ch in _SPELLED:
            return _SPELLED[ch]
        if unicodedata.category(ch) not in ("Cc", "Zl", "Zp"):
            return ch
        return f"\\x{ord(ch):02X}" if ord(ch) < 0x100 else f"\\u{ord(ch):04X}"

    return "".join(map(spell, name))


def tail(text: str | bytes | None, limit: int = 4000) -> str:
    """The end of a tool's or device's output, for an error message: the last ``limit`` characters, with the
    device's long ``EDGEMEM output`` hex lines abbreviated (their bytes say nothing to a reader)."""
    import re

    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = []
    for line in (text or "").strip().splitlines():
        m = re.match(r"^(EDGEMEM output \d+ )([0-9a-f]+)$", line.strip())
        if m and len(m.group(2)) > 96:
            line = f"{m.group(1)}{m.group(2)[:64]}... ({len(m.group(2)) // 2} bytes)"
        lines.append(line)
    text = "\n".join(lines)
    return text if len(text) <= limit else "...\n" + text[-limit:]
