"""Translations out of mind's IR into what runs it (MLIR's lib/Target): triton IR -> a Python
module of Triton kernels and the host code that launches them."""
