"""Errors a user can fix: the CLI prints them on one line and exits 2."""


class UserError(Exception):
    """Bad input: a file, a field or a flag. The message names what is wrong."""

    exit_code = 2
