# _purgatory_core.pxi: included by _purgatory.pyx (one extension module).
# The purgatory's two hot paths (watch, check) over its shards, and
# _PurgatoryCore, the compiled half of DelayedOperationPurgatory.
# Calls: ops, hooks, lock.

@cython.final
cdef class _Shard:
    """_Shard()
--

    A slice of the key space: key -> watcher list, and the lock writers take."""

    def __init__(self):
        """__init__($self)
--

Initialize self.  See help(type(self)) for accurate signature."""
        self.lock = _allocate_lock()
        self.watchers = {}


# -- the two hot paths ------------------------------------------------------------
# Every watched operation is a DelayedOperation of this module (the
# purgatory checks each new operation type once, see _check_op_type), so
# the loops read its C fields through unchecked casts.


cdef bint _hand_off(DelayedOperation op) except -1:
    """``op``'s private lock is taken: leave its holder a retry, or take the lock."""
    tw_store_u8(&op._retry, 1)
    if not _op_try_acquire(op):
        if tw_load_u8(&op._trylock):
            return False
        _op_acquire(op)
    # This thread tries now, after every event that set the flag so far.
    tw_store_u8(&op._retry, 0)
    return True


cdef bint _retry(DelayedOperation op, unsigned long ident) except -1:
    """Try ``op`` again while other threads keep flagging it (Kafka's retry loop)."""
    cdef bint completed = False
    while tw_load_u8(&op._retry) and not tw_load_u8(&op._done):
        if not _op_try_acquire(op):
            return completed
        tw_store_u8(&op._retry, 0)
        tw_store_ul(&op._holder, ident)
        try:
            if _try_complete(op):
                completed = True
        finally:
            tw_store_ul(&op._holder, 0)
            _op_release(op)
    return completed


# A request's keys up to this many are checked for duplicates pairwise.
cdef enum:
    _FEW_KEYS = 8


cdef object _watch(
    _PurgatoryCore self, DelayedOperation operation, object keys,
    const Py_hash_t *hashes,
):
    # try_complete_else_watch after the argument checks (see the twin).
    # ``hashes``: the keys' hashes when the checks computed them (a tuple's
    # keys, which cannot change meanwhile), else NULL.
    cdef Py_ssize_t n = len(keys), i = 0
    cdef list shards = self._shards
    cdef Py_ssize_t mask = self._mask
    cdef unsigned long ident = _ident()
    cdef _Shard shard
    cdef list ops
    cdef bint completed = False
    cdef Py_ssize_t pending
    error = None
    tw_store_u8(&operation._submitted, 1)
    _op_acquire(operation)
    tw_store_ul(&operation._holder, ident)
    try:
        if _try_complete(operation):
            return True
        for key in keys:
            shard = <_Shard>shards[
                (hashes[i] if hashes != NULL else hash(key)) & mask]
            i += 1
            shard_lock = shard.lock
            _acquire(shard_lock)
            try:
                ops = shard.watchers.get(key)
                if ops is None:
                    shard.watchers[key] = [operation]
                else:
                    ops.append(operation)
            finally:
                _release(shard_lock)
        # An estimate (a lost update only delays a purge): an atomic add
        # on free-threaded builds, a plain one with the GIL.
        tw_atomic_add_ssize(&self._n_estimated, 1)
        try:
            completed = _try_complete(operation)
        except BaseException as exc:  # still time it out, then re-raise
            error = exc
    finally:
        tw_store_ul(&operation._holder, 0)
        _op_release(operation)
    if tw_load_u8(&operation._retry) and not tw_load_u8(&operation._done):
        # A check found the lock taken while we held it: try for it.
        try:
            completed = _retry(operation, ident) or completed
        except BaseException as exc:
            if error is None:
                error = exc
    timer = self._timer
    if not tw_load_u8(&operation._done):
        if self._c_timer:
            _timer_add(<TimerCore>timer, operation)
        else:
            timer.add(operation)
        if tw_load_u8(&operation._done):
            # Completed between the unlock and the add: drop the timer entry.
            _cancel_task(operation)
    if self._c_timer:
        pending = _timer_len(<TimerCore>timer)
    else:
        pending = len(timer)
    if tw_atomic_load_ssize(&self._n_estimated) - pending > self._purge_interval:
        self._purge_if_due()
    if error is not None:
        raise error
    return completed


@cython.boundscheck(False)
@cython.wraparound(False)
cdef object _check(_PurgatoryCore self, _Shard shard, object key, list ops):
    # check_and_complete's scan of ``ops`` (see the twin): the entries there
    # now (one appended later is tried by its own watch's second try).  It
    # only counts the done ones; _compact then copies the live ones once,
    # in C, rather than the scan collecting them one append at a time.
    cdef unsigned long ident = _ident()
    cdef Py_ssize_t completed = 0
    cdef Py_ssize_t dropped = 0
    cdef Py_ssize_t i
    cdef Py_ssize_t n = len(ops)
    cdef bint ok
    cdef int state
    cdef PyObject *p
    cdef DelayedOperation op
    error = None
    for i in range(n):
        if TW_FT_LOCKS:
            item = tw_list_get(ops, i)  # another thread may append
            p = <PyObject *>item
        else:
            p = PyList_GET_ITEM(ops, i)  # borrowed: the list only grows
        state = _scan_state(p)
        if state == _DONE:
            dropped += 1
            continue
        if state == _NOT_READY:
            continue
        op = <DelayedOperation>p
        if not tw_load_u8(&op._trylock):
            _op_acquire(op)  # a shared lock: wait for it
        elif not _op_locked(op):
            # Free a moment ago (if another thread took it meanwhile, this
            # waits for it, which is merely slower).
            _op_acquire(op)
        elif not _hand_off(op):
            continue  # its holder tries again for us
        tw_store_ul(&op._holder, ident)
        try:
            ok = _try_complete(op)
        except BaseException as exc:
            ok = False
            if error is None:
                error = exc
            else:
                self._log_error(op, exc)
        finally:
            tw_store_ul(&op._holder, 0)
            _op_release(op)
        if tw_load_u8(&op._retry):
            # Flagged by another thread while we held the lock (or before):
            # try again.  The flag is cleared under the lock only by the
            # thread about to try, so it is never lost.
            try:
                ok = _retry(op, ident) or ok
            except BaseException as exc:
                if error is None:
                    error = exc
                else:
                    self._log_error(op, exc)
        if ok:
            completed += 1
        if tw_load_u8(&op._done):
            dropped += 1  # completed by this call or by another thread
    if dropped:
        _compact(self, shard, key, 1)
    if error is not None:
        raise error
    return completed


cdef extern from *:
    """
    static inline int tw_type_is(PyObject *o, PyTypeObject *t) {
        return Py_TYPE(o) == t;
    }
    /* dict.get(key) as a new reference.  On free-threaded builds a
       borrowed value could be replaced and freed by another thread before
       the caller's incref: PyDict_GetItemRef (3.13+) takes it safely. */
    static inline PyObject *tw_dict_get(PyObject *d, PyObject *key) {
    #ifdef Py_GIL_DISABLED
        PyObject *v;
        if (PyDict_GetItemRef(d, key, &v) < 0)
            return NULL;
        return v ? v : Py_NewRef(Py_None);
    #else
        PyObject *v = PyDict_GetItemWithError(d, key);
        if (v == NULL && PyErr_Occurred())
            return NULL;
        return Py_NewRef(v ? v : Py_None);
    #endif
    }
    /* ops[i] as a new reference, i < len(ops).  Free-threaded builds:
       another thread may append meanwhile (and move the items), which
       PyList_GetItemRef (3.13+) allows for. */
    static inline PyObject *tw_list_get(PyObject *ops, Py_ssize_t i) {
    #ifdef Py_GIL_DISABLED
        return PyList_GetItemRef(ops, i);
    #else
        return Py_NewRef(PyList_GET_ITEM(ops, i));
    #endif
    }
    /* A list whose first n slots are its items now: its length is n (the
       rest were never set, or their references were taken over). */
    static inline void tw_list_cut(PyObject *ops, Py_ssize_t n) {
        Py_SET_SIZE(ops, n);
    }
    static inline void tw_list_swap(PyObject *ops, Py_ssize_t i, Py_ssize_t j) {
        PyObject *a = PyList_GET_ITEM(ops, i);
        PyList_SET_ITEM(ops, i, PyList_GET_ITEM(ops, j));
        PyList_SET_ITEM(ops, j, a);
    }
    """
    bint tw_type_is(PyObject *o, PyTypeObject *t) noexcept
    void tw_list_swap(list ops, Py_ssize_t i, Py_ssize_t j) noexcept
    object tw_dict_get(dict d, object key)
    object tw_list_get(list ops, Py_ssize_t i)
    void tw_list_cut(list ops, Py_ssize_t n) noexcept


cdef enum:
    _TRY = 0
    _DONE = 1
    _NOT_READY = 2


cdef inline int _scan_state(PyObject *p) noexcept:
    # What a check's scan does with the watched operation ``p``: drop it
    # (done), pass it by, or try it.  A CountdownOperation whose count is
    # not zero would return False from try_complete: it is passed by
    # without its lock.  The count only falls, and the thread that takes
    # it to zero checks a key of the operation afterwards.
    if tw_load_u8(&(<DelayedOperation>p)._done):
        return _DONE
    if (tw_type_is(p, <PyTypeObject *>CountdownOperation)
            and tw_atomic_load_ssize(&(<CountdownOperation>p)._count)):
        return _NOT_READY
    return _TRY


cdef list _live(list ops):
    # The operations of ``ops`` not done, in order, or None if all are;
    # called under the shard's lock (no append meanwhile).  One pass into a
    # list of len(ops) slots, cut to the ones filled: on free-threaded
    # builds another thread may complete an operation during the pass, so
    # a count taken first would not match.
    cdef Py_ssize_t n = PyList_GET_SIZE(ops)
    cdef Py_ssize_t i, j = 0
    cdef PyObject *p
    cdef list out = PyList_New(n)
    for i in range(n):
        p = PyList_GET_ITEM(ops, i)
        if not tw_load_u8(&(<DelayedOperation>p)._done):
            Py_INCREF(<object>p)
            PyList_SET_ITEM(out, j, <object>p)
            j += 1
    if j == n:
        return None
    tw_list_cut(out, j)
    return out


cdef extern from "Python.h":
    # Cython's declaration takes an object for the items; NULL deletes.
    int tw_list_delete "PyList_SetSlice" (
        object ops, Py_ssize_t low, Py_ssize_t high, PyObject *items
    ) except -1
    void tw_decref "Py_DECREF" (PyObject *o)


cdef enum:
    # _drop_done releases up to this many entries itself, past the list's
    # end; more go through PyList_SetSlice, which also shrinks the list.
    _DROP_FEW = 16


cdef Py_ssize_t _drop_done(list ops) except -1:
    # Edit ``ops`` in place: the live operations moved to the front in
    # order, the done ones dropped from the end; how many went.  Only
    # under the shard's lock while no scan reads a list of the purgatory
    # (see _compact).  The moves run no Python code, and the list is whole
    # (cut to its live entries) before a dropped one is released, as that
    # may free it and run Python code.  A check drops a few entries: they
    # are released here, keeping the list's storage for the appends to
    # come, where PyList_SetSlice cost ~400 instructions a check
    # (bench/README.md, "The purgatory, Kafka's workload").
    cdef Py_ssize_t n = PyList_GET_SIZE(ops)
    cdef Py_ssize_t i, j = 0
    cdef PyObject *few[_DROP_FEW]
    for i in range(n):
        if not tw_load_u8(&(<DelayedOperation>PyList_GET_ITEM(ops, i))._done):
            if i != j:
                tw_list_swap(ops, i, j)
            j += 1
    if n - j > _DROP_FEW:
        # PyList_SetSlice, not ``del ops[j:n]``: no slice object per call.
        tw_list_delete(ops, j, n, NULL)
    elif j < n:
        for i in range(j, n):
            few[i - j] = PyList_GET_ITEM(ops, i)
        tw_list_cut(ops, j)
        for i in range(n - j):
            tw_decref(few[i])
    return n - j


cdef Py_ssize_t _compact(
    _PurgatoryCore self, _Shard shard, object key, Py_ssize_t mine
) except -1:
    # Drop the done operations from ``key``'s list; the key goes with its
    # last one.  A scan reads a list without the shard's lock, so lists are
    # replaced, not edited, while one may be reading (a concurrent scan of
    # the old list never skips an entry).  When the scans in progress are
    # only the caller's ``mine`` (GIL builds: _PurgatoryCore._scans, read
    # after the lock is taken, as taking it may let other threads run),
    # the list is edited instead, which saves allocating a copy and
    # freeing the old one per check.  Returns how many entries went.
    cdef list ops, keep
    cdef Py_ssize_t dropped
    shard_lock = shard.lock
    _acquire(shard_lock)
    try:
        watchers = shard.watchers
        ops = watchers.get(key)
        if ops is None:
            return 0
        if not TW_FT_LOCKS and self._scans == mine:
            dropped = _drop_done(ops)
            if not ops:
                del watchers[key]
            return dropped
        keep = _live(ops)
        if keep is None:
            return 0
        if keep:
            watchers[key] = keep
        else:
            del watchers[key]
        return len(ops) - len(keep)
    finally:
        _release(shard_lock)


cdef Py_ssize_t _purge_shard(_PurgatoryCore self, _Shard shard) except -1:
    # _compact for every key of the shard, under its lock once, for a
    # purge outside any scan; in C, as a purge passes over every watched
    # entry (bench/README.md, "The purgatory, Kafka's workload").  The
    # scans are counted again for each list: deleting an entry may free
    # an operation and run Python code that lets another thread in.
    cdef Py_ssize_t purged = 0
    cdef list keep
    cdef list empty = []
    shard_lock = shard.lock
    _acquire(shard_lock)
    try:
        watchers = shard.watchers
        # A snapshot of the items: the loop replaces values as it goes.
        for key, ops in list(watchers.items()):
            if not TW_FT_LOCKS and self._scans == 0:
                purged += _drop_done(<list>ops)
                if not ops:
                    empty.append(key)
                continue
            keep = _live(<list>ops)
            if keep is None:
                continue
            purged += len(<list>ops) - len(keep)
            if keep:
                watchers[key] = keep
            else:
                empty.append(key)
        for key in empty:
            del watchers[key]
    finally:
        _release(shard_lock)
    return purged


cdef class _PurgatoryCore:
    """_PurgatoryCore()
--

    The hot paths of DelayedOperationPurgatory (try, watch, check)."""

    @property
    def _estimated(self):
        # Completed-but-watched operations, an estimate: every thread adds
        # to it and the purge resets it, so it is read and written
        # atomically (plain with a GIL).
        return tw_atomic_load_ssize(&self._n_estimated)

    @_estimated.setter
    def _estimated(self, Py_ssize_t value):
        tw_atomic_store_ssize(&self._n_estimated, value)

    def try_complete_else_watch(self, operation, keys):
        """Complete ``operation`` now if it can, else watch it under ``keys``, timed.

        Under the operation's lock: try; if not complete, add it to the watcher
        list of every key, then try once more (so an event between the first
        try and the watch is not missed); if still not complete, add it to the
        timer, and cancel that timer entry if it completed meanwhile.  An event
        whose check found the lock taken while this call held it is honoured
        by trying again after the lock is released (see
        :meth:`check_and_complete`).

        Runtime complexity: O(len(keys) + timer levels).

        :param operation: a DelayedOperation not submitted before
        :param keys: a non-empty iterable of hashable keys (duplicates count once)
        :return: True iff the operation completed during this call
        :raises TypeError: if ``operation`` is not a DelayedOperation for this
            timer's core, ``keys`` is a str/bytes or not iterable, or a key is
            unhashable
        :raises ValueError: if ``keys`` is empty or the operation was submitted
        :raises RuntimeError: after shutdown()
        Nothing is registered when it raises one of these.
        """
        if self._shut:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")
        if TW_FT_LOCKS or type(operation) is not self._last_op_type:
            if type(operation) not in self._op_types:
                self._check_op_type(operation)
            if not TW_FT_LOCKS:
                # Free-threaded builds keep no cache: threads would swap it
                # unlocked (and drop the old type's reference twice).
                self._last_op_type = type(operation)
        if (
            tw_load_u8(&(<DelayedOperation>operation)._submitted)
            or _is_done(operation)
        ):
            raise ValueError(
                f"operation {operation!r} was already submitted or completed"
            )
        if type(keys) is not tuple and type(keys) is not list:
            keys = self._keys_tuple(keys)
        cdef Py_ssize_t n = len(keys)
        cdef Py_hash_t hashes[_FEW_KEYS]
        # The hashes computed below serve the watch as well, for a tuple's
        # keys (a list could change while the operation's hooks run).
        cdef bint reuse = n <= _FEW_KEYS and type(keys) is tuple
        # Validate every key before registering anything; equal keys count once.
        try:
            if n == 1:
                hashes[0] = hash(keys[0])
            elif n == 0:
                raise ValueError(f"keys must not be empty, got {keys!r}")
            elif _has_duplicates(keys, n, hashes):
                keys = tuple(dict.fromkeys(keys))
                reuse = False  # hashes[] are the old keys'
        except TypeError:
            for key in keys:
                _hash_key(key, f"key {key!r} in keys")
            raise
        return _watch(
            self, <DelayedOperation>operation, keys, hashes if reuse else NULL
        )

    def check_and_complete(self, key):
        """Try to complete every operation watching ``key``; drop completed entries.

        Call it after an event that may satisfy operations watching ``key``.
        Each operation's ``try_complete`` runs under its lock, outside the
        watcher list's lock.  A key whose list becomes empty disappears.  If
        try_complete/on_complete raises, the other operations are still tried
        and the first exception is re-raised at the end.

        An operation whose own (private) lock is held by another thread right
        now (the timer expiring it, another check, try_complete_else_watch) is
        not waited for: this call flags it, and the holder tries it again
        after releasing the lock (Kafka's ``maybeTryComplete``), so the event
        is still seen.  Operations on a shared lock are waited for.

        Runtime complexity: O(operations watching ``key``), one pass.

        :return: how many operations this call completed
        :raises TypeError: if ``key`` is unhashable
        """
        cdef _Shard shard
        try:
            shard = <_Shard>self._shards[hash(key) & self._mask]
        except TypeError:
            raise TypeError(f"key must be hashable, got {key!r}") from None
        # Read without the lock (writers, watch and compaction, take
        # shard.lock), as a new reference even on free-threaded builds.
        ops = tw_dict_get(shard.watchers, key)
        if ops is None:
            return 0
        if TW_FT_LOCKS:
            return _check(self, shard, key, <list>ops)
        # Counted from the read of the list on (no Python code in between,
        # so with the GIL no other thread can edit the list meanwhile).
        self._scans += 1
        try:
            return _check(self, shard, key, <list>ops)
        finally:
            self._scans -= 1

    def _purge_lists(self):
        """Drop every done operation from every watcher list; how many entries went."""
        cdef Py_ssize_t purged = 0
        for shard in self._shards:
            purged += _purge_shard(self, <_Shard>shard)
        return purged

    def _log_error(self, op, exc):
        logger.error(
            "purgatory %r: try_complete of %r raised", self._name, op, exc_info=exc
        )


cdef bint _has_duplicates(object keys, Py_ssize_t n, Py_hash_t *h) except -1:
    # len(set(keys)) != n, a tuple or list of n > 1 keys, without building
    # the set for the few keys a request has: the hashes compared pairwise,
    # the keys (as a set would: identity, then ==) only where they match.
    # Up to _FEW_KEYS keys, their hashes are left in h[].
    cdef Py_ssize_t i, j
    if n > _FEW_KEYS:
        return len(set(keys)) != n
    for i in range(n):
        h[i] = hash(keys[i])
        for j in range(i):
            if h[j] == h[i] and PyObject_RichCompareBool(keys[j], keys[i], Py_EQ):
                return True
    return False


def _hash_key(key, what):
    try:
        return hash(key)
    except TypeError:
        raise TypeError(f"{what} must be hashable, got {key!r}") from None


def _new_operation(type cls, delay_ms):
    """A new ``cls`` with ``delay_ms`` and a private lock, without calling its __init__.

    For DelayedOperation subclasses created by the million that fill their
    own fields right after (say one operation per replayed request):
    the state is what ``DelayedOperation.__init__(op, delay_ms)`` leaves.

    :raises TypeError: if ``cls`` is not a DelayedOperation subclass, or as
        DelayedOperation for ``delay_ms``
    """
    return _fresh(cls, delay_ms)


cdef DelayedOperation _fresh(type cls, object delay_ms):
    # tp_new leaves every flag False and _holder 0 (zeroed C fields), as
    # __init__ would set them; only the delay and the lock remain.
    cdef DelayedOperation op = cls.__new__(cls)
    _delay_to_ns(delay_ms, op)  # the delay_ms setter, without the attribute lookup
    _op_lock_private(op)
    tw_store_u8(&op._trylock, 1)
    return op
