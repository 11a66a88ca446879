"""TimerTaskList (bucket): link, unlink, flush, shared counter; _check() after ops."""

from __future__ import annotations

import pytest


def test_bucket_counter_shared_across_buckets(impl):
    # Kafka's TimerTaskListTest: three buckets sharing one counter.
    counter = impl.TaskCounter()
    b1, b2, b3 = (impl.TimerTaskList(counter) for _ in range(3))
    tasks = [impl.TimerTask(10) for _ in range(10)]
    for i, task in enumerate(tasks, start=1):
        b1.add(task)
        b1._check()
        assert counter.value == i
    for task in tasks[:4]:
        b2.add(task)  # moving an entry keeps the count
        b1._check(), b2._check()
        assert counter.value == 10
    for task in tasks[4:]:
        b3.add(task)
        b1._check(), b3._check()
        assert counter.value == 10
    assert (len(b1), len(b2), len(b3)) == (0, 4, 6)
    assert b2.entries() == tasks[:4] and b3.entries() == tasks[4:]
    for bucket, expect in ((b2, 6), (b3, 0)):
        for task in bucket.entries():
            assert bucket.remove(task)
            bucket._check()
        assert len(bucket) == 0
        assert counter.value == expect


def test_bucket_remove_only_own_entries(impl):
    b1, b2 = impl.TimerTaskList(), impl.TimerTaskList()
    entry = impl.TimerTaskEntry(5)
    b1.add(entry)
    assert entry.list is b1
    assert not b2.remove(entry)
    assert b1.remove(entry)
    assert not b1.remove(entry)  # idempotent
    assert entry.list is None
    b1._check(), b2._check()


def test_bucket_unlink_middle_head_tail(impl):
    bucket = impl.TimerTaskList()
    entries = [impl.TimerTaskEntry(i) for i in range(5)]
    for e in entries:
        bucket.add(e)
    for victim in (entries[2], entries[0], entries[4]):
        bucket.remove(victim)
        bucket._check()
    assert bucket.entries() == [entries[1], entries[3]]


def test_bucket_flush_detaches_then_calls(impl):
    counter = impl.TaskCounter()
    bucket = impl.TimerTaskList(counter)
    entries = [impl.TimerTaskEntry(i) for i in range(4)]
    for e in entries:
        bucket.add(e)
    assert bucket.set_expiration(100) is True
    assert bucket.set_expiration(100) is False  # unchanged: no re-queue
    seen = []

    def readd(entry):
        seen.append(entry)
        assert entry.list is None
        bucket.add(entry)  # flush detached first, so this cannot loop forever
        bucket._check()

    assert bucket.flush(readd) == 4
    assert seen == entries
    assert bucket.expiration_ms is None
    assert len(bucket) == 4 and counter.value == 4


def test_bucket_expiration_none_and_change(impl):
    bucket = impl.TimerTaskList()
    assert bucket.expiration_ms is None
    assert bucket.set_expiration(5)
    assert bucket.expiration_ms == 5
    assert bucket.set_expiration(6)
    assert bucket.set_expiration(None)
    assert not bucket.set_expiration(None)


def test_bucket_add_rejects_non_entry(impl):
    with pytest.raises(TypeError, match="entry must be a TimerTaskEntry"):
        impl.TimerTaskList().add("nope")


def test_entry_expiration_locked_while_linked(impl):
    bucket = impl.TimerTaskList()
    entry = impl.TimerTaskEntry(5)
    entry.expiration_ms = 7
    bucket.add(entry)
    with pytest.raises(RuntimeError, match="linked"):
        entry.expiration_ms = 8
    assert entry.expiration_ms == 7
    assert entry.task is None
    task = impl.TimerTask(1)
    assert task.task is task


def test_delay_queue_orders_buckets(impl):
    queue = impl.DelayQueue()
    buckets = []
    for exp in (30, 10, 20, 10):
        b = impl.TimerTaskList()
        b.set_expiration(exp)
        buckets.append(b)
    assert queue.offer(buckets[0]) is True
    assert queue.offer(buckets[1]) is True
    assert queue.offer(buckets[2]) is False
    assert queue.offer(buckets[3]) is False  # ties keep insertion order
    queue._check()
    assert queue.next_expiration_ms == 10
    assert queue.poll(9) is None
    assert queue.poll(10) is buckets[1]
    assert queue.poll(10) is buckets[3]
    assert queue.poll(100) is buckets[2]
    assert queue.peek() is buckets[0]
    assert len(queue) == 1
    with pytest.raises(ValueError, match="no expiration"):
        queue.offer(impl.TimerTaskList())


def test_bucket_cancel_unlinks_a_task_added_by_hand(impl):
    """Kafka's TimerTaskListTest.testAll: a task linked straight into a bucket
    (never through a timer) leaves it when cancelled, and the shared counter
    drops.  It used to return False and stay linked."""
    counter = impl.TaskCounter()
    b1, b2 = impl.TimerTaskList(counter), impl.TimerTaskList(counter)
    tasks = [impl.TimerTask(0, print) for _ in range(3)]
    for task in tasks:
        b1.add(task)
    b2.add(tasks[2])
    assert counter.value == 3
    assert tasks[0].cancel() is True
    b1._check()
    assert (len(b1), len(b2), counter.value) == (1, 1, 2)
    assert tasks[0].cancelled and tasks[0].list is None and tasks[0].fn is None
    assert tasks[0].cancel() is False  # once
    assert tasks[2].cancel() is True
    b2._check()
    assert (len(b1), len(b2), counter.value) == (1, 0, 1)
    assert b1.entries() == [tasks[1]]
    # A task never linked anywhere still has nothing to cancel.
    assert impl.TimerTask(0, print).cancel() is False


def test_cancel_in_a_bucket_only_its_tasks_hold(impl):
    """The last reference to a bucket linked by hand may be its tasks' own:
    cancelling them frees it, and nothing touches it afterwards (the
    compiled cancel passes the bucket on borrowed).  Both a task linked by
    hand and one moved there by hand from a timer's wheel."""
    import gc
    import sys

    counter = impl.TaskCounter()
    bucket = impl.TimerTaskList(counter)
    idle = impl.TimerTask(0, print)
    bucket.add(idle)
    timer = impl.TimerCore(manual=True)
    moved = timer.schedule(50, print)
    bucket.add(moved)  # out of the wheel's bucket, into this one
    with_bucket = sys.getrefcount(counter)  # ours, the bucket's, the call's
    del bucket
    gc.collect()
    assert sys.getrefcount(counter) == with_bucket  # the tasks keep the bucket
    assert idle.cancel() is True and idle.list is None
    assert moved.cancel() is True and moved.list is None
    assert moved.cancelled and moved.fn is None and counter.value == 0
    gc.collect()
    assert sys.getrefcount(counter) == with_bucket - 1  # the bucket is gone


@pytest.mark.c_extension
def test_a_compiled_bucket_is_one_object():
    """The compiled bucket is its own ring's sentinel: making one allocates
    the bucket and nothing else (no root entry beside it), and its empty
    ring and a ring emptied again both read as empty."""
    import sys
    import tracemalloc

    from tickwheel import _wheel

    counter = _wheel.TaskCounter()
    size = sys.getsizeof(_wheel.TimerTaskList(counter))
    keep = [None] * 1000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(len(keep)):
            keep[i] = _wheel.TimerTaskList(counter)
        per_bucket = (tracemalloc.get_traced_memory()[0] - before) / len(keep)
    finally:
        tracemalloc.stop()
    assert per_bucket <= size + 8, (per_bucket, size)
    bucket = keep[0]
    assert bucket.entries() == [] and len(bucket) == 0
    tasks = [_wheel.TimerTask(5) for _ in range(3)]
    for task in tasks:
        bucket.add(task)
    bucket._check()
    assert bucket.entries() == tasks
    assert bucket.flush(lambda entry: None) == 3
    bucket._check()
    assert bucket.entries() == [] and counter.value == 0
