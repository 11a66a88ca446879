"""The purgatory's size per second of event time, from request lifetimes.

Computed with numpy from each request's arrival and completion (no
sampling): pending requests at each second's end and at most within it,
arrivals, completions and expirations.  ``check`` mode compares the result
with the purgatory's own count sampled during the replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._engine_sim import _PartitionReplay, _Setting


def purgatory_sizes(
    arrival_ms: np.ndarray, done_ms: np.ndarray, expired: np.ndarray
) -> dict[str, np.ndarray]:
    """Per second of event time: pending requests at its end and at most, and counts.

    A request is pending from its arrival until ``done_ms`` (a request that
    completes at once is never pending).  Within one millisecond, requests
    leave before new ones arrive (the replay's event order).  A row is made for
    every second with an arrival or a completion, and for every second in
    which requests were pending.

    >>> s = purgatory_sizes(np.array([0, 500, 1500]), np.array([2500, 500, 1600]),
    ...                     np.array([True, False, False]))
    >>> {k: v.tolist() for k, v in s.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'window_start_ms': [0, 1000, 2000], 'pending_end': [1, 1, 0],
     'pending_max': [1, 2, 1], 'arrivals': [2, 1, 0], 'completed': [1, 1, 0],
     'expired': [0, 0, 1]}
    """
    arrival_ms = np.asarray(arrival_ms, dtype=np.int64)
    done_ms = np.asarray(done_ms, dtype=np.int64)
    expired = np.asarray(expired, dtype=bool)
    wait = done_ms > arrival_ms
    a_sorted = np.sort(arrival_ms[wait])
    d_sorted = np.sort(done_ms[wait])
    sec_a = np.floor_divide(arrival_ms, 1000)
    sec_d = np.floor_divide(done_ms, 1000)
    active = np.unique(np.concatenate([sec_a, sec_d]))
    if not len(active):
        return {k: np.zeros(0, dtype=np.int64) for k in _SIZE_COLUMNS}
    secs, pending_end = _pending_at_second_ends(active, a_sorted, d_sorted)
    pending_max = _pending_max(secs, pending_end, a_sorted, d_sorted)
    n_secs = len(secs)
    arrivals = np.bincount(np.searchsorted(secs, sec_a), minlength=n_secs)
    completed = np.bincount(np.searchsorted(secs, sec_d[~expired]), minlength=n_secs)
    expired_n = np.bincount(np.searchsorted(secs, sec_d[expired]), minlength=n_secs)
    return {
        "window_start_ms": secs * 1000,
        "pending_end": pending_end.astype(np.int64),
        "pending_max": pending_max.astype(np.int64),
        "arrivals": arrivals.astype(np.int64),
        "completed": completed.astype(np.int64),
        "expired": expired_n.astype(np.int64),
    }


_SIZE_COLUMNS = ("window_start_ms", "pending_end", "pending_max", "arrivals",
                 "completed", "expired")  # fmt: skip


def _pending_at_second_ends(
    active: np.ndarray, a_sorted: np.ndarray, d_sorted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The seconds to report and the requests pending at the end of each.

    ``active``: the seconds with an arrival or a completion; the seconds in
    between with requests pending are added (constant: no arrivals or
    completions in them).  ``a_sorted``/``d_sorted``: the sorted arrival and
    done times of the requests that waited.
    """
    end = active * 1000 + 999  # after the second's last millisecond
    pend_end = np.searchsorted(a_sorted, end, "right") - np.searchsorted(
        d_sorted, end, "right"
    )
    gaps = np.diff(active) - 1
    carry = (pend_end[:-1] > 0) & (gaps > 0)
    fill_counts = np.where(carry, gaps, 0)
    fill_start = np.repeat(active[:-1] + 1, fill_counts)
    fill_offset = np.arange(fill_counts.sum()) - np.repeat(
        np.cumsum(fill_counts) - fill_counts, fill_counts
    )
    fill_secs = fill_start + fill_offset
    fill_pend = np.repeat(pend_end[:-1], fill_counts)
    secs = np.concatenate([active, fill_secs])
    pending_end = np.concatenate([pend_end, fill_pend])
    order = np.argsort(secs, kind="stable")
    return secs[order], pending_end[order]


def _pending_max(
    secs: np.ndarray,
    pending_end: np.ndarray,
    a_sorted: np.ndarray,
    d_sorted: np.ndarray,
) -> np.ndarray:
    """The most requests pending within each second of ``secs``.

    It is the level at the second's start, or right after an arrival in it.
    """
    start_level = np.concatenate([[0], pending_end[:-1]])
    start_level[1:][np.diff(secs) > 1] = 0
    pending_max = start_level.copy()
    times = np.concatenate([a_sorted, d_sorted])
    deltas = np.concatenate(
        [np.ones(len(a_sorted), np.int64), -np.ones(len(d_sorted), np.int64)]
    )
    o = np.lexsort((deltas, times))
    level = np.cumsum(deltas[o])
    up = deltas[o] > 0
    up_secs = np.floor_divide(times[o][up], 1000)
    np.maximum.at(pending_max, np.searchsorted(secs, up_secs), level[up])
    result: np.ndarray = np.maximum(pending_max, pending_end)
    return result


def _check_sizes(
    replay: _PartitionReplay, s: _Setting, arrival: np.ndarray, done_ms: np.ndarray
) -> None:
    """Check mode: lifetimes agree with ``purgatory.delayed`` sampled in the replay."""
    index = replay.settings.index(s)
    wait = done_ms > arrival
    a_sorted = np.sort(arrival[wait])
    d_sorted = np.sort(done_ms[wait])
    for t, delayed in replay.samples:
        expect = int(
            np.searchsorted(a_sorted, t, "right")
            - np.searchsorted(d_sorted, t, "right")
        )
        if expect != delayed[index]:
            raise AssertionError(
                f"{replay.name!r} at {t}: purgatory.delayed={delayed[index]}, "
                f"lifetimes say {expect}"
            )
