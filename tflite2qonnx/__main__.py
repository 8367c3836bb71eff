import sys

from tflite2qonnx.cli import main

sys.exit(main())
