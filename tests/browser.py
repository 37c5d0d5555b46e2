"""A real (headless) Chromium for the tests: one-shot runs (a page's DOM, a screenshot) and a page
driven over the DevTools protocol, for pages whose content comes later than the load event (the docs
site's search, which runs in a web worker and so needs the page served over HTTP)."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

#: Flags for a root user on a closed network (env notes: no sandbox, no background connections).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip
CHROMIUM_TIMEOUT_S = 120
#: Where screenshots are kept for people to look at (CI keeps the folder as an artifact; the docs'
#: pictures in docs/*.png are copied from there).
ARTIFACTS = Path(os.environ.get("CHAKRA_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts"))
#: With --remote-debugging-pipe, Chromium reads protocol messages on fd 3 and writes replies on fd 4.
PIPE_IN_FD, PIPE_OUT_FD = 3, 4


def chromium_binary() -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed: run scripts/system_deps.sh (make does)")
    return binary


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """One headless run (``--dump-dom URL``, ``--screenshot=PNG URL``) with a throwaway profile."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=CHROMIUM_TIMEOUT_S,
        )


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """``folder`` served over HTTP on a free local port; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class BrowserPage:
    """One page of a headless Chromium, driven over the DevTools protocol through a pipe.

    ``with BrowserPage(url) as page: page.wait_for("document.title")`` polls a JavaScript expression
    until it is truthy; ``page.screenshot(png)`` saves what the window shows.
    """

    def __init__(self, url: str, *, width: int = 1280, height: int = 900) -> None:
        self.url = url
        self.window = f"--window-size={width},{height}"
        self._last_id = 0
        self._pending = b""

    def __enter__(self) -> BrowserPage:
        self._profile = tempfile.TemporaryDirectory(ignore_cleanup_errors=True)
        commands_read, self._commands = os.pipe()
        self._replies, replies_written = os.pipe()

        def give_chromium_its_pipes() -> None:
            # dup first: os.pipe's descriptors close on exec, and dup2 onto the same number keeps that
            read_end, write_end = os.dup(commands_read), os.dup(replies_written)
            os.dup2(read_end, PIPE_IN_FD)
            os.dup2(write_end, PIPE_OUT_FD)

        self._process = subprocess.Popen(
            [chromium_binary(), *CHROMIUM_FLAGS, "--remote-debugging-pipe", self.window,
             f"--user-data-dir={self._profile.name}"],
            preexec_fn=give_chromium_its_pipes, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(commands_read)
        os.close(replies_written)
        target = self._send("Target.createTarget", {"url": self.url})["targetId"]
        self._session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._send("Browser.close", {})
            self._process.wait(timeout=10)
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._profile.cleanup()

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-like values only)."""
        reply = self._send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page=True)
        if "exceptionDetails" in reply:
            raise AssertionError(f"{expression!r} threw in the page: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = 60.0) -> Any:
        """Poll ``expression`` until it is truthy; its value, or an AssertionError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{expression!r} still {value!r} after {timeout_s} s on {self.url}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> Path:
        """What the window shows, as a PNG."""
        shot = self._send("Page.captureScreenshot", {"format": "png"}, page=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def _send(self, method: str, params: dict[str, Any], *, page: bool = False) -> dict[str, Any]:
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params}
        if page:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + CHROMIUM_TIMEOUT_S
        while True:
            reply = json.loads(self._next_message(deadline))
            if reply.get("id") == self._last_id:
                if "error" in reply:
                    raise AssertionError(f"Chromium refused {method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result

    def _next_message(self, deadline: float) -> bytes:
        while b"\0" not in self._pending:
            if not select.select([self._replies], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise AssertionError(f"Chromium did not answer in {CHROMIUM_TIMEOUT_S} s")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise AssertionError(f"Chromium exited (code {self._process.poll()})")
            self._pending += chunk
        message, self._pending = self._pending.split(b"\0", 1)
        return message
