"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol with websocket-client
(already in .venv-airflow: no browser driver package, no browser download).

Only what the stack tests need: open a page, type into inputs, click, wait for text, screenshot.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, width: int = 1600, height: int = 1000) -> None:
        if CHROMIUM is None:
            raise RuntimeError(
                "chromium not installed (Debian package chromium; infra/ci/install-servers.sh)"
            )
        self.profile = Path(tempfile.mkdtemp(prefix="ranker-chromium-"))
        self.log = open(self.profile / "chromium.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",  # root in CI; the pages are our own servers
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        port = self._devtools_port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            page = next(t for t in json.loads(resp.read()) if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self._id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _devtools_port(self, timeout: float = 30.0) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chromium exited ({self.proc.returncode}): see {self.profile / 'chromium.log'}"
                )
            if marker.is_file() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            time.sleep(0.1)
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        call_id = self._id
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", what=f"load {url}")

    def wait_for(self, condition: str, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.evaluate(f"Boolean({condition})"):
                    return
            except RuntimeError:
                pass  # the page is navigating
            time.sleep(0.25)
        raise TimeoutError(f"browser: timed out waiting to {what}")

    def wait_for_text(self, text: str, timeout: float = 60.0) -> None:
        self.wait_for(
            f"document.body && document.body.innerText.includes({json.dumps(text)})", f"see {text!r}", timeout
        )

    def type_into(self, selector: str, value: str) -> None:
        """Set an input the way typing does (React listens to input events, not to .value)."""
        self.evaluate(
            f"""(() => {{
              const el = document.querySelector({json.dumps(selector)});
              const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
              setter.call(el, {json.dumps(value)});
              el.dispatchEvent(new Event('input', {{bubbles: true}}));
            }})()"""
        )

    def click(self, selector: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    def cookies(self) -> list[dict[str, Any]]:
        return list(self.call("Network.getAllCookies").get("cookies", []))

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)
