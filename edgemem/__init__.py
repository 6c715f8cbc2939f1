"""edgemem: neural networks on microcontrollers in the least RAM.

The Python API (edgemem/api.py): ``build``, ``analyze``, ``run``, ``validate`` and ``profile``, as the CLI's
commands, returning typed results with the fields of their ``--json`` objects. Importing edgemem is cheap: TVM
is imported when a function needs it.
"""

from .api import Build, DataValidationResult, ProfileResult, RunResult, ValidationResult, analyze, build, profile, run, validate
from .errors import DeviceError, DoesNotFitError, EdgememError, ModelFileError, ToolchainError, UnsupportedModelError
__version__ = "0.1.0"  # written into generated C (codegen); `edgemem --version` reads the installed metadata

__all__ = ["build", "analyze", "run", "validate", "profile", "Build", "RunResult", "ValidationResult", "DataValidationResult", "ProfileResult",
           "EdgememError", "ModelFileError", "UnsupportedModelError", "DoesNotFitError", "ToolchainError", "DeviceError",
           "__version__"]
