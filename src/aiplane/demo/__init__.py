"""The live demo on the embedded cluster (``aiplane demo``)."""
