"""The tflite bindings' internals, behind the version check of ``qonnx_ingest.compat``."""
