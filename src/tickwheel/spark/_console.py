"""What the user sees of Spark: its log in a file, its progress bar in a terminal only.

Why: Spark's driver prints its startup banner, WARN lines and, on a
failure, Java stack traces of hundreds of lines to the console, and its
progress bar leaves ``[Stage 3:=====>   (2 + 2) / 5]`` fragments in a log
that is not a terminal.  Unless ``--verbose``:

* Spark's log4j output goes to a file (``spark.log`` in a temp directory,
  named in the error message if the job fails, deleted otherwise);
* when stderr is not a terminal (CI logs, ``| tee``), the JVM's whole
  stderr goes to that file too (what its launcher and the Python workers
  print), and the progress bar is off;
* in a terminal the JVM's stderr goes through a pipe: the progress bar is
  passed on, everything else (the launcher's "Using incubator modules"
  line, say) goes to the log;
* the engine's per-worker "accelerated" line is not printed on ``local``
  masters (the stage line reports the same); executors of a cluster write
  it to their own logs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
"""


@dataclass
class SparkConsole:
    """Where Spark's output goes for one run; ``conf`` goes to the session builder."""

    verbose: bool
    tty: bool
    log_dir: str | None = None
    conf: dict[str, str] = field(default_factory=dict)

    @property
    def log_path(self) -> str | None:
        return os.path.join(self.log_dir, "spark.log") if self.log_dir else None

    @property
    def progress(self) -> bool:
        return self.tty

    def close(self, keep_log: bool) -> None:
        """Delete the log unless it is wanted (after an error)."""
        if self.log_dir and not keep_log:
            shutil.rmtree(self.log_dir, ignore_errors=True)


def spark_console(
    verbose: bool, user_conf: dict[str, str], master: str = "local[*]"
) -> SparkConsole:
    """The console set-up for this run (see the module docstring).

    On a cluster (a master that is not ``local``) the executors keep their
    "accelerated" log line: it is in their own logs, not on this console.
    """
    console = SparkConsole(verbose, sys.stderr.isatty())
    if verbose:
        return console
    console.log_dir = tempfile.mkdtemp(prefix="tickwheel-replay-")
    config = os.path.join(console.log_dir, "log4j2.properties")
    with open(config, "w") as fh:
        fh.write(_LOG4J.format(path=console.log_path))
    key = "spark.driver.extraJavaOptions"
    option = f"-Dlog4j2.configurationFile=file:{config}"
    console.conf[key] = (user_conf.get(key, "") + " " + option).strip()
    # Python workers, local ones included, get spark.executorEnv.* settings.
    if master.startswith("local"):
        console.conf["spark.executorEnv.TICKWHEEL_ENGINE_QUIET"] = "1"
    return console


def _is_bar(piece: bytes) -> bool:
    """Whether a piece of the stream is (the start of) Spark's bar.

    The bar is ``\\r[Stage 3:==>   (2 + 2) / 5]``, cleared with ``\\r`` and
    spaces; a piece cut short by a read counts if it could still be one.
    """
    if not piece.startswith(b"\r") or b"\n" in piece:
        return False
    rest = piece[1:]
    return b"[Stage ".startswith(rest[:7]) or not rest.strip(b" ")


def relay(read_fd: int, log_path: str, terminal_fd: int) -> None:
    """Copy the JVM's stderr: the progress bar to the terminal, the rest to the log.

    The stream is cut before every ``\\r`` and after every newline.  A
    piece that may be the bar passes at once, even cut short by a read; if
    its continuation shows it is not, the rest goes to the log.
    """
    current = b""  # the bar piece passed on so far (empty: none open)
    with open(log_path, "ab") as log:
        while chunk := os.read(read_fd, 1 << 16):
            for new in re.split(rb"(?=\r)|(?<=\n)", chunk):
                piece = new if new.startswith(b"\r") else current + new
                if _is_bar(piece):
                    os.write(terminal_fd, new)
                    current = piece
                elif current and not new.startswith(b"\r"):
                    log.write(new)  # what looked like a bar goes on as text
                    current = b""
                elif new.startswith(b"\r"):
                    os.write(terminal_fd, b"\r")  # a carriage return ends a bar
                    log.write(new[1:])
                    current = b""
                else:
                    log.write(new)
            log.flush()
    os.close(read_fd)
    os.close(terminal_fd)


@contextlib.contextmanager
def jvm_stderr(console: SparkConsole) -> Iterator[None]:
    """While the JVM starts, point file descriptor 2 away from the user.

    The JVM and the Python workers it forks keep that descriptor, so
    nothing they print reaches the user; this process gets its stderr back.
    Without a terminal it is the log file; in one, a pipe that a thread
    (:func:`relay`) reads, passing only the progress bar on.
    """
    if console.verbose or console.log_path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    if console.tty:
        read_fd, target = os.pipe()
        terminal = os.dup(2)
        threading.Thread(
            target=relay,
            args=(read_fd, console.log_path, terminal),
            name="tickwheel-spark-stderr",
            daemon=True,
        ).start()
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        target = os.open(console.log_path, flags, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
