"""edgemem: neural networks on microcontrollers in the least RAM."""

__version__ = "0.1.0"
