"""``tflite2qonnx.convert_and_verify``: the converted model and the --verify figures."""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING, Any

import onnx

from qonnx_ingest.verification import DEFAULT_INPUTS

if TYPE_CHECKING:
    from qonnx_ingest.verification import Verification


def convert_and_verify(
    source: str | os.PathLike | bytes,
    output_path: str | os.PathLike | None = None,
    *,
    inputs: int = DEFAULT_INPUTS,
    seed: int = 0,
    inputs_path: str | os.PathLike | None = None,
    **options: Any,
) -> tuple[onnx.ModelProto, Verification]:
    """``convert(source, **options)``, then the TFLite interpreter and the result on ``inputs``
    seeded random samples (or the .npz at ``inputs_path``): the model and the figures
    ``--verify`` prints (``Verification``: ``passed``, ``outputs``, ``as_text()``,
    ``as_dict()``).

    Raises ``VerificationError`` (carrying the figures as ``.verification``; nothing saved)
    on a disagreement, ``ReferenceUnavailable`` when the interpreter cannot run ``source``.
    ``output_path`` is written only after the verification passed.
    """
    from qonnx_ingest.errors import InputError
    from qonnx_ingest.output import OutputOptions, finish_output
    from tflite2qonnx.api import convert
    from tflite2qonnx.bundle import model_source
    from tflite2qonnx.reference import verify

    if "verify" in options:
        raise InputError("convert_and_verify always verifies: drop verify=")
    given = () if isinstance(source, bytes | bytearray | memoryview) else (str(source),)
    out = OutputOptions(verify=True, output_path=output_path, inputs=given)
    model = convert(source, **options)  # in the asked form; what remains is verify and save
    reference = model_source(source, options.get("member"))[0]  # a bundle's member: its bytes
    figures = {"inputs": inputs, "seed": seed, "inputs_path": inputs_path}
    return finish_output(model, out, reference=partial(verify, reference, **figures))
