"""The one exception family both converters raise, so the CLIs can map it to a one-line message."""

from __future__ import annotations


class ConversionError(Exception):
    """A model (or part of it) cannot be converted exactly.

    ``where`` names the file, layer, op or tensor at fault; it leads the message so a user
    can find the culprit without a traceback.
    """

    exit_code = 1

    def __init__(self, message: str, where: str | None = None):
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class InputError(ConversionError):
    """The input itself is unusable (missing, unreadable, wrong format) or the usage is wrong."""

    exit_code = 2


class ReferenceUnavailable(InputError):
    """--verify cannot run the source model it compares against (the TFLite interpreter refuses
    the file, or is not installed): the conversion itself stands.

    The CLIs write the model and say "verification skipped" (exit 5); ``convert(verify=True)``
    raises it, since the caller asked for figures it cannot have.
    """


class VerificationError(ConversionError):
    """The converted model does not agree with its source within the converter's tolerance.

    Lives here (not in ``verification``) so every package exports it without importing numpy.
    """

    exit_code = 3

    def __init__(self, verification):
        """``verification``: a ``qonnx_ingest.verification.Verification`` (not imported here:
        that module imports this one)."""
        self.verification = verification
        failed = ", ".join(a.name for a in verification.outputs if not a.passed)
        super().__init__(f"verification failed on output {failed}", "--verify")


class TimedOut(BaseException):
    """The conversion did not finish within the time the user allowed (--timeout).

    A BaseException, like KeyboardInterrupt: it can strike anywhere, and a handler that turns
    an ``Exception`` into a message about the input must not mistake it for one.
    """

    exit_code = 4

    def __init__(self, message: str, where: str):
        super().__init__(f"{where}: {message}")


class ConversionWarning(UserWarning):
    """Something converted, but not exactly as the source said (e.g. an annotation was lost).

    The CLIs print each one as a ``warning:`` line; Python callers see ordinary warnings.
    """


class NoQuantizerWarning(ConversionWarning):
    """The source model has no quantizer at all: the ONNX model is plain float. Usually a
    wrong file (a float Keras model); ``--strict`` refuses it."""
