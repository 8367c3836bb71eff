"""Detection post-processing, non-max suppression and MediaPipe's custom ops."""
