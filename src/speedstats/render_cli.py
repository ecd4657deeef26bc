"""Placeholder: commands registered here are added by their own change."""


def register(subparsers):
    pass
