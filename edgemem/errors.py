"""edgemem's user-facing errors: one paragraph (what, where, what to do) and a distinct exit code.

The CLI prints the message and exits with `exit_code`; a traceback is shown only with --debug.
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
