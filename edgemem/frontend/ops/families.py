"""Every family of lowerings; importing a module registers its operators (registry.lowering)."""

from . import activations, binary, conv16, gelu, layout, matmul, quantize, recurrent, reductions, signal, unary  # noqa: F401
