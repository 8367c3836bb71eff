"""``python -m qkeras2qonnx``: the same as the ``qkeras2qonnx`` command."""

from qkeras2qonnx.cli import main

raise SystemExit(main())
