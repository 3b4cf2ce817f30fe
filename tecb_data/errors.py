"""Errors a user can cause. The CLI prints them as one line and exits 2; anything else is a bug."""


class UserError(Exception):
    """A problem with the user's input, configuration or environment, with what to do about it."""

    exit_code = 2


class VerificationError(UserError):
    """A published folder does not match its manifest."""

    exit_code = 1
