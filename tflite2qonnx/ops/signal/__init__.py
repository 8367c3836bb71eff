"""Signal ops: complex64 tensors (RFFT2D, COMPLEX_ABS, REAL, IMAG) and the audio custom ops."""
