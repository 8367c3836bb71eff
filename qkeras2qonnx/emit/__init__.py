"""What goes into the ONNX graph: the node a quantizer becomes (``spec``, ``composite``), the
layer map that records it (``layer_map``), the markers that find its tensor again (``markers``),
tf2onnx's conversion in one canonical form (``tf2onnx_step``, ``canonical``), the reinsertion of
the quantizers (``reinsert``) and the passes on tf2onnx's graph that every conversion runs
(``explicit_pads``, ``output_shapes``, the rank-3 1-D convolutions ``conv1d``, ``conv1d_bias``)."""
