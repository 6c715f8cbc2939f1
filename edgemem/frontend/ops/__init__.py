"""edgemem's own lowerings of TFLite operators (registry.py), one module per family of operators."""
