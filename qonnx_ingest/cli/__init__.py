"""The command-line plumbing both tools share: options and file naming (``options``), one
model's run (``command``), many models' runs in processes of their own (``batch*``), the
--timeout (``deadline``), status lines (``progress``) and --version (``versions``).
Standard library only at import time, so ``--help`` never pulls in TensorFlow."""
