"""The twin's constants, task states, lock and argument checks.

Mirrors ``_wheel.pyx``'s module head and ``_wheel_checks.pxi``: a delay in
ms validated and turned into ns, times and sizes checked with the
argument's name.  Every other unit of the twin imports from here.
"""

from __future__ import annotations

import math
import numbers
import operator
import threading
from typing import SupportsIndex, cast

DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20
PRECASCADE_CHUNK = 256
#: Largest accepted ``|delay_ms|``: about 146 years, so nanosecond deadlines
#: fit in a signed 64-bit integer on any monotonic clock reading.
MAX_DELAY_MS = 2**62 // 1_000_000
_MAX_TIME_MS = 2**62 // 1_000_000
# Latest deadline: its nanoseconds must fit an int64 (clock + MAX_DELAY_MS does).
_MAX_EXPIRATION_MS = (2**63 - 1) // 1_000_000
_NS_PER_MS = 1_000_000
# TimerTask._early_ns is a 32-bit field in the compiled core.
_MAX_EARLY_NS = 0xFFFFFFFF

# Task states.  A task is *counted* (``len(timer)``) while PENDING or EXPIRED.
_IDLE = 0  # never added, or re-armed state reset
_PENDING = 1  # linked in a bucket
_EXPIRED = 2  # due; handed to the runner, not started yet
_RUNNING = 3
_DONE = 4
_CANCELLED = 5
_STATE_NAMES = ("idle", "pending", "expired", "running", "done", "cancelled")

# The twin's one re-entrant lock (see the package docstring); a forked child
# gets a new one (_renew_lock in the package).
_LOCK = threading.RLock()


def _check_time(value: object, name: str) -> int:
    """Return ``value`` as an int in the wheel's time range, or raise."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {value!r}")
    result = operator.index(cast(SupportsIndex, value))
    if not -_MAX_TIME_MS <= result <= _MAX_TIME_MS:
        raise OverflowError(f"{name}={value!r} is out of range")
    return result


def _check_positive(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {value!r}")
    result = operator.index(cast(SupportsIndex, value))
    if result < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if result > 2**62:
        raise OverflowError(f"{name}={value!r} is out of range")
    return result


def _check_reach(tick_ms: int, wheel_size: int) -> None:
    # Every deadline in the clock range must fit some level: an overflow wheel
    # whose interval would pass 2**62 ms cannot be built, and finding that out
    # half-way through an add would lose the task being moved.
    span = tick_ms * wheel_size
    while span <= 8 * _MAX_TIME_MS:
        if span * wheel_size > 2**62:
            raise ValueError(
                f"tick_ms={tick_ms} with wheel_size={wheel_size} cannot reach "
                f"MAX_DELAY_MS (overflow wheels would pass 2**62 ms); "
                "use a smaller wheel_size or tick_ms"
            )
        span *= wheel_size


def _past_clock_end(delay_ms: object, now_ms: int) -> None:
    raise OverflowError(
        f"delay_ms={delay_ms!r} from now_ms={now_ms} puts the deadline past "
        f"the end of the clock range ({_MAX_EXPIRATION_MS} ms)"
    )


def _delay_to_ns(delay_ms: object) -> int:
    """Validate a delay in milliseconds and return it in nanoseconds (rounded up)."""
    if type(delay_ms) is int:
        if -MAX_DELAY_MS <= delay_ms <= MAX_DELAY_MS:
            return delay_ms * _NS_PER_MS
        raise OverflowError(
            f"delay_ms={delay_ms!r} is out of range [-{MAX_DELAY_MS}, {MAX_DELAY_MS}]"
        )
    if isinstance(delay_ms, bool):
        raise TypeError(f"delay_ms must be a number of milliseconds, got {delay_ms!r}")
    if hasattr(type(delay_ms), "__index__"):
        return _delay_to_ns(operator.index(cast(SupportsIndex, delay_ms)))
    if not isinstance(delay_ms, numbers.Real):
        raise TypeError(f"delay_ms must be a number of milliseconds, got {delay_ms!r}")
    value = float(delay_ms)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"delay_ms must be finite, got {delay_ms!r}")
    if not -MAX_DELAY_MS <= value <= MAX_DELAY_MS:
        raise OverflowError(
            f"delay_ms={delay_ms!r} is out of range [-{MAX_DELAY_MS}, {MAX_DELAY_MS}]"
        )
    return math.ceil(value * _NS_PER_MS)


def _normalize_delay(delay_ms: object) -> int | float:
    _delay_to_ns(delay_ms)
    if type(delay_ms) is int or type(delay_ms) is float:
        return delay_ms
    if hasattr(type(delay_ms), "__index__"):
        return operator.index(cast(SupportsIndex, delay_ms))
    return float(delay_ms)  # type: ignore[arg-type]
