"""A forwarding TCP proxy that adds a fixed delay to every HTTP request and counts the traffic:
a local S3 server (moto, on 127.0.0.1) made to answer like a store some milliseconds away.

Why a proxy and not a client setting: every client under test (obstore, Lance, DuckDB through
fsspec, DataFusion, boto3) talks HTTP/1.1 to one endpoint, and none can be told to wait. A
delay added at the one place all requests pass is the same for all of them, and so is the
count: what a store bills (requests) and what it sends (bytes) are measured where they
happen, not as each client reports them.

How a request is seen: on each connection, a client->server chunk that starts with a request
line (``GET /key HTTP/1.1``...) while the connection waits for a request (at its start, or once
the server has answered the previous one) opens a request; it is delayed by the delay set at
that moment, then forwarded. A request's body (a PUT's, arriving in later chunks before any
answer) is never mistaken for a request: it arrives while the connection waits for an answer,
and it has no request line. The delay is per request, not per connection: parallel requests
on parallel connections cost one delay between them, as they would on a real network. Both
sockets have ``TCP_NODELAY`` (Nagle's algorithm would otherwise hold small writes ~40 ms).
Every request is logged (method, target, Range header, bytes each way), so a caller can say
what a call read: :meth:`DelayProxy.mark` before it, :meth:`DelayProxy.since` after.

Only what the benchmark needs: HTTP/1.1 without pipelining (each client waits for an answer
before its next request on a connection), plain TCP (no TLS), one proxy per server.
:class:`DelayedS3` runs moto and the proxy in a child process.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUEST_LINE = re.compile(rb"(GET|PUT|HEAD|POST|DELETE|OPTIONS|PATCH) (\S+) HTTP/1\.[01]\r\n")
RANGE_HEADER = re.compile(rb"\r\nrange: *([^\r]*)\r\n", re.IGNORECASE)
CHUNK = 1 << 20


@dataclass
class Request:
    """One request as the proxy forwarded it: its method and target (``/bucket/key?query``),
    the bytes it sent (request line, headers, body) and the bytes of its answer."""

    method: str
    target: str
    range: str = ""  # its Range header, if any (``bytes=-65536``: a suffix, a footer's read)
    bytes_up: int = 0
    bytes_down: int = 0
    at: float = 0.0  # when it arrived (time.time(), this machine's clock)


class _Connection:
    """One client connection and its upstream connection; whether it waits for a request,
    and the request it carries (the one bytes are counted to)."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.awaiting_request = True
        self.current = Request("", "")  # bytes before the first request line: none expected

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class DelayProxy:
    """Listens on a free port of 127.0.0.1 and forwards to ``upstream`` (``host:port``),
    delaying each request by :attr:`delay` seconds (change it at any time)."""

    def __init__(self, upstream: tuple[str, int], delay: float = 0.0) -> None:
        self.upstream = upstream
        self.delay = delay
        self._lock = threading.Lock()
        self._log: list[Request] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.listen(256)
        host, port = self._listener.getsockname()[:2]
        self.endpoint = f"http://{host}:{port}"
        self._closed = False
        self._connections: set[_Connection] = set()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def mark(self) -> int:
        """Where the log of requests is now (for :meth:`since`)."""
        with self._lock:
            return len(self._log)

    def since(self, mark: int) -> list[Request]:
        """The requests forwarded since ``mark``, each with its bytes so far."""
        with self._lock:
            return [copy.copy(r) for r in self._log[mark:]]

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError as err:
                if self._closed:
                    return
                # a client that gave up before it was accepted (ECONNABORTED), or no file
                # descriptor left for now: the listener goes on (else every later request
                # would wait in the backlog for ever)
                print(f"proxy: accept failed ({err}); going on", file=sys.stderr, flush=True)
                time.sleep(0.01)
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = _Connection(client, server)
            with self._lock:
                self._connections.add(connection)
            threading.Thread(target=self._upstream, args=(connection,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(connection,), daemon=True).start()

    def _upstream(self, connection: _Connection) -> None:
        """Client -> server: each request delayed, then forwarded."""
        try:
            while chunk := connection.client.recv(CHUNK):
                if connection.awaiting_request:
                    opened = REQUEST_LINE.match(chunk)
                    if opened is not None:
                        connection.awaiting_request = False
                        method, target = opened.group(1, 2)
                        ranged = RANGE_HEADER.search(chunk)
                        connection.current = Request(
                            method.decode(),
                            target.decode(),
                            ranged.group(1).decode() if ranged else "",
                            at=time.time(),
                        )
                        with self._lock:
                            self._log.append(connection.current)
                        if self.delay > 0:
                            time.sleep(self.delay)
                with self._lock:
                    connection.current.bytes_up += len(chunk)
                connection.server.sendall(chunk)
        except OSError:
            pass
        finally:
            self._end(connection)

    def _downstream(self, connection: _Connection) -> None:
        """Server -> client: forwarded as it comes; an answer (its first byte) lets the
        connection's next client chunk open a request."""
        try:
            while chunk := connection.server.recv(CHUNK):
                connection.awaiting_request = True
                with self._lock:
                    connection.current.bytes_down += len(chunk)
                connection.client.sendall(chunk)
        except OSError:
            pass
        finally:
            self._end(connection)

    def _end(self, connection: _Connection) -> None:
        connection.close()
        with self._lock:
            self._connections.discard(connection)


# ------------------------------------------------------------------ in a process of its own


class DelayedS3:
    """moto's S3 server (``tests/support/s3.py``) behind a :class:`DelayProxy`, both in a
    child process, driven from this one: :attr:`endpoint` is the proxy's.

    Why another process: a client that blocks holding the GIL while it waits for the store
    (a Lance call did, in this benchmark) would otherwise stop the server answering it, for
    ever; and the clients' Python work would slow the server's down, and so the timings. A
    real store is elsewhere too.
    """

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        self.endpoint: str = self._call("endpoint")
        self._delay = 0.0

    def _call(self, *command: Any) -> Any:
        self._pipe.send(command)
        while not self._pipe.poll(1.0):
            if not self._process.is_alive():
                raise RuntimeError(
                    f"the store process ended (exit code {self._process.exitcode}) before "
                    f"answering {command[0]}"
                )
        status, value = self._pipe.recv()
        if status != "ok":
            raise RuntimeError(f"the store process failed on {command[0]}: {value}")
        return value

    @property
    def delay(self) -> float:
        """Seconds added to every request from now on."""
        return self._delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self._call("delay", seconds)
        self._delay = seconds

    def mark(self) -> int:
        return int(self._call("mark"))

    def since(self, mark: int) -> list[Request]:
        return list(self._call("since", mark))

    def new_bucket(self) -> str:
        """A new bucket (made through the proxy)."""
        return str(self._call("new_bucket"))

    def upload(self, local: Path, uri: str) -> None:
        """The file or folder ``local`` copied to ``uri`` by boto3, through the proxy."""
        self._call("upload", str(local), uri)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._call("stop")
        self._process.join(10)


class _Unread:
    """An object's bytes as moto's ranged GET sees them, read only where sliced."""

    def __init__(self, key: Any) -> None:
        self.key = key

    def __len__(self) -> int:
        return int(self.key.size)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(len(self))
        with self.key.lock:
            self.key._value_buffer.seek(start)
            return bytes(self.key._value_buffer.read(max(0, stop - start)))


def _serve_ranges_from_the_object() -> None:
    """moto answers a ranged GET by copying the whole object and slicing the copy: a 4 KiB
    range takes 6 ms from a 0.5 MB object and 35 ms from a 50 MB one. A real store's ranged
    GET costs the same whatever the object's size, so in the benchmark's server a GET with
    one Range reads just its range (any other GET, and anything moto does not slice,
    is read whole as before)."""
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    ranged = threading.local()
    whole = FakeKey.value

    def value(key: Any) -> Any:
        return _Unread(key) if getattr(ranged, "on", False) else whole.fget(key)

    FakeKey.value = property(value, whole.fset)  # type: ignore[method-assign,assignment]
    key_response = S3Response.key_response
    handle_range = S3Response._handle_range_header

    def one_range_read(self: Any, request: Any, full_url: str, headers: Any) -> Any:
        wanted = request.headers.get("range", "")
        ranged.on = request.method == "GET" and wanted.startswith("bytes=") and "," not in wanted
        try:
            answer = key_response(self, request, full_url, headers)
        finally:
            ranged.on = False
        if isinstance(answer, tuple) and isinstance(answer[-1], _Unread):
            return (*answer[:-1], answer[-1][:])  # not sliced after all: the whole object
        return answer

    def sliced(self: Any, request: Any, answer_headers: Any, body: Any) -> Any:
        status, answer_headers, body = handle_range(self, request, answer_headers, body)
        return status, answer_headers, body[:] if isinstance(body, _Unread) else body

    S3Response.key_response = one_range_read  # type: ignore[method-assign]
    S3Response._handle_range_header = sliced  # type: ignore[method-assign]


def _serve(pipe: Any) -> None:
    """The child process: moto and the proxy, and S3Server's helpers pointed at the proxy
    (so nothing talks to moto directly), answering :class:`DelayedS3`'s commands."""
    from tests.support.s3 import S3Server

    _serve_ranges_from_the_object()
    server = S3Server()
    host, port = server.endpoint.removeprefix("http://").rsplit(":", 1)
    proxy = DelayProxy((host, int(port)))
    via_proxy = copy.copy(server)
    via_proxy.endpoint = proxy.endpoint
    commands: dict[str, Callable[..., Any]] = {
        "endpoint": lambda: proxy.endpoint,
        "delay": lambda seconds: setattr(proxy, "delay", seconds),
        "mark": proxy.mark,
        "since": proxy.since,
        "new_bucket": via_proxy.new_bucket,
        "upload": lambda local, uri: via_proxy.upload(Path(local), uri),
        "stop": lambda: None,
    }
    while True:
        name, *arguments = pipe.recv()
        try:
            pipe.send(("ok", commands[name](*arguments)))
        except Exception as err:
            pipe.send(("error", repr(err)))
        if name == "stop":
            proxy.close()
            server.stop()
            return
