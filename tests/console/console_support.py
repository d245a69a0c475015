"""What the console's browser tests share (console_test.py, console_children_test.py,
console_flow_control_test.py).

The checks and the waiting (log, check, wait_for), a free loopback port, a redis-server of
the test's own, a service binary on a fixed port with its output in a log file, JSON over
HTTP(S), headless Chromium through python3-selenium with its console log read phase by phase
(BrowserLog), the page helpers, and the scripts' common main(): a temporary directory kept
when the test fails, the page's screenshot and source when it failed in the browser.
"""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.by import By

TOKEN = "console-test-token-5d1e"
STARTED = time.monotonic()


def log(message):
    print(f"[{time.monotonic() - STARTED:6.2f}s] {message}", flush=True)


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def wait_for(what, predicate, timeout=15.0, interval=0.1):
    """Calls predicate until it returns a truthy value (returned) or timeout passes."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # a refused connection while a server restarts, a stale node
            last = e
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout:.0f}s waiting for {what}"
                          + (f" (last error: {last})" if last else ""))
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- processes ----

class RedisServer:
    def __init__(self, binary, directory):
        self.port = free_port()
        self.directory = directory
        self.log = open(os.path.join(directory, "redis.log"), "ab")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", directory,
             "--save", "", "--appendonly", "no", "--daemonize", "no"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for("redis-server to answer PING", self.ping, timeout=10)

    def ping(self):
        check(self.proc.poll() is None, "redis-server exited")
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class ServiceProcess:
    """A service binary on a fixed port, its output in <directory>/<log_name>; ready when
    GET /readyz answers 200 (over HTTPS trusting `cafile` when one is given)."""

    def __init__(self, directory, port, log_name="service.log", host="127.0.0.1", cafile=None):
        self.directory = directory
        self.port = port
        self.host = host
        self.cafile = cafile
        self.proc = None
        self.log_path = os.path.join(directory, log_name)
        # The test's own KEEL_* variables must not change what the service does.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}

    def start(self, command, timeout=20):
        """Runs `command` (the binary, then its arguments) and waits until it is ready."""
        binary = command[0]
        with open(self.log_path, "ab") as out:
            out.write(f"[test] starting {binary}\n".encode())
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env)
        wait_for(f"{os.path.basename(binary)} to be ready", self.ready, timeout=timeout)

    def ready(self):
        check(self.proc.poll() is None, f"the service exited; log: {self.log_path}")
        return http("GET", self.url("/readyz"), cafile=self.cafile)[0] == 200

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def url(self, path):
        scheme = "https" if self.cafile else "http"
        return f"{scheme}://{self.host}:{self.port}{path}"

    def tail(self, n=60):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def http(method, url, body=None, token=None, cafile=None):
    """(status, JSON body or text); an https:// URL trusts only `cafile` when given."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as res:
            text = res.read().decode()
            return res.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


# ---- the browser ----

def browser(chromium, chromedriver, directory):
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--hide-scrollbars", "--force-device-scale-factor=1",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--lang=en-US",
                f"--user-data-dir={os.path.join(directory, 'chromium-profile')}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = DriverService(executable_path=chromedriver,
                            log_output=os.path.join(directory, "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_window_size(1280, 900)
    return driver


class BrowserLog:
    """The browser's console, read phase by phase; SEVERE entries fail the test unless they
    are network errors the phase provokes on purpose."""

    def __init__(self, driver):
        self.driver = driver
        self.seen = []

    def check(self, phase, allowed_statuses=()):
        entries = self.driver.get_log("browser")
        self.seen.extend(entries)
        bad = []
        for e in entries:
            if e.get("level") != "SEVERE":
                continue
            message = e.get("message", "")
            if e.get("source") == "network" and any(
                    f"status of {code}" in message for code in allowed_statuses):
                continue
            bad.append(message)
        check(not bad, f"browser console errors during {phase}:\n  " + "\n  ".join(bad))


def text_of(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css).text


def visible(driver, css):
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0] if found and found[0].is_displayed() else None


def screenshot(driver, name, directories, full_page=False):
    size = driver.get_window_size()
    if full_page:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1280, min(max(height, 600), 3000))
        time.sleep(0.3)
    for directory in directories:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        check(driver.save_screenshot(path), f"screenshot {path} not written")
        log(f"screenshot {path}")
    driver.set_window_size(size["width"], size["height"])


def report_failure(driver, out, services):
    """After a failure: the page (screenshot and source, into `out`) and each service's log
    tail, on stderr. `services` maps a name to a ServiceProcess."""
    if driver is not None:
        try:
            os.makedirs(out, exist_ok=True)
            driver.save_screenshot(os.path.join(out, "failure.png"))
            with open(os.path.join(out, "failure.html"), "w") as f:
                f.write(driver.page_source)
            print(f"page at failure: {driver.current_url}; see {out}/failure.png",
                  file=sys.stderr)
        except WebDriverException:
            pass
    for name, svc in services.items():
        print(f"----- {name} log (tail) -----\n" + svc.tail(), file=sys.stderr)


def run_test(run, args, prefix, passed):
    """Runs run(args, directory) in a new temporary directory: removed when it passes, kept
    (and named) when it fails. The exit status."""
    directory = tempfile.mkdtemp(prefix=prefix)
    try:
        run(args, directory)
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        print(f"(temporary directory kept: {directory})", file=sys.stderr)
        return 1
    except Exception:  # Selenium's own errors, a crashed browser: the trace says where
        traceback.print_exc()
        print(f"FAILED (temporary directory kept: {directory})", file=sys.stderr)
        return 1
    shutil.rmtree(directory, ignore_errors=True)
    log(passed)
    return 0
