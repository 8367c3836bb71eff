"""qkeras2qonnx's private accesses to its dependencies, one module per library (``tf2onnx``,
``keras`` for Keras and TensorFlow, ``qkeras``, ``hgq2``), each a small named function guarded
by the pinned-series check of ``qonnx_ingest.compat`` (which says why)."""

from qonnx_ingest.compat import IncompatibleDependency, Pin, found_version, require

__all__ = ["IncompatibleDependency", "Pin", "found_version", "require"]
