"""pyarrow differences across the versions the ``[spark]`` extra accepts.

The extra asks for ``pyarrow>=16``.  pyarrow 25
moved ``null_placement`` from :class:`pyarrow.compute.SortOptions` into each
sort key and deprecated the old place (a FutureWarning, an error under this
project's ``filterwarnings = error``); releases before 25 accept only
``(name, order)`` keys (a third item raises ``ValueError: too many values to
unpack``).  :func:`sort_indices` takes the keys once and passes them the way
the installed pyarrow wants.

>>> import pyarrow as pa
>>> table = pa.table({"k": [2, None, 1], "v": [0, 1, 2]})
>>> sort_indices(table, [("k", "ascending")], "at_start").to_pylist()
[1, 2, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

# "26.0.1", "25.0.0.dev12": the major release decides.
PER_KEY_NULL_PLACEMENT = int(pa.__version__.split(".", 1)[0]) >= 25


def sort_indices(
    table: Any,
    keys: Sequence[tuple[str, Literal["ascending", "descending"]]],
    null_placement: Literal["at_start", "at_end"],
) -> Any:
    """``pc.sort_indices(table, keys)`` with ``null_placement`` for every key.

    :param table: a pyarrow Table, RecordBatch or Array
    :param keys: ``(column, order)`` pairs, most significant first
    :param null_placement: where nulls go in every key column
    :return: the indices that sort ``table`` (a stable sort)
    """
    if PER_KEY_NULL_PLACEMENT:
        return pc.sort_indices(
            table, sort_keys=[(name, order, null_placement) for name, order in keys]
        )
    return pc.sort_indices(table, sort_keys=list(keys), null_placement=null_placement)
