"""Interpreters: run IR directly on torch tensors, as the references the compiled code is
checked against (the loops dialect's nodes, the scheduled dialect's kernels)."""
