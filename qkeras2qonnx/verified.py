"""``qkeras2qonnx.convert_and_verify``: the converted model and the --verify figures."""

from __future__ import annotations

import os
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
    from qonnx_ingest.save import check_output_path, save_model

    if "verify" in options:
        raise InputError("convert_and_verify always verifies: drop verify=")
    given = [str(p) for p in (model_or_path, weights) if isinstance(p, str | os.PathLike)]
    if output_path is not None:
        check_output_path(output_path, given)  # fail before the expensive part
    figures = {"inputs": inputs, "seed": seed, "inputs_path": inputs_path}
    needed = flavour.needed(model_or_path)
    if not flavour.can_run(needed):
        from qkeras2qonnx.environment.isolated import verify_elsewhere

        options.update(weights=weights, allow_lambda=allow_lambda)
        model, checked = verify_elsewhere(model_or_path, needed, figures, **options)
    else:
        keras_model = load_model(model_or_path, weights=weights, allow_lambda=allow_lambda)
        model = convert(keras_model, **options)
        checked = verify(keras_model, model, **figures)
        checked.require_pass()
    if output_path is not None:
        save_model(model, output_path, inputs=given)
    return model, checked
