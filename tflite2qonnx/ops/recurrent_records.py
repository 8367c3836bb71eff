"""The recurrent builtins' records (LSTM, RNN, SVDF): their operand ranks and, per input
type, their integer and hybrid kernels, which run by default; ``tflite2qonnx.ops`` joins
them to the other builtins."""

from __future__ import annotations

from tflite2qonnx.ops.record import BY_DEFAULT, Kernel, Op

# one LSTM direction's operand ranks: input and recurrent weights (2-D), peepholes and gate
# biases (1-D), projection weights and bias; the states and layer norms follow per kernel
_LSTM_DIRECTION = (2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 2, 1)

RECURRENT_OPERATORS: dict[str, Op] = {
    "BIDIRECTIONAL_SEQUENCE_LSTM": Op(
        "recurrent.sequence:bidirectional_sequence_lstm",
        ranks=((3, *_LSTM_DIRECTION * 2, 2, 2, 2, 2, 3), (3, 3)),
        hybrid=Kernel(
            "recurrent.sequence:hybrid_bidirectional_lstm",
            BY_DEFAULT,
            when="recurrent.sequence:hybrid_bidirectional",
        ),
    ),
    "SVDF": Op(
        "recurrent.svdf:svdf",
        ranks=((2, 2, 2, 1, 2), (2,)),
        int8=Kernel("recurrent.svdf:integer_svdf", BY_DEFAULT),
        hybrid=Kernel("recurrent.svdf:hybrid_svdf", BY_DEFAULT, when="recurrent.svdf:is_hybrid"),
    ),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": Op(
        "recurrent.sequence:unidirectional_sequence_lstm",
        ranks=((3, *_LSTM_DIRECTION, 2, 2, 1, 1, 1, 1), (3,)),
        int8=Kernel("recurrent.sequence:integer_unidirectional_lstm", BY_DEFAULT),
        hybrid=Kernel(
            "recurrent.sequence:hybrid_unidirectional_lstm",
            BY_DEFAULT,
            when="recurrent.sequence:hybrid_unidirectional",
        ),
    ),
    "UNIDIRECTIONAL_SEQUENCE_RNN": Op(
        "recurrent.sequence:unidirectional_sequence_rnn",
        ranks=((3, 2, 2, 1, 2), (3,)),
        hybrid=Kernel(
            "recurrent.rnn_hybrid:hybrid_sequence_rnn",
            BY_DEFAULT,
            when="recurrent.rnn_hybrid:is_hybrid",
        ),
    ),
}
