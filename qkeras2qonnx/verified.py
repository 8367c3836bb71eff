"""``qkeras2qonnx.convert_and_verify``: the converted model and the --verify figures."""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING, Any

import onnx

from qonnx_ingest.verification import DEFAULT_INPUTS

if TYPE_CHECKING:
    from qonnx_ingest.verification import Verification


def convert_and_verify(
    model_or_path: Any,
    output_path: str | os.PathLike | None = None,
    *,
    inputs: int = DEFAULT_INPUTS,
    seed: int = 0,
    inputs_path: str | os.PathLike | None = None,
    weights: str | os.PathLike | None = None,
    allow_lambda: bool = False,
    **options: Any,
) -> tuple[onnx.ModelProto, Verification]:
    """``convert(model_or_path, **options)``, then QKeras ``predict`` and the result on
    ``inputs`` seeded random samples (or the .npz at ``inputs_path``): the model and the
    figures ``--verify`` prints (``Verification``: ``passed``, ``outputs``, ``as_text()``,
    ``as_dict()``).

    Raises ``VerificationError`` (carrying the figures as ``.verification``; nothing saved)
    on a disagreement, ``ReferenceUnavailable`` when Keras cannot run the model on the seeded
    inputs (an ``InputError`` on ``inputs_path``'s). ``output_path`` is written only after the
    verification passed. A
    model of the other QKeras generation is converted and verified in a subprocess, as
    ``convert`` does.
    """
    from qkeras2qonnx.environment import flavour
    from qkeras2qonnx.environment.load import load_model
    from qkeras2qonnx.pipeline import convert
    from qkeras2qonnx.reference import verify
    from qonnx_ingest.errors import InputError
    from qonnx_ingest.output import OutputOptions, finish_output, save_output

    if "verify" in options:
        raise InputError("convert_and_verify always verifies: drop verify=")
    given = tuple(str(p) for p in (model_or_path, weights) if isinstance(p, str | os.PathLike))
    out = OutputOptions(verify=True, output_path=output_path, inputs=given)
    out.check_output()  # fail before the expensive part
    figures = {"inputs": inputs, "seed": seed, "inputs_path": inputs_path}
    needed = flavour.needed(model_or_path)
    if not flavour.can_run(needed):  # verified in the subprocess; what remains is the save
        from qkeras2qonnx.environment.isolated import verify_elsewhere

        options.update(weights=weights, allow_lambda=allow_lambda)
        model, checked = verify_elsewhere(model_or_path, needed, figures, **options)
        return save_output(model, out), checked
    keras_model = load_model(model_or_path, weights=weights, allow_lambda=allow_lambda)
    model = convert(keras_model, **options)  # in the asked form; what remains is verify and save
    return finish_output(model, out, reference=partial(verify, keras_model, **figures))
