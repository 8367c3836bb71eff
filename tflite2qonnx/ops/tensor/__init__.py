"""Ops that move data without arithmetic: shape, slicing, concatenation, scatter, top-k."""
