"""The questions users ask, one module per question, each answering with Measurements."""
