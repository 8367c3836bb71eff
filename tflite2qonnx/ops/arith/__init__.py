"""Element-wise, reduction and less common math converters (ABS ... ZEROS_LIKE arithmetic)."""
