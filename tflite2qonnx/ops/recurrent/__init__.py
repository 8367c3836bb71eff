"""Recurrent ops: LSTM (float, hybrid, integer), RNN, SVDF and their sequence wrappers."""
