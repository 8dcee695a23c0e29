"""WHERE samples come from; the only I/O."""
