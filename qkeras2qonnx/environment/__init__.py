"""The Keras environment: which QKeras a model needs and whether this process can run it
(``flavour``, ``isolated`` and its worker), lazy TensorFlow/Keras/QKeras access (``backend``),
loading a saved model (``load``, ``keras3_compat``) and turning subclassed or revived models into
Functional ones (``subclassed``, ``revived``, ``raw_ops``)."""
