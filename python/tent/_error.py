"""tent.Error, raised by every failed call of the native API."""


class Error(Exception):
    """A tent call failed.

    ``code`` is the name of the C++ ``tent::StatusCode`` without its ``k``
    ("InvalidArgument", "NotFound", "Timeout", ...); ``message`` is the engine's text.
    """

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self):  # picklable, e.g. across multiprocessing
        return (type(self), (self.code, self.message))
