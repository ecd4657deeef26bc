"""speedstats: benchmark OneFlow against PyTorch and post the Speed stats comment."""

__version__ = "0.2.0"
