"""``tickwheel replay --remote``: bad Connect settings are one line, before Spark.

No server is started here (tests/spark/test_cluster.py runs the replay on
one): an unreachable or malformed ``sc://`` URL, ``--master`` given with it,
and an OUTPUT URL (which a Connect client cannot move files on) all exit 2
with one line naming the argument.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_replay_cli import _closed_port, assert_one_line_error, cli

from tickwheel.spark.trace import write_trace


def test_cli_remote_bad_settings_exit_2_with_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "events"
    write_trace(trace, 200, 2, seed=1)
    port = _closed_port()
    cases = [
        (["--remote", f"sc://127.0.0.1:{port}"], ["--remote", "cannot reach"]),
        (["--remote", "http://127.0.0.1:15002"], ["--remote", "sc://HOST:PORT"]),
        (["--remote", "sc://127.0.0.1:x"], ["--remote", "sc://HOST:PORT"]),
        (
            ["--remote", "sc://127.0.0.1:15002", "--master", "local[2]"],
            ["--master or --remote"],
        ),
    ]
    for args, needles in cases:
        code, out, err, seconds = cli("replay", str(trace), str(tmp_path / "o"), *args)
        assert_one_line_error(code, out, err, seconds, *needles)
        assert not (tmp_path / "o").exists()


def test_cli_remote_refuses_an_output_url(tmp_path: Path) -> None:
    """OUTPUT must be local with --remote (checked once the server answers)."""
    import socket

    trace = tmp_path / "events"
    write_trace(trace, 200, 2, seed=1)
    with socket.socket() as server:  # something that answers on the port
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"sc://127.0.0.1:{server.getsockname()[1]}"
        code, out, err, seconds = cli(
            "replay", str(trace), "hdfs:///replay/out", "--remote", url
        )
    assert_one_line_error(code, out, err, seconds, "OUTPUT", "local path")


def test_remote_without_the_connect_client_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CPython 3.15 the spark extra leaves Connect's client out (zstandard
    has no wheel there): --remote says what to install, before Spark."""
    import importlib.util
    import socket

    from tickwheel.spark import _remote
    from tickwheel.spark.validate import ReplayUsageError

    client = {"grpc", "grpc_status", "google.protobuf", "zstandard"}
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in client else real(name, *a),
    )
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"sc://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(ReplayUsageError, match=r"grpc is not .*pyspark\[connect\]"):
            _remote.check_remote(url, str(tmp_path / "o"))
