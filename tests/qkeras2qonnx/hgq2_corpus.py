"""Run under Keras 3 with hgq2 (``qkeras3_support.run_qkeras3``), never imported by pytest.

``python hgq2_corpus.py OUT FILE...`` loads each HGQ2 corpus file with Keras 3, writes
``STEM.npz`` (seeded inputs ``x1_J`` / ``x8_J`` as ``hgq2_models.inputs`` makes them, HGQ2's
``predict`` at batch 1 and 8 as ``y1_K`` / ``y8_K`` per output K) and converts the file by its
path (``qkeras2qonnx.convert(path)``, as a user would) into ``STEM.onnx``, or writes the
ConversionError to ``STEM.error.txt``. The first file is converted again at the end, after
the others (``STEM.again.onnx``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
from hgq2_builder_io import convert_again, save_and_convert
from hgq2_models import inputs


def main(out: Path, files: list[Path]) -> None:
    keras.utils.set_random_seed(0)
    for path in files:
        model = keras.models.load_model(path, compile=False)
        record = {}
        for batch, seed in ((1, 11), (8, 12)):
            xs = inputs(model, batch, seed)
            ys = model.predict(xs, verbose=0)
            ys = ys if isinstance(ys, list | tuple) else [ys]
            record.update({f"x{batch}_{j}": x for j, x in enumerate(xs)})
            record.update({f"y{batch}_{k}": np.asarray(y) for k, y in enumerate(ys)})
        save_and_convert(out, path.stem, path, record, f"{path.stem}.onnx")
    if len(files) > 1:
        convert_again(out, files[0].stem, files[0])


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
