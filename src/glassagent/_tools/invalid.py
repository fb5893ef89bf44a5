"""`InvalidArguments`: a call's arguments do not fit its tool (raised by the validators)."""


class InvalidArguments(Exception):
    """The model's arguments do not fit the tool's signature (the message is for the model)."""
