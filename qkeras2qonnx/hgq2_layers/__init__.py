"""HGQ2's quantizers and layers: the fixed-point and minifloat quantizers and their exact forms
(``hgq2_quantizer``, ``hgq2_float``), the layer registry (``hgq2_registry``) with its families
(``hgq2_ops``, ``hgq2_tables``, ``hgq2_attention``, ``hgq2_recurrent``), the float32 sum bound
(``hgq2_sums``) and the strip step of one HGQ2 layer (``hgq2_strip``). Named ``hgq2_layers``, not
``hgq2``: HGQ2 itself installs ``hgq``, and a room's name should not read as the library's."""
