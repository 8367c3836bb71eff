"""QKeras's quantizers and layers, Keras 2 (QKeras 0.9) and Keras 3 (qkeras-v3): each quantizer's
QuantSpec (``quantizers``, ``quantizers3``, the composites of ``exact_activations`` and
``exact_po2``) proved against QKeras at conversion (``quantizer_proof``), and the layer families'
strip rules (``stripped``, ``batchnorm``, ``pooling``, ``pruning``, ``scale_shift``,
``grouped_transpose``). The registry that names every rule, recurrent ones included, is
``qkeras2qonnx.layers``."""
