"""The SparkSession pruner runs on: the active one, or a local one started for it."""

from __future__ import annotations

import os
import shutil
import sys
import threading

from pyspark.sql import SparkSession

from pruner.adapters.spark.datasource import register_source
from pruner.errors import EngineError

__all__ = ["SESSION_CONFIG", "session"]

_session: SparkSession | None = None
_session_lock = threading.Lock()

SESSION_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.driver.memory": "4g",
}
"""Settings of the session :func:`session` starts when there is none."""


def session(master: str | None = None) -> SparkSession:
    """The active SparkSession, or a local one started now (``local[*]`` unless ``master``
    says otherwise); the ``pruner`` data source is registered on it.

    A session that is already active is never stopped: Spark runs one SparkContext per
    process, so a ``master`` other than the active session's is an error.

    Raises:
        EngineError: no Java, the session could not start, or another session is active.
    """
    global _session
    with _session_lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            running = active.sparkContext.master
            if master is not None and running != master:
                raise EngineError(
                    f"a SparkSession with master {running!r} is already active and Spark runs "
                    f"one per process: pruner will not stop it to start {master!r}; call "
                    "session() without a master to use it, or stop it yourself first"
                )
            register_source(active)
            return active
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise EngineError(
                "Spark needs Java 17 or newer: install a JDK (for example "
                "'apt install openjdk-17-jre-headless') or set JAVA_HOME"
            )
        builder = SparkSession.builder.master(master or "local[*]").appName("pruner")
        for key, value in SESSION_CONFIG.items():
            builder = builder.config(key, value)
        # Python workers must be this interpreter, which has pruner and its dependencies
        # (Python data sources start theirs from the environment, not from the config).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        try:
            _session = builder.getOrCreate()
        except Exception as err:
            raise EngineError(f"Spark could not start a session: {err}".splitlines()[0]) from err
        _session.sparkContext.setLogLevel("ERROR")
        register_source(_session)
        return _session
