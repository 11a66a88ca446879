"""``tickwheel replay`` as a user meets it: run as a subprocess, checked from outside.

Most cases here are bad input, which must exit 2 with one line on stderr
*before Spark starts* (the job's first progress line, ``[replay 1/6]
starting Spark``, must not appear); the seconds each took are printed, not
asserted.  Few cases start Spark in a subprocess (each costs 10+ s): one
replay of a CSV whose columns are in another order (same outcomes as the
Parquet, no progress-bar or log noise in a non-terminal), and one replay
killed with SIGKILL while it writes (OUTPUT left exactly as it was).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from tickwheel.spark.trace import write_trace

sys.path.insert(0, os.path.dirname(__file__))
import hang_report  # noqa: E402

COLUMNS = [
    "ts_ms",
    "partition",
    "kind",
    "request_id",
    "required_offset",
    "timeout_ms",
    "replica",
    "fetch_offset",
]


def cli(
    *args: str, env: dict[str, str | None] | None = None, timeout: float = 300
) -> tuple[int, str, str, float]:
    """Run ``python -m tickwheel ARGS``; (exit code, stdout, stderr, seconds).

    ``env`` adds to the environment; a None value removes the variable.
    """
    run_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            run_env.pop(key, None)
        else:
            run_env[key] = value
    start = time.perf_counter()
    code, stdout, stderr = hang_report.run(
        ["-m", "tickwheel", *args], env=run_env, timeout=timeout
    )
    return code, stdout, stderr, time.perf_counter() - start


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small trace as Parquet, and as CSV and JSON lines with columns swapped."""
    base = tmp_path_factory.mktemp("events")
    table = write_trace(base / "parquet", 1_500, 4, seed=3)
    order = list(COLUMNS)
    i, j = order.index("timeout_ms"), order.index("required_offset")
    order[i], order[j] = order[j], order[i]
    swapped = table.select(order).append_column(
        "note", pa.array(["x"] * table.num_rows)
    )
    pcsv.write_csv(swapped, base / "swapped.csv")
    with open(base / "swapped.json", "w") as fh:
        for row in swapped.to_pylist():
            fh.write(json.dumps(row) + "\n")
    return {
        "parquet": base / "parquet",
        "csv": base / "swapped.csv",
        "json": base / "swapped.json",
    }


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes (to prove nothing changed)."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def assert_one_line_error(
    code: int, out: str, err: str, seconds: float, *needles: str
) -> None:
    print(f"exit {code} after {seconds:.2f} s: {err.strip()}")
    assert code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("tickwheel replay: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in err and "[replay 1/6]" not in out  # Spark never started


def _fake_java(tmp_path: Path, version: str) -> Path:
    home = tmp_path / f"jdk-{version}"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\"' >&2\n")
    java.chmod(0o755)
    return home


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed once the socket is


def _bad_cases(events: dict[str, Path], tmp: Path) -> list[tuple[Any, ...]]:
    """(name, argv, env, words the one line must hold)."""
    pq_in = str(events["parquet"])
    out = str(tmp / "out")
    empty = tmp / "empty"
    empty.mkdir()
    text = tmp / "notes.txt"
    text.write_text("hello\n")
    prev = tmp / "previous"
    (prev / "outcomes").mkdir(parents=True)
    (prev / "summary.json").write_text("{}")
    (prev / "_SUCCESS").write_text(json.dumps({"tool": "tickwheel replay"}))
    table = pq.read_table(events["parquet"])
    pq.write_table(table.drop(["replica"]), tmp / "no_replica.parquet")
    floats = table.set_column(5, "timeout_ms", table["timeout_ms"].cast(pa.float64()))
    pq.write_table(floats, tmp / "float_timeout.parquet")
    misspelt = tmp / "misspelt.csv"
    misspelt.write_text(",".join(COLUMNS).replace("timeout_ms", "timeout") + "\n")
    (tmp / "first.json").write_text('{"ts_ms": 1, "partition": "p"}\n')
    (tmp / "afile").write_text("x")
    # A column of the wrong type in every row (ISO time, not epoch ms):
    # refused with the value, not replayed into "every row rejected".
    iso = dict.fromkeys(COLUMNS, "")
    iso.update(ts_ms="2025-03-01T12:00:01", partition="p", kind="produce")
    iso.update(request_id="1", required_offset="5", timeout_ms="100")
    (tmp / "iso.json").write_text(
        "".join(json.dumps({**iso, "request_id": i}) + "\n" for i in range(11))
    )
    (tmp / "iso.csv").write_text(
        ",".join(COLUMNS) + "\n" + ",".join(iso[c] for c in COLUMNS) + "\n"
    )
    no_java_path = tmp / "nobin"
    no_java_path.mkdir()
    java8 = str(_fake_java(tmp, "1.8.0_392"))
    port = _closed_port()
    return [
        ("nonexistent input", [str(tmp / "nope"), out], {}, ["INPUT", "nope"]),
        ("empty directory", [str(empty), out], {}, ["INPUT", "without data files"]),
        ("text file", [str(text), out], {}, ["notes.txt", "--format"]),
        ("text as parquet", [str(text), out, "--format", "parquet"], {}, ["Parquet"]),
        ("previous OUTPUT", [str(prev), out], {}, ["previous", "OUTPUT of a"]),
        ("missing column", [str(tmp / "no_replica.parquet"), out], {}, ["replica"]),
        (
            "float column",
            [str(tmp / "float_timeout.parquet"), out],
            {},
            ["timeout_ms", "double"],
        ),
        ("misspelt CSV column", [str(misspelt), out], {}, ["timeout_ms"]),
        ("JSON first line", [str(tmp / "first.json"), out], {}, ["kind"]),
        (
            "JSON ISO times",
            [str(tmp / "iso.json"), out],
            {},
            ["'ts_ms'", "'2025-03-01T12:00:01'", "integer", "iso.json"],
        ),
        (
            "CSV ISO times",
            [str(tmp / "iso.csv"), out],
            {},
            ["'ts_ms'", "'2025-03-01T12:00:01'", "integer", "iso.csv"],
        ),
        (
            "demo-only option",
            [pq_in, out, "--requests", "5"],
            {},
            ["--requests", "--demo"],
        ),
        (
            "demo-only options",
            [pq_in, out, "--partitions", "5", "--requests", "5"],
            {},
            ["--requests and --partitions", "--demo"],
        ),
        ("OUTPUT is a file", [pq_in, str(tmp / "afile")], {}, ["afile", "file"]),
        (
            "OUTPUT under a file",
            [pq_in, str(tmp / "afile" / "out")],
            {},
            ["cannot be created", "afile"],
        ),
        ("master nonsense", [pq_in, out, "--master", "nonsense"], {}, ["--master"]),
        (
            "master unreachable",
            [pq_in, out, "--master", f"spark://127.0.0.1:{port}"],
            {},
            ["cannot reach", str(port)],
        ),
        (
            "no java",
            [pq_in, out],
            {"JAVA_HOME": None, "PATH": str(no_java_path)},
            ["Java not found", "JAVA_HOME"],
        ),
        ("java 8", [pq_in, out], {"JAVA_HOME": java8}, ["Java 8", "17"]),
        (
            "JAVA_HOME without java",
            [pq_in, out],
            {"JAVA_HOME": str(tmp / "nojdk")},
            ["JAVA_HOME", "nojdk", "bin/java"],
        ),
        ("empty timeout", [pq_in, out, "--timeout-ms", "5000,,100"], {}, ["5000,,100"]),
        ("repeated timeout", [pq_in, out, "--timeout-ms", "5,5"], {}, ["twice"]),
        ("negative timeout", [pq_in, out, "--timeout-ms=-1"], {}, ["--timeout-ms"]),
        ("zero lag", [pq_in, out, "--replica-lag-max-ms", "0"], {}, ["lag"]),
        ("bad conf", [pq_in, out, "--conf", "novalue"], {}, ["--conf", "novalue"]),
        (
            "OUTPUT inside INPUT",
            [pq_in, os.path.join(pq_in, "out"), "--overwrite"],
            {},
            ["inside"],
        ),
    ]


def test_cli_bad_input_exits_2_with_one_line_before_spark_starts(events, tmp_path):
    cases = _bad_cases(events, tmp_path)
    for name, argv, env, needles in cases:
        print(f"-- {name}: tickwheel replay {' '.join(argv)}")
        code, out, err, seconds = cli("replay", *argv, env=env)
        assert_one_line_error(code, out, err, seconds, *needles)
        assert not (tmp_path / "out").exists(), name


def test_cli_demo_replaces_its_trace_when_the_settings_differ(tmp_path):
    """--demo OUTPUT --requests N over an earlier demo: a trace of N requests.

    Spark is made to fail at once (an invalid driver memory) after the trace
    is written, so each run costs the trace and a JVM that does not start.
    """
    out = tmp_path / "demo"
    fail = ["--conf", "spark.driver.memory=abc"]

    def demo(*options: str) -> str:
        code, stdout, err, seconds = cli("replay", "--demo", str(out), *options, *fail)
        print(f"exit {code} after {seconds:.2f} s: {stdout.strip()}")
        assert code == 2 and "Spark did not start" in err, err
        log = err.rsplit("Spark's log: ", 1)[1].strip().rstrip(")")
        shutil.rmtree(os.path.dirname(log), ignore_errors=True)
        return stdout

    def requests() -> int:
        ids = pq.read_table(out / "input", columns=["request_id"])["request_id"]
        return len(set(ids.drop_null().to_pylist()))

    assert "[demo] wrote" in demo("--requests", "40", "--partitions", "2")
    assert requests() == 40
    assert "reusing the trace" in demo("--requests", "40", "--partitions", "2")
    text = demo("--requests", "70", "--partitions", "2")
    assert "replaced the trace (other settings)" in text and requests() == 70
    settings = json.loads((out / "input" / "_tickwheel_demo.json").read_text())
    assert settings == {"requests": 70, "partitions": 2, "seed": 1}
    assert not [n for n in os.listdir(tmp_path) if "staging" in n]


def test_cli_verbose_shows_the_traceback_then_the_one_line(tmp_path):
    code, out, err, seconds = cli("replay", "-v", str(tmp_path / "nope"), "o")
    print(f"exit {code} after {seconds:.2f} s")
    assert code == 2 and "Traceback (most recent call last)" in err
    assert (
        err.splitlines()[-1]
        == f"tickwheel replay: INPUT {str(tmp_path / 'nope')!r} does not exist"
    )


def _user_dir(tmp_path: Path) -> Path:
    """A directory with results of unknown origin and a file of the user's."""
    exist = tmp_path / "exist"
    (exist / "outcomes").mkdir(parents=True)
    (exist / "outcomes" / "keep.txt").write_text("mine")
    (exist / "summary.json").write_text('{"mine": true}')
    return exist


def test_cli_non_empty_output_is_refused_and_untouched(events, tmp_path):
    exist = _user_dir(tmp_path)
    before = snapshot(exist)
    code, out, err, seconds = cli("replay", str(events["parquet"]), str(exist))
    assert_one_line_error(code, out, err, seconds, "not empty", "--overwrite")
    # --overwrite replaces only what a run's manifest lists: these are not.
    code, out, err, seconds = cli(
        "replay", str(events["parquet"]), str(exist), "--overwrite"
    )
    assert_one_line_error(code, out, err, seconds, "outcomes", "summary.json")
    assert snapshot(exist) == before
    assert sorted(os.listdir(tmp_path)) == ["exist"]  # no staging left behind


def test_cli_help_documents_columns_exit_codes_and_defaults():
    code, out, err, _ = cli("replay", "--help")
    assert code == 0
    for column in COLUMNS:
        assert column in out
    assert "Exit codes: 0" in out and "1 done, some rows rejected" in out
    assert "--overwrite" in out and "_SUCCESS" in out
    assert "replay_vs_broker.png" in out  # every file it may write
    helps = [out] + [cli(*c, "--help")[1] for c in ([], ["demo"], ["gen-trace"])]
    for text in helps:
        assert "``" not in text and ":func:" not in text
    code, out, err, _ = cli("replay", "only-input")
    assert code == 2 and err.startswith("usage: tickwheel replay")
    assert err.splitlines()[-1].startswith("tickwheel replay: needs INPUT and OUTPUT")

    from tickwheel.cli import build_parsers

    for name, parser in build_parsers().items():
        for action in parser._actions:
            if action.option_strings and action.dest not in ("help", "version"):
                assert action.help and "default" in action.help, (name, action.dest)


def test_cli_reordered_csv_gives_the_parquet_outcomes_without_noise(
    events, tmp_path, spark
):
    from tickwheel.spark import resolve
    from tickwheel.spark._collect import collect
    from tickwheel.spark.job import read_events

    out = tmp_path / "out"
    # ResourceWarnings shown, as under -X dev: pyspark < 4.2's collect() socket.
    code, stdout, stderr, seconds = cli(
        "replay",
        str(events["csv"]),
        str(out),
        "--master",
        "local[2]",
        "--no-plots",
        env={"PYTHONWARNINGS": "default::ResourceWarning"},
    )
    print(f"exit {code} after {seconds:.1f} s\n{stdout}\n{stderr}")
    assert code == 0, stderr
    noises = ("[Stage", "WARN", "log4j", "incubator", "setLogLevel", "\r", "Warning")
    for noise in noises:
        assert noise not in stdout + stderr, noise
    assert "ignoring extra column(s) note" in stdout
    manifest = json.loads((out / "_SUCCESS").read_text())
    assert manifest["tool"] == "tickwheel replay"
    assert set(manifest["written"]) == set(os.listdir(out))
    assert not [n for n in os.listdir(tmp_path) if "staging" in n]

    from tickwheel.spark.engine import OUTCOME_SCHEMA, replay_table

    def canonical(table: pa.Table) -> pa.Table:
        names = OUTCOME_SCHEMA.names
        return (
            table.select(names)
            .cast(OUTCOME_SCHEMA)
            .sort_by([(c, "ascending") for c in names])
        )

    # The single-process engine on the Parquet is the reference (no Spark).
    expected = canonical(replay_table(pq.read_table(events["parquet"])).outcomes)
    assert (
        0
        < pa.compute.sum(pa.compute.equal(expected["outcome"], "expired")).as_py()
        < expected.num_rows
    )  # both outcomes occur
    assert canonical(pq.read_table(out / "outcomes")).equals(expected)
    json_df = resolve(read_events(spark, str(events["json"])))
    got = pa.Table.from_pylist([r.asDict() for r in collect(json_df)])
    assert canonical(got).equals(expected)


def _children(pid: int) -> list[int]:
    """Descendants of ``pid`` (the JVM, its Python workers), from /proc."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(p) for p in fh.read().split()]
    except OSError:
        return found
    return found + [d for child in found for d in _children(child)]


def _wait_gone(pids: list[int], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for pid in pids:
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.1)
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, signal.SIGKILL)


def test_cli_replay_killed_mid_write_leaves_output_as_it_was(tmp_path):
    from tickwheel.spark.commit import recover

    events = tmp_path / "events"
    write_trace(events, 60_000, 8, seed=4)
    out = tmp_path / "out"  # an earlier run's results, plus a file of the user's
    (out / "outcomes").mkdir(parents=True)
    (out / "outcomes" / "part-0.parquet").write_bytes(b"old results")
    (out / "summary.json").write_text('{"old": true}')
    (out / "notes.txt").write_text("mine")
    written = ["_SUCCESS", "outcomes", "summary.json"]
    (out / "_SUCCESS").write_text(
        json.dumps({"tool": "tickwheel replay", "written": written})
    )
    before = snapshot(out)
    tmp = tmp_path / "tmp"  # the run's Spark log goes here (it cannot clean up)
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tickwheel", "replay", str(events), str(out)]
        + ["--overwrite", "--master", "local[1]", "--no-plots"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    staging = tmp_path / f".out.tickwheel-staging-{proc.pid}"
    children: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (staging / "union-staging").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        children = _children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # mid-write
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        _wait_gone(children, 30)  # the JVM exits when its stdin closes
    assert snapshot(out) == before
    assert staging.exists()  # what the killed run left, beside OUTPUT
    assert recover(str(out)) == [f"removed {staging.name} (staging of a killed run)"]
    assert sorted(os.listdir(tmp_path)) == ["events", "out", "tmp"]
    assert snapshot(out) == before
    shutil.rmtree(tmp)


def test_cli_spark_that_does_not_start_is_one_line_naming_the_cause(events, tmp_path):
    out = tmp_path / "out"
    argv = [str(events["parquet"]), str(out), "--conf", "spark.driver.memory=abc"]
    code, stdout, err, seconds = cli("replay", *argv)
    print(f"exit {code} after {seconds:.2f} s: {err.strip()}")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("tickwheel replay: Spark did not start: "), err
    assert "-Xmxabc" in lines[0] and "Traceback" not in err
    log = lines[0].rsplit("Spark's log: ", 1)[1].rstrip(")")
    assert "Could not create the Java Virtual Machine" in Path(log).read_text()
    shutil.rmtree(os.path.dirname(log))
    assert sorted(os.listdir(tmp_path)) == []  # no OUTPUT, no staging


def test_cli_failure_after_spark_started_is_one_line(
    spark, events, tmp_path, capsys, monkeypatch
):
    from tickwheel.cli import main
    from tickwheel.spark import job

    def fail(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("executor lost\n\tat org.apache.spark.Somewhere")

    monkeypatch.setattr(job, "_read_and_replay", fail)
    out = tmp_path / "out"
    assert main(["replay", str(events["parquet"]), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "tickwheel replay: the job failed: executor lost "
        "(--verbose shows the traceback)"
    ]
    assert sorted(os.listdir(tmp_path)) == []  # staging removed, no OUTPUT


@pytest.mark.parametrize("pause", [0.05, 0.0])
def test_relay_passes_only_the_progress_bar_to_a_terminal(tmp_path, pause):
    from tickwheel.spark._console import relay

    chunks = [
        b"WARNING: Using incubator modules: jdk.incubator.vector\n",
        b"26/11/24 WARN NativeCodeLoader: no native-hadoop\n\r[Sta",  # cut by a read
        b"ge 3:=====>      (2 + 2) / 5]\r[Stage 3:=======>    (3 + 2) / 5]",
        b"\r" + b" " * 80 + b"\r",
        b"tickwheel engine on pid 1: accelerated\n",
    ]
    source_r, source_w = os.pipe()
    term_r, term_w = os.pipe()
    log = tmp_path / "spark.log"
    reader = threading.Thread(target=relay, args=(source_r, str(log), term_w))
    reader.start()  # closes source_r and term_w at EOF
    # With a pause, one read per chunk, most likely; without, fewer reads.
    for chunk in chunks if pause else [b"".join(chunks)]:
        os.write(source_w, chunk)
        time.sleep(pause)
    os.close(source_w)
    reader.join(10)
    with os.fdopen(term_r, "rb") as fh:
        terminal = fh.read()
    assert terminal == (
        b"\r[Stage 3:=====>      (2 + 2) / 5]\r[Stage 3:=======>    (3 + 2) / 5]"
        + b"\r"
        + b" " * 80
        + b"\r"
    )
    assert log.read_bytes() == chunks[0] + (
        b"26/11/24 WARN NativeCodeLoader: no native-hadoop\n" + chunks[-1]
    )


def test_file_url_output_is_staged_beside_the_local_directory(
    spark, events, tmp_path, monkeypatch
):
    from tickwheel.spark.job import run_replay

    monkeypatch.chdir(tmp_path)  # a wrong staging path would land here
    out = tmp_path / "out"
    log = io.StringIO()
    code = run_replay(
        str(events["parquet"]), f"file://{out}", spark=spark, plots=False, out=log
    )
    assert code == 0
    manifest = json.loads((out / "_SUCCESS").read_text())
    assert set(manifest["written"]) == set(os.listdir(out))
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize(
    "argv, prog",
    [
        (["replay", "in", "out", "--bogus"], "tickwheel replay"),
        (["gen-trace", "x", "--nope"], "tickwheel gen-trace"),
        (["--bogus"], "tickwheel"),
    ],
)
def test_cli_unknown_option_is_named_by_its_command(argv, prog, capsys):
    """An unknown option is one line from the command it was given to (it
    came from the top-level parser: ``tickwheel: unrecognized arguments``)."""
    from tickwheel.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"{prog}: unrecognized arguments: {argv[-1]} (see `{prog} --help`)"
    ]
