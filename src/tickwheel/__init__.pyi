"""Type stub written by tests/typing/make_stubs.py: do not edit.

Signatures from _kafka_py.py, _purgatory_py.py, _wheel_py/core.py,
_wheel_py/levels.py, _wheel_py/loop.py, _wheel_py/queue.py, _wheel_py/task.py
(change them there, then run the script).  The classes are defined here,
in a public module, so that type checkers name them after it:
``tickwheel.TimerTask``.
"""

import contextvars
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar, final, type_check_only

from ._impl import DEFAULT_TICK_MS as DEFAULT_TICK_MS
from ._impl import DEFAULT_WHEEL_SIZE as DEFAULT_WHEEL_SIZE
from ._impl import MAX_DELAY_MS as MAX_DELAY_MS
from ._impl import USE_EXTENSIONS as USE_EXTENSIONS
from ._version import __version__ as __version__
from .compat_sched import scheduler as scheduler
from .compat_threading import Timer as Timer
from .purgatory import DelayedOperationPurgatory as DelayedOperationPurgatory
from .timer import MockTimer as MockTimer
from .timer import SystemTimer as SystemTimer

__all__ = [
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "MAX_DELAY_MS",
    "USE_EXTENSIONS",
    "CountdownOperation",
    "DelayQueue",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "MockTimer",
    "SystemTimer",
    "TaskCounter",
    "Timer",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "__version__",
    "scheduler",
]

@type_check_only
class _LoopHandle(TimerTask):
    __slots__ = ("_when_s",)
    _when_s: float
    def when(self) -> float: ...

@type_check_only
def _use_loop_handles(
    plain: type,
    with_context: type,
    call_later: Callable[..., Any],
    call_at: Callable[..., Any],
    share: Callable[..., Any],
) -> None: ...

@final
class DelayQueue:
    __slots__ = ("_heap", "_seq")
    def __init__(self) -> None: ...
    def __len__(self) -> int: ...
    def offer(self, bucket: TimerTaskList) -> bool: ...
    def peek(self) -> TimerTaskList | None: ...
    @property
    def next_expiration_ms(self) -> int | None: ...
    def poll(self, now_ms: int) -> TimerTaskList | None: ...
    def _check(self) -> None: ...

@final
class TaskCounter:
    __slots__ = ("value", "_owner")
    def __init__(self) -> None: ...
    def __repr__(self) -> str: ...
    value: int

class TimerTaskEntry:
    __slots__ = ("_expiration_ms", "_prev", "_next", "_list")
    def __init__(self, expiration_ms: int = ...) -> None: ...
    @property
    def expiration_ms(self) -> int: ...
    @expiration_ms.setter
    def expiration_ms(self, value: int) -> None: ...
    @property
    def list(self) -> TimerTaskList | None: ...
    @property
    def task(self) -> TimerTask | None: ...
    def __repr__(self) -> str: ...

class TimerTask(TimerTaskEntry):
    __slots__ = ("_fn", "_args", "_delay_ms", "_state", "_spent", "_early_ns")
    def __init__(
        self,
        delay_ms: int | float,
        fn: Callable[..., Any] | None = ...,
        /,
        *args: Any,
        **kwargs: Any,
    ) -> None: ...
    @property
    def delay_ms(self) -> int | float: ...
    @delay_ms.setter
    def delay_ms(self, value: int | float) -> None: ...
    @property
    def deadline_ns(self) -> int: ...
    @deadline_ns.setter
    def deadline_ns(self, value: int) -> None: ...
    @property
    def fn(self) -> Callable[..., Any] | None: ...
    @property
    def args(self) -> tuple[Any, ...]: ...
    @property
    def cancelled(self) -> bool: ...
    @property
    def pending(self) -> bool: ...
    @property
    def done(self) -> bool: ...
    @property
    def state(self) -> str: ...
    def run(self) -> None: ...
    def cancel(self) -> bool: ...
    def postpone(self, delay_ms: int | float) -> bool: ...
    def __repr__(self) -> str: ...

@final
class TimerTaskList:
    __slots__ = ("_root", "_counter", "_expiration_ms", "_size")
    def __init__(self, counter: TaskCounter | None = ...) -> None: ...
    @property
    def counter(self) -> TaskCounter: ...
    @property
    def expiration_ms(self) -> int | None: ...
    def set_expiration(self, expiration_ms: int | None) -> bool: ...
    def __len__(self) -> int: ...
    def add(self, entry: TimerTaskEntry) -> None: ...
    def remove(self, entry: TimerTaskEntry) -> bool: ...
    def flush(self, fn: Callable[[TimerTaskEntry], Any]) -> int: ...
    def entries(self) -> list[TimerTaskEntry]: ...
    def _check(self) -> None: ...
    def __repr__(self) -> str: ...

_T = TypeVar("_T", bound="TimerTask")

@type_check_only
class _TimerCore:
    def __init__(
        self,
        tick_ms: int = ...,
        wheel_size: int = ...,
        start_ms: int | None = ...,
        clock: Callable[[], int] | None = ...,
        manual: bool = ...,
    ) -> None: ...
    @property
    def now_ns(self) -> int: ...
    @now_ns.setter
    def now_ns(self, value: int) -> None: ...
    @property
    def now_ms(self) -> int: ...
    @property
    def tick_ms(self) -> int: ...
    @property
    def wheel(self) -> TimingWheel: ...
    @property
    def closed(self) -> bool: ...
    def _use_lanes(self, n: int) -> None: ...
    @property
    def _lane_count(self) -> int: ...
    def _lane_of(self, task: TimerTask) -> int | None: ...
    def __len__(self) -> int: ...
    @property
    def next_expiration_ms(self) -> int | None: ...
    def add(self, task: TimerTask) -> None: ...
    def schedule(
        self,
        delay_ms: int | float,
        fn: Callable[..., Any],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> TimerTask: ...
    def schedule_as(
        self,
        task_type: type[_T],
        delay_ms: int | float,
        fn: Callable[..., Any],
        /,
        *args: Any,
    ) -> _T: ...
    def _loop_call_later(
        self,
        delay: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = ...,
    ) -> Any: ...
    def _loop_call_at(
        self,
        when: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = ...,
    ) -> Any: ...
    def _on_wake(self) -> None: ...
    def _take_ready(self) -> list[TimerTask]: ...
    def _take_due(self, now_ms: int, step: bool = ...) -> list[TimerTask]: ...
    @property
    def next_precascade_ms(self) -> int | None: ...
    def precascade(self, max_entries: int = ...) -> int: ...
    def cancel_all(self) -> int: ...
    def _close_core(self) -> None: ...
    def _run(
        self,
        tasks: Iterable[TimerTask],
        on_error: Callable[[TimerTask, BaseException], Any],
        set_clock: bool = ...,
    ) -> int: ...
    def _check(self) -> None: ...
    _ready: list[TimerTask]
    _pc_bucket: TimerTaskList | None

@final
class TimingWheel:
    __slots__ = (
        "_tick_ms",
        "_wheel_size",
        "_interval_ms",
        "_buckets",
        "_current_time_ms",
        "_overflow",
        "_counter",
        "_queue",
    )
    def __init__(
        self,
        tick_ms: int = ...,
        wheel_size: int = ...,
        start_ms: int = ...,
        counter: TaskCounter | None = ...,
        queue: DelayQueue | None = ...,
    ) -> None: ...
    @property
    def tick_ms(self) -> Any: ...
    @property
    def wheel_size(self) -> Any: ...
    @property
    def interval_ms(self) -> Any: ...
    @property
    def current_time_ms(self) -> Any: ...
    @property
    def overflow_wheel(self) -> Any: ...
    @property
    def counter(self) -> Any: ...
    @property
    def queue(self) -> Any: ...
    def bucket(self, index: int) -> TimerTaskList: ...
    def add(self, entry: TimerTaskEntry) -> bool: ...
    def advance_clock(self, time_ms: int) -> None: ...
    def levels(self) -> int: ...
    def _check(self) -> None: ...
    def __repr__(self) -> str: ...

class DelayedOperation(TimerTask):
    __slots__ = (
        "_op_lock",
        "_op_holder",
        "_op_done",
        "_op_withdrawn",
        "_op_expired",
        "_op_submitted",
        "_op_retry",
        "_op_trylock",
    )
    _op_lock: Any
    _op_holder: int
    _op_done: bool
    _op_withdrawn: bool
    _op_expired: bool
    _op_submitted: bool
    _op_retry: bool
    _op_trylock: bool
    def __init__(self, delay_ms: int | float, lock: Any = ...) -> None: ...
    def try_complete(self) -> bool: ...
    def on_complete(self) -> None: ...
    def on_expiration(self) -> None: ...
    def force_complete(self) -> bool: ...
    def _complete_locked(self) -> bool: ...
    def run(self) -> None: ...
    def _withdraw(self) -> bool: ...
    def _withdraw_locked(self) -> bool: ...
    @property
    def completed(self) -> bool: ...
    @property
    def expired(self) -> bool: ...
    @property
    def withdrawn(self) -> bool: ...
    @property
    def lock(self) -> Any: ...
    def __repr__(self) -> str: ...

_Op = TypeVar("_Op", bound=DelayedOperation)

@type_check_only
def _new_operation(cls: type[_Op], delay_ms: int | float) -> _Op: ...

class CountdownOperation(DelayedOperation):
    __slots__ = ("_count", "_callback", "_count_lock")
    def __init__(
        self,
        delay_ms: int | float,
        callback: Callable[[CountdownOperation], Any] | None = ...,
        count: int = ...,
        lock: Any = ...,
    ) -> None: ...
    @property
    def count(self) -> int: ...
    def count_down(self, n: int = ...) -> int: ...
    def try_complete(self) -> bool: ...
    def on_complete(self) -> None: ...
    def __repr__(self) -> str: ...

@final
@type_check_only
class _Shard:
    __slots__ = ("lock", "watchers")
    def __init__(self) -> None: ...
    lock: threading.Lock
    watchers: dict[Hashable, list[DelayedOperation]]

@type_check_only
def _hash_key(key: object, what: str) -> int: ...

@type_check_only
class _PurgatoryCore:
    _name: str
    _timer: Any
    _purge_interval: int
    _shards: list[_Shard]
    _mask: int
    _estimated: int
    _shut: bool
    _op_types: set[type]
    _c_timer: bool
    def _check_op_type(self, operation: object) -> None: ...
    @staticmethod
    def _keys_tuple(keys: Iterable[Hashable]) -> tuple[Hashable, ...]: ...
    def _purge_if_due(self) -> None: ...
    def try_complete_else_watch(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> bool: ...
    def _submit_keys(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> tuple[Hashable, ...] | list[Hashable]: ...
    def _watch(
        self, operation: DelayedOperation, keys: tuple[Hashable, ...] | list[Hashable]
    ) -> None: ...
    def check_and_complete(self, key: Hashable) -> int: ...
    def _try_watched(
        self, op: DelayedOperation, ident: int, errors: list[BaseException]
    ) -> bool | None: ...
    def _note_error(
        self, errors: list[BaseException], op: DelayedOperation, exc: BaseException
    ) -> None: ...
    @staticmethod
    def _retry(op: DelayedOperation, ident: int) -> bool: ...
    def _log_error(self, op: DelayedOperation, exc: BaseException) -> None: ...
    def _purge_lists(self) -> int: ...

@type_check_only
class _PartitionCore:
    __slots__ = ("_acked_to",)
    _acked_to: int | float

@type_check_only
class _ProduceCore(DelayedOperation):
    __slots__ = (
        "partition",
        "required_offset",
        "timeout_ms",
        "arrival_ms",
        "done_ms",
        "outcome",
        "error",
        "request_id",
        "_clock",
        "_callback",
    )
    partition: Any
    required_offset: int
    timeout_ms: int
    arrival_ms: int
    done_ms: int | None
    outcome: str | None
    error: str | None
    request_id: Any
    _clock: Callable[[], int]
    _callback: Callable[[Any], Any] | None
    def try_complete(self) -> bool: ...
    def on_complete(self) -> None: ...

@type_check_only
def _new_produce(
    cls: type[_ProduceCore],
    partition: Any,
    required_offset: int,
    timeout_ms: int,
    arrival_ms: int,
    request_id: Any,
    clock: Callable[[], int],
    callback: Callable[[Any], Any] | None,
) -> _ProduceCore: ...
