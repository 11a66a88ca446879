"""Checks that run before Spark starts (pyarrow only, no JVM): one line per error.

Why: starting Spark costs 5-15 s, and an error raised inside it arrives as
hundreds of lines of Java.  Everything that can be known from the arguments,
the file system and the input's own metadata is checked here first, in well
under a second: the input exists, its format is known, its columns (Parquet
footers, CSV headers, the first JSON line) hold every required column with a
type that casts, and the first rows of each integer column hold numbers
(:func:`check_sample`); OUTPUT can be created and holds nothing this run would
overwrite by accident; Java 17+ is installed; ``--master`` has a form Spark
accepts.  Each check raises :class:`ReplayUsageError`, whose message is one
line naming the argument and the value and saying what to do.

Worked example, a CSV whose header has the right names in another order:

>>> import pathlib, shutil, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "events.csv").write_text(
...     "timeout_ms,ts_ms,partition,kind,request_id,required_offset,"
...     "replica,fetch_offset,note\\n100,0,p,produce,1,5,,,x\\n")
>>> info = inspect_input(str(d / "events.csv"))
>>> info.format, info.columns[:2], info.extra
('csv', ['timeout_ms', 'ts_ms'], ['note'])
>>> shutil.rmtree(d)

The Spark reader then maps the columns by these names, never by position.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .engine import INPUT_COLUMNS

__all__ = [
    "MANIFEST",
    "OUTPUT_ENTRIES",
    "InputInfo",
    "ReplayUsageError",
    "check_apart",
    "check_java",
    "check_master",
    "check_output",
    "check_sample",
    "inspect_input",
    "is_url",
    "local_path",
    "read_manifest",
]

#: The commit marker of a finished run; it holds the run's manifest (JSON).
MANIFEST = "_SUCCESS"
#: Every top-level entry a run may write (the manifest lists those it did).
#: Here, not in :mod:`.commit`, because the checks need it and commit imports
#: the checks: each layer imports only downward.
OUTPUT_ENTRIES = (
    "outcomes",
    "purgatory_size",
    "rejected",
    "summary.json",
    "latency_cdf.png",
    "purgatory_size.png",
    "replay_vs_broker.png",
    MANIFEST,
)
FORMATS = ("parquet", "csv", "json")
_SUFFIXES = {
    ".parquet": "parquet",
    ".parq": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
_COMPRESSION = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate")
JAVA_MIN = 17


class ReplayUsageError(ValueError):
    """A bad argument or input, found before Spark starts; the message is one line."""


@dataclass
class InputInfo:
    """What the checks learnt about INPUT: its format, files and column names."""

    path: str
    format: str
    files: list[str] = field(default_factory=list)
    #: Column names in the input's own order (CSV header, Parquet schema, JSON keys).
    columns: list[str] = field(default_factory=list)
    #: Columns the replay does not use (ignored; listed once in the progress).
    extra: list[str] = field(default_factory=list)


def is_url(path: str) -> bool:
    """``hdfs://...``, ``s3a://...``: paths the local checks cannot see."""
    return "://" in path and not path.startswith("file://")


def local_path(path: str) -> str:
    """``file:///x`` as ``/x``; other paths as they are."""
    return path[len("file://") :] if path.startswith("file://") else path


# -- INPUT ---------------------------------------------------------------------
def _format_of(name: str) -> str | None:
    lower = name.lower()
    for suffix in _COMPRESSION:
        if lower.endswith(suffix):
            lower = lower[: -len(suffix)]
    return _SUFFIXES.get(os.path.splitext(lower)[1])


def _data_files(path: str) -> list[str]:
    """The files Spark would read under a directory (``_x``, ``.x`` skipped)."""
    files = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        for d in dirs:
            if "=" not in d:
                raise ReplayUsageError(
                    f"INPUT {path!r} has a subdirectory {d!r} that is not a "
                    "key=value partition: give the directory of the event files"
                )
        files += [
            os.path.join(root, n) for n in sorted(names) if not n.startswith(("_", "."))
        ]
    return files


def _check_not_an_output(path: str) -> None:
    """A previous run's OUTPUT given as INPUT is refused with a pointer to input/."""
    marker = os.path.join(path, MANIFEST)
    looks = os.path.isdir(os.path.join(path, "outcomes")) or read_manifest(path)
    summary = os.path.exists(os.path.join(path, "summary.json"))
    if looks or (os.path.isfile(marker) and summary):
        hint = os.path.join(path, "input")
        extra = f" (its events are in {hint!r})" if os.path.isdir(hint) else ""
        raise ReplayUsageError(
            f"INPUT {path!r} is the OUTPUT of a tickwheel replay run, not events"
            f"{extra}: give the events table as INPUT"
        )


def _input_files(path: str, fmt: str | None) -> tuple[str, list[str]]:
    """(format, data files) of a local INPUT; raises if either is unknown."""
    if not os.path.exists(path):
        raise ReplayUsageError(f"INPUT {path!r} does not exist")
    if not os.access(path, os.R_OK):
        raise ReplayUsageError(
            f"INPUT {path!r} is not readable (check its permissions)"
        )
    if os.path.isdir(path):
        _check_not_an_output(path)
        files = _data_files(path)
        if not files:
            raise ReplayUsageError(
                f"INPUT {path!r} is a directory without data files "
                "(Parquet, CSV or JSON lines)"
            )
    else:
        files = [path]
    if fmt is not None:
        return fmt, files
    found = {_format_of(f) for f in files}
    if len(found) == 1 and None not in found:
        return found.pop() or "parquet", files
    if os.path.isdir(path) and found == {None}:
        return "parquet", files  # part-00000 files without a suffix: checked below
    names = sorted({os.path.splitext(f)[1] or os.path.basename(f) for f in files})
    raise ReplayUsageError(
        f"INPUT {path!r}: cannot tell its format from {', '.join(names[:5])}; "
        "name the files .parquet, .csv or .json, or pass --format parquet|csv|json"
    )


def _type_ok(name: str, dtype: pa.DataType) -> bool:
    """Whether a Parquet column of ``dtype`` casts to the replay's type of ``name``.

    Integers and strings cast (a string that is not a number becomes a
    rejected row); floats, booleans, timestamps and nested types do not.
    """
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_null(dtype) or pa.types.is_string(dtype):
        return True
    if pa.types.is_large_string(dtype) or pa.types.is_integer(dtype):
        return True
    return False


def _check_columns(where: str, columns: list[str], types: dict[str, Any]) -> list[str]:
    """Raise naming the first missing or badly typed column; return the extras."""
    seen = set()
    for name in columns:
        if name in seen:
            raise ReplayUsageError(f"{where}: column {name!r} appears twice")
        seen.add(name)
    missing = [c for c in INPUT_COLUMNS if c not in seen]
    if missing:
        near = {c.lower().replace(" ", "_") for c in columns}
        hint = " (column names are case-sensitive)" if missing[0] in near else ""
        raise ReplayUsageError(
            f"{where}: missing column(s) {', '.join(missing)}{hint}; the replay "
            f"needs {', '.join(INPUT_COLUMNS)} (see `tickwheel replay --help`)"
        )
    for name in INPUT_COLUMNS:
        if name in types and not _type_ok(name, types[name]):
            want = "an integer" if name not in ("partition", "kind") else "a string"
            hint = ""
            if pa.types.is_floating(types[name]):  # Spark would truncate 1.5 to 1
                hint = "; from pandas, write it with .astype('Int64')"
            raise ReplayUsageError(
                f"{where}: column {name!r} has type {types[name]}; it must be "
                f"{want} (or a string that holds one){hint}"
            )
    return [c for c in columns if c not in INPUT_COLUMNS]


def _parquet_columns(files: list[str]) -> tuple[list[str], list[str]]:
    """(columns, extras) from the footers of every Parquet file."""
    import pyarrow.parquet as pq

    columns: list[str] = []
    extra: list[str] = []
    for path in files:
        try:
            schema = pq.read_schema(path)
        except (pa.ArrowException, OSError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ReplayUsageError(
                f"INPUT file {path!r} is not a readable Parquet file ({first}); "
                "for CSV or JSON lines pass --format csv|json"
            ) from None
        types = {f.name: f.type for f in schema}
        found = _check_columns(f"INPUT file {path!r}", schema.names, types)
        if not columns:
            columns, extra = list(schema.names), found
    return columns, extra


def _csv_header(path: str) -> list[str]:
    """The header of a CSV file (pyarrow's parser: quoting, BOM, compression)."""
    import pyarrow.csv as pcsv

    try:
        stream = pa.input_stream(path, compression="detect")
        reader = pcsv.open_csv(
            stream,
            read_options=pcsv.ReadOptions(block_size=1 << 16),
            parse_options=pcsv.ParseOptions(invalid_row_handler=lambda row: "skip"),
        )
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ReplayUsageError(
            f"INPUT file {path!r} is not a CSV file with a header ({first})"
        ) from None
    names = list(reader.schema.names)
    reader.close()
    return names


def _csv_columns(files: list[str]) -> tuple[list[str], list[str]]:
    """(columns, extras) from the CSV headers; every file must have the same one.

    Spark reads every file of a CSV dataset with one header, so files whose
    headers differ (even only in order) are refused instead of being mixed up.
    """
    first = _csv_header(files[0])
    extra = _check_columns(f"INPUT file {files[0]!r}", first, {})
    for path in files[1:]:
        header = _csv_header(path)
        if header != first:
            raise ReplayUsageError(
                f"INPUT file {path!r} has the header {','.join(header)}, unlike "
                f"{files[0]!r} ({','.join(first)}): give files with one header"
            )
    return first, extra


def _json_columns(files: list[str]) -> tuple[list[str], list[str]]:
    """(columns, extras) from the first line of the first JSON lines file."""
    import gzip

    path = files[0]
    opener: Any = gzip.open if path.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            line = fh.readline()
        row = json.loads(line)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReplayUsageError(
            f"INPUT file {path!r}: the first line is not a JSON object ({exc})"
        ) from None
    if not isinstance(row, dict):
        raise ReplayUsageError(
            f"INPUT file {path!r}: the first line is not a JSON object, one "
            "event per line (JSON lines)"
        )
    bad = {
        k: v
        for k, v in row.items()
        if k in INPUT_COLUMNS and isinstance(v, (float, bool, list, dict))
    }
    types = {k: pa.scalar(v).type for k, v in bad.items()}
    return list(row), _check_columns(
        f"INPUT file {path!r} (first line)", list(row), types
    )


#: Rows of the first file read to check that each integer column holds numbers.
SAMPLE_ROWS = 1_000
_INTEGER_COLUMNS = [n for n, t in INPUT_COLUMNS.items() if pa.types.is_integer(t)]


def _number(text: str) -> bool:
    """Whether Spark might cast ``text`` to a number (left to Spark if so)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_sample(where: str, rows: dict[str, list[Any]]) -> None:
    """Refuse an integer column none of whose sampled values is a number.

    Such a column has the wrong type (``ts_ms`` as ISO time strings, say),
    and every row would be rejected after Spark has run.  A column where only
    some values are bad passes: those rows become rejected rows, as designed.

    >>> check_sample("x.json", {"ts_ms": ["12", None, " 7 "]})
    >>> try:
    ...     check_sample("x.json", {"ts_ms": ["2025-03-01T12:00:01", "junk"]})
    ... except ReplayUsageError as exc:
    ...     print(exc)
    x.json: column 'ts_ms' holds '2025-03-01T12:00:01' (row 1), not an integer, \
nor does any of the 2 rows sampled: convert it (to epoch milliseconds, say)
    """
    for name in _INTEGER_COLUMNS:
        values = [
            (i, v) for i, v in enumerate(rows.get(name, []), 1) if v not in (None, "")
        ]
        if values and not any(_number(str(v).strip()) for _, v in values):
            row, first = values[0]
            raise ReplayUsageError(
                f"{where}: column {name!r} holds {str(first)[:60]!r} (row {row}), "
                f"not an integer, nor does any of the {len(values):,} rows sampled: "
                "convert it (to epoch milliseconds, say)"
            )


def _csv_sample(path: str, columns: list[str]) -> dict[str, list[Any]]:
    """The first rows of a CSV file, every column as text."""
    import pyarrow.csv as pcsv

    stream = pa.input_stream(path, compression="detect")
    reader = pcsv.open_csv(
        stream,
        read_options=pcsv.ReadOptions(block_size=1 << 16),
        parse_options=pcsv.ParseOptions(invalid_row_handler=lambda row: "skip"),
        convert_options=pcsv.ConvertOptions(
            column_types={c: pa.string() for c in columns}
        ),
    )
    try:
        batch = reader.read_next_batch()
    except StopIteration:
        return {}
    finally:
        reader.close()
    sample: dict[str, list[Any]] = batch.slice(0, SAMPLE_ROWS).to_pydict()
    return sample


def _json_sample(path: str) -> dict[str, list[Any]]:
    """The first lines of a JSON lines file, as columns (lines not objects skipped)."""
    import gzip
    import itertools

    opener: Any = gzip.open if path.lower().endswith(".gz") else open
    rows: list[dict[str, Any]] = []
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in itertools.islice(fh, SAMPLE_ROWS):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return {name: [r.get(name) for r in rows] for name in INPUT_COLUMNS}


def _parquet_sample(path: str) -> dict[str, list[Any]]:
    """The first rows of the string-typed integer columns of a Parquet file."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    names = [
        f.name
        for f in pf.schema_arrow
        if f.name in _INTEGER_COLUMNS and not pa.types.is_integer(f.type)
    ]
    if not names or not pf.metadata.num_rows:
        return {}
    batch = next(pf.iter_batches(batch_size=SAMPLE_ROWS, columns=names))
    sample: dict[str, list[Any]] = batch.to_pydict()
    return sample


def _sample_rows(fmt: str, files: list[str], columns: list[str]) -> None:
    """Check the first rows of the first file with :func:`check_sample`."""
    path = files[0]
    try:
        if fmt == "csv":
            rows = _csv_sample(path, columns)
        elif fmt == "json":
            rows = _json_sample(path)
        else:
            rows = _parquet_sample(path)
    except (pa.ArrowException, OSError, UnicodeDecodeError):
        return  # unreadable beyond the header: Spark reports it row by row
    check_sample(f"INPUT file {path!r}", rows)


def inspect_input(path: str, fmt: str | None = None) -> InputInfo:
    """Check a local INPUT and return its format, files and columns.

    A URL (``hdfs://``, ``s3a://``) is not looked at: only its format is
    guessed from the suffix (default Parquet).

    :raises ReplayUsageError: with one line saying what is wrong
    """
    if fmt is not None and fmt not in FORMATS:
        raise ReplayUsageError(f"--format {fmt!r}: use parquet, csv or json")
    if is_url(path):
        return InputInfo(path, fmt or _format_of(path.rstrip("/")) or "parquet")
    local = local_path(path)
    if read_manifest(local, "tickwheel import-request-log") is not None:
        path = local = os.path.join(local, "events")  # an import's OUTPUT
    fmt, files = _input_files(local, fmt)
    readers = {"parquet": _parquet_columns, "csv": _csv_columns, "json": _json_columns}
    columns, extra = readers[fmt](files)
    _sample_rows(fmt, files, columns)
    return InputInfo(path, fmt, files, columns, extra)


# -- OUTPUT --------------------------------------------------------------------
def read_manifest(path: str, tool: str = "tickwheel replay") -> dict[str, Any] | None:
    """The manifest a finished run of ``tool`` left in ``path/_SUCCESS``, or None."""
    try:
        with open(os.path.join(path, MANIFEST)) as fh:
            manifest = json.load(fh)
    except (OSError, ValueError):
        return None
    if isinstance(manifest, dict) and manifest.get("tool") == tool:
        return manifest
    return None


def _check_writable_parent(output: str) -> None:
    parent = os.path.dirname(os.path.abspath(output))
    probe = parent
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise ReplayUsageError(
            f"OUTPUT {output!r} cannot be created: {probe!r} is a file"
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ReplayUsageError(
            f"OUTPUT {output!r} cannot be created: {probe!r} is not writable"
        )


def check_apart(input_path: str, output: str) -> None:
    """OUTPUT must not be INPUT or inside it (the demo's OUTPUT/input is fine).

    :raises ReplayUsageError: naming both
    """
    if is_url(input_path) or is_url(output):
        return
    src = os.path.realpath(local_path(input_path))
    dst = os.path.realpath(local_path(output))
    if dst == src or dst.startswith(src.rstrip(os.sep) + os.sep):
        raise ReplayUsageError(
            f"OUTPUT {output!r} is INPUT {input_path!r} or inside it; "
            "give an OUTPUT outside the input directory"
        )


def check_output(
    output: str,
    overwrite: bool,
    keep: tuple[str, ...] = (),
    *,
    tool: str = "tickwheel replay",
    entries: tuple[str, ...] | None = None,
) -> None:
    """OUTPUT must be creatable, and empty unless ``overwrite``.

    With ``overwrite`` only what a previous run listed in its manifest may be
    replaced: an entry this run writes that is not in that list (a
    ``summary.json`` of your own, say) is refused, never overwritten.
    ``keep`` names entries that may be there anyway (``input`` for --demo).
    ``tool`` and ``entries``: whose manifest counts and what it may write
    (default: the replay's).

    :raises ReplayUsageError: with one line saying what is wrong
    """
    if is_url(output):
        return
    output = local_path(output)
    _check_writable_parent(output)
    if not os.path.exists(output):
        return
    if not os.path.isdir(output):
        raise ReplayUsageError(
            f"OUTPUT {output!r} is an existing file; give a directory path"
        )
    if not os.access(output, os.W_OK | os.X_OK):
        raise ReplayUsageError(f"OUTPUT {output!r} is not writable")
    present = sorted(set(os.listdir(output)) - set(keep))
    if not present:
        return
    if not overwrite:
        raise ReplayUsageError(
            f"OUTPUT {output!r} is not empty ({_listing(present)}); give a new "
            "directory, or --overwrite to replace an earlier run's results there"
        )
    _check_overwrite(output, present, tool, entries)


def _check_overwrite(
    output: str, present: list[str], tool: str, entries: tuple[str, ...] | None
) -> None:
    """Refuse if a name this run writes is in OUTPUT but no manifest lists it."""
    manifest = read_manifest(output, tool)
    ours = set(manifest.get("written", [])) if manifest else set()
    ours_possible = OUTPUT_ENTRIES if entries is None else entries
    foreign = [e for e in present if e in ours_possible and e not in ours]
    if foreign:
        raise ReplayUsageError(
            f"OUTPUT {output!r} holds {_listing(foreign)}, which no earlier "
            f"{tool} wrote there (no _SUCCESS manifest lists it); "
            "--overwrite replaces only a run's own files: move them or choose "
            "another OUTPUT"
        )


def _listing(entries: list[str], limit: int = 4) -> str:
    more = f", ... {len(entries) - limit} more" if len(entries) > limit else ""
    return ", ".join(entries[:limit]) + more


# -- Java and the master -------------------------------------------------------
def _java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise ReplayUsageError(
                f"JAVA_HOME {home!r} has no bin/java: point JAVA_HOME at a "
                f"Java {JAVA_MIN}+ installation (or unset it to use java on PATH)"
            )
        return java
    found = shutil.which("java")
    if found is None:
        raise ReplayUsageError(
            f"Java not found: Spark needs Java {JAVA_MIN} or newer; install it "
            "and put java on PATH or set JAVA_HOME"
        )
    return found


def java_version(text: str) -> int | None:
    """The major version in ``java -version`` output.

    >>> java_version('openjdk version "17.0.15"'), java_version('"1.8.0_392"')
    (17, 8)
    """
    match = re.search(r'version "?(\d+)(?:\.(\d+))?', text) or re.search(
        r'"(\d+)(?:\.(\d+))?', text
    )
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """The java Spark will run (``JAVA_HOME`` first, then PATH); must be 17+."""
    java = _java_binary()
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReplayUsageError(f"cannot run {java!r} -version ({exc})") from None
    version = java_version(done.stderr + done.stdout)
    if version is None or version < JAVA_MIN:
        found = "an unknown version" if version is None else f"Java {version}"
        raise ReplayUsageError(
            f"{java!r} is {found}; Spark needs Java {JAVA_MIN} or newer "
            "(set JAVA_HOME to one)"
        )
    return java


_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn"
    r"|spark://[^/\s]+|k8s://\S+"
)


def check_master(master: str, timeout_s: float = 2.0) -> None:
    """``--master`` has a form Spark accepts; a ``spark://`` master answers.

    :raises ReplayUsageError: for another form, or a standalone master that
        refuses connections (Spark itself retries for a minute)
    """
    if not _MASTER.fullmatch(master):
        raise ReplayUsageError(
            f"--master {master!r} is not a Spark master URL: use local, local[N], "
            "local[*], spark://HOST:PORT, yarn or k8s://HOST:PORT"
        )
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise ReplayUsageError(
                f"--master {master!r}: expected spark://HOST:PORT (e.g. port 7077)"
            )
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
            return
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
    raise ReplayUsageError(
        f"--master {master!r}: cannot reach the Spark master ({reason}); is it running?"
    )
