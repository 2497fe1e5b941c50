"""errors.py — the exceptions of the fastload binding, one class per kind of libfastload error.

    fastload.Error                  every libfastload error: .code (negative errno or FL_E_*), .message
      CorruptRecordError            a record or index failed its check: checksum, format, truncated
                                    file, undecodable image, label out of range (FL_E_CHECKSUM,
                                    FL_E_FORMAT, FL_E_TRUNCATED, FL_E_DECODE, FL_E_TOO_LARGE,
                                    FL_E_VERSION, FL_E_LABEL)
      DataIOError (OSError)         the system refused an I/O call: .errno is the positive errno
                                    (ENOENT for a missing dataset, EIO for a failed read)
      InvalidOptionError (ValueError)  an option or argument the library rejects (FL_E_INVALID,
                                    FL_E_RANGE), also raised by the binding's own checks
      LoaderClosedError (ValueError)   a call on a closed (or failed) loader
      UnsupportedError              valid input or option this build or machine cannot handle
                                    (FL_E_UNSUPPORTED, FL_E_CUDA)
      LoaderForkedError (RuntimeError)  a Loader used in a process forked from the one that
                                    made it (create the Loader in each worker)
The codes are those of common/fl_error.h (FL_E_DUPLICATE: Error; FL_E_CANCELLED: Error).
"""
import errno as _errno
import os

FL_E_FORMAT = -40001
FL_E_VERSION = -40002
FL_E_TRUNCATED = -40003
FL_E_CHECKSUM = -40004
FL_E_RANGE = -40005
FL_E_DECODE = -40006
FL_E_TOO_LARGE = -40007
FL_E_UNSUPPORTED = -40008
FL_E_INVALID = -40009
FL_E_LMDB = -40010
FL_E_CUDA = -40011
FL_E_LABEL = -40012
FL_E_DUPLICATE = -40013
FL_E_CANCELLED = -40014
FL_E_BASE = -40000
# common/fl_error.h's values: tests/python/test_headers.py checks every one against the header


class Error(Exception):
    """A libfastload error. `code` is the library's code (negative errno or FL_E_*), `message`
    its one-line message naming the shard, record and reason."""

    def __init__(self, code=0, message=""):
        # Error(message) works too: torch's DataLoader re-raises a worker's exception as
        # exc_type(text), so the main process gets this class (not a RuntimeError) and the text
        if isinstance(code, str) and not message:
            code, message = 0, code
        Exception.__init__(self, message)
        self.code = code
        self.message = message

    def __str__(self):
        return self.message


class CorruptRecordError(Error):
    """A record, index or shard failed its check (checksum, format, truncated, decode)."""


class DataIOError(Error, OSError):
    """An I/O error from the system; `errno` is the positive errno (isinstance OSError)."""

    def __init__(self, code=0, message=""):
        if isinstance(code, str) and not message:
            # DataIOError(text): torch's DataLoader re-raising a worker's error (as Error does);
            # the errno is not in the text, so .errno is None
            code, message = 0, code
            OSError.__init__(self, message)
        else:
            OSError.__init__(self, -code, message)
        self.code = code
        self.message = message

    def __str__(self):
        return self.message


class InvalidOptionError(Error, ValueError):
    """An option, argument or state the library (or the binding) rejects."""


class LoaderClosedError(Error, ValueError):
    """A call on a loader that is closed, or failed earlier (create a new one)."""


class UnsupportedError(Error):
    """Valid input or options this build or machine cannot handle (no io_uring, no CUDA...)."""


class LoaderForkedError(Error, RuntimeError):
    """A Loader used in a child process (os.fork, a DataLoader worker) of the process that made
    it: its library threads are not there. Create the Loader in each worker."""


_CORRUPT = {FL_E_FORMAT, FL_E_VERSION, FL_E_TRUNCATED, FL_E_CHECKSUM, FL_E_DECODE, FL_E_TOO_LARGE,
            FL_E_LABEL}


def error_class(code: int) -> type:
    """The exception class for a library code."""
    if code in _CORRUPT:
        return CorruptRecordError
    if code in (FL_E_INVALID, FL_E_RANGE, -_errno.EINVAL):
        return InvalidOptionError
    if code in (FL_E_UNSUPPORTED, FL_E_CUDA):
        return UnsupportedError
    if FL_E_BASE < code < 0:
        return DataIOError
    return Error


def make_error(code: int, message: str) -> "Error":
    """An instance of the right class for `code` (message: the library's text)."""
    if not message:
        message = os.strerror(-code) if FL_E_BASE < code < 0 else f"fastload error {code}"
    return error_class(code)(code, message)
