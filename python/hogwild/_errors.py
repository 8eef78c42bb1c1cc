"""The module's exceptions: one class per exit class of the command line
(docs/ERRORS.md), so a script can tell bad input from a full disk from a dead
worker without reading messages."""


class Error(Exception):
    """Any failure of a run (hogwild_train's exit status 1)."""
    exit_code = 1


class InputError(Error, ValueError):
    """Bad input: a malformed data set, an invalid option (exit status 2). Also a
    ValueError, as Python's conventions (and scikit-learn's checks) expect."""
    exit_code = 2


class DataError(InputError):
    """A data set is malformed. The message names the file and line, or for arrays
    the argument and the row (0-based): "X: row 12: ..."."""
    file = None
    line = 0


class ConfigError(InputError):
    """An option, or a combination of options, is invalid."""


class IoError(InputError):
    """A file could not be opened, read or written."""


class ResourceError(Error):
    """Shared memory, memory or disk is too small for what was asked (exit status 4)."""
    exit_code = 4


class WorkerError(Error):
    """A worker process died or failed past --max-restarts (exit status 3)."""
    exit_code = 3


class Interrupted(KeyboardInterrupt):
    """The run was stopped by SIGINT (Ctrl-C; exit_code 130) or SIGTERM (143). A
    KeyboardInterrupt, not an Error, so that `except Exception` does not swallow a
    Ctrl-C. `result` holds the run as it stood at the stop (its weights, metrics and
    summary; the final checkpoint and model file were written, where asked)."""
    exit_code = 130
    signal = 2
    result = None


class ConversionWarning(UserWarning):
    """An input array was copied or converted before training (a dtype the trainer
    does not read in place, unsorted CSR columns, a non-contiguous array)."""
