"""QKeras's recurrent layers (QSimpleRNN, QLSTM, QGRU, in a Bidirectional or alone): stripped to
a placeholder (``recurrent``, ``bidirectional``), then each placeholder of tf2onnx's graph
replaced by its cell unrolled in ONNX ops (``recurrent_cells``). HGQ2's recurrent layers are
unrolled in the stripped model instead (``hgq2_layers.hgq2_recurrent``)."""
