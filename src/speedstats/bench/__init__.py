"""The benchmark layer: runs OneFlow and PyTorch in subprocesses of their own."""
