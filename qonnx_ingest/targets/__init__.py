"""Output forms for the compilers that read QONNX (``--format finn``, ``--format hls4ml``)."""
