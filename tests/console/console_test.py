#!/usr/bin/env python3
"""Browser test of the web console (admin/console/, served by the service under /admin/console/).

Starts its own redis-server (a free loopback port, a temporary directory; never 6379) and
keel-orders with an admin token, brings orders into every state over HTTP (waiting for
payment, completed, cancelled, failed, and parked: paid orders woken under keel-orders-renamed,
whose dispatch step has another name, park on the journal mismatch), then drives headless
Chromium through python3-selenium as an operator would:

  a wrong token is refused with a clear message; the right one opens the overview (parked and
  failed counts as links); the list shows every state, keeps its filter and scroll position
  while it refreshes; filtered to parked, it lists the three parked orders; one opens with its
  journal timeline (steps, signal, race winner, the parked mark) and table; an action the API
  refuses shows the API's error in the dialog; Resume, confirmed, runs it to completion under
  the fixed binary; a signal (path, no payload, key) and a cancellation, each confirmed, finish
  two orders waiting for payment; the pages fit a phone-width screen; the skip link comes first
  on Tab and moves the focus to the content.

The browser log must hold no SEVERE entry, except the network errors the test provokes on
purpose (the 401s of the wrong token, the 400 of the refused retry). Screenshots of the list
and the instance page (1280 px wide) are written to --out, and also to $KEEL_CONSOLE_SCREENSHOTS
when set (relative to --source-dir), which is how docs/console/ is refreshed:

  KEEL_CONSOLE_SCREENSHOTS=docs/console ctest --test-dir build -R console.browser

Registered by tests/console/CMakeLists.txt, which passes every path on the command line.
"""

import argparse
import json
import os
import shutil
import signal
import socket
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
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

TOKEN = "console-test-token-5d1e"
FULFILLMENT = "/order/:order/fulfillment"
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


class OrdersService:
    """keel-orders (or its renamed build) on a fixed port, its output in a log file."""

    def __init__(self, directory, port, redis_url):
        self.directory = directory
        self.port = port
        self.redis_url = redis_url
        self.proc = None
        self.log_path = os.path.join(directory, "service.log")
        # The test's own KEEL_* variables must not change what the service does.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}

    def start(self, binary):
        with open(self.log_path, "ab") as out:
            out.write(f"[test] starting {binary}\n".encode())
            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--host", "127.0.0.1", "--redis",
                 self.redis_url, "--admin-token", TOKEN, "--threads", "2", "--log-level", "warn"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env)
        wait_for(f"{os.path.basename(binary)} to be ready", self.ready, timeout=20)

    def ready(self):
        check(self.proc.poll() is None, f"the service exited; log: {self.log_path}")
        return http("GET", self.url("/readyz"))[0] == 200

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
        return f"http://127.0.0.1:{self.port}{path}"

    def tail(self, n=60):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def http(method, url, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            text = res.read().decode()
            return res.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


# ---- the orders' states, over HTTP ----

def create_order(svc, order):
    status, body = http("POST", svc.url("/orders"), {
        "id": order, "email": f"{order}@example.com", "address": "1 Harbour Road", "total": 42.5})
    check(status in (200, 201), f"POST /orders {order}: {status} {body}")


def webhook(svc, name, body):
    status, answer = http("POST", svc.url(f"/webhooks/{name}"), body)
    check(status == 200, f"POST /webhooks/{name} {body}: {status} {answer}")


def admin(svc, method, path, body=None):
    return http(method, svc.url(f"/admin/{path}"), body, token=TOKEN)


def instance_of(svc, order):
    status, body = admin(svc, "GET", f"instances/order/{order}/fulfillment")
    return body if status == 200 else None


def wait_state(svc, order, predicate, what):
    return wait_for(f"order {order} to be {what}",
                    lambda: predicate(instance_of(svc, order) or {}), timeout=20)


def prepare_orders(svc, renamed_binary, carrier_down_binary, orders_binary):
    """Orders in every state; p-1..p-3 parked by a deploy that broke their replay."""
    parked = ["p-1", "p-2", "p-3"]
    for order in parked + ["d-1"]:
        create_order(svc, order)
        webhook(svc, "payment", {"orderId": order, "transactionId": f"tx-{order}", "amount": 42.5})
    for order in ["w-1", "w-2", "x-1", "c-1", "f-1"]:
        create_order(svc, order)
    status, body = http("POST", svc.url("/users"), {"id": "u-1", "email": "u-1@example.com"})
    check(status in (200, 201), f"POST /users: {status} {body}")
    for order in parked + ["d-1"]:
        wait_state(svc, order, lambda j: any(w["path"].endswith("/delivered")
                                             for w in j.get("waits", [])),
                   "waiting for delivery")
    webhook(svc, "delivered", {"orderId": "d-1"})
    webhook(svc, "payment-failed", {"orderId": "x-1"})
    wait_state(svc, "c-1", lambda j: j.get("status") == "suspended", "suspended")
    status, body = admin(svc, "POST", "cancel/order/c-1/fulfillment", {})
    check(status == 200, f"cancel c-1: {status} {body}")
    for order, want in [("d-1", "completed"), ("x-1", "completed"), ("c-1", "cancelled"),
                        ("f-1", "suspended"), ("w-1", "suspended"), ("w-2", "suspended")]:
        wait_state(svc, order, lambda j, want=want: j.get("status") == want, want)

    # A flow that fails: f-1 paid while a build whose carrier is down runs (its dispatch
    # fails twice, and the flow with it).
    svc.stop()
    svc.start(carrier_down_binary)
    webhook(svc, "payment", {"orderId": "f-1", "transactionId": "tx-f-1", "amount": 42.5})
    wait_state(svc, "f-1", lambda j: j.get("status") == "failed", "failed")

    # The deploy whose dispatch step has another name: the deliveries wake the paid orders,
    # their replay meets the renamed step, and they park.
    svc.stop()
    svc.start(renamed_binary)
    for order in parked:
        webhook(svc, "delivered", {"orderId": order})
    for order in parked:
        wait_state(svc, order, lambda j: j.get("status") == "parked", "parked")
    svc.stop()
    svc.start(orders_binary)  # the fix
    status, stats = admin(svc, "GET", "stats")
    check(status == 200 and stats["total"]["parked"] == 3, f"stats: {status} {stats}")
    log(f"orders ready: {stats['total']}")


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


def rows(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#instances tbody tr[data-id]")


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


def fits_width(driver):
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth + 1")


def run(args, directory):
    redis = RedisServer(args.redis_server, directory)
    svc = OrdersService(directory, free_port(), redis.url)
    driver = None
    try:
        svc.start(args.orders)
        prepare_orders(svc, args.renamed, args.carrier_down, args.orders)

        shots = [args.out]
        extra = os.environ.get("KEEL_CONSOLE_SCREENSHOTS")
        if extra:
            shots.append(extra if os.path.isabs(extra) else os.path.join(args.source_dir, extra))

        driver = browser(args.chromium, args.chromedriver, directory)
        console = BrowserLog(driver)

        def wait(what, predicate, timeout=20):
            return wait_for(what, lambda: predicate(driver), timeout)
        base = svc.url("/admin/console/")

        # -- a wrong token is refused, plainly
        log("wrong token")
        driver.get(base)
        wait("the token form", lambda d: visible(d, "#token-input"))
        check(not driver.find_element(By.ID, "main").is_displayed(),
              "the view shows without a token")
        driver.find_element(By.ID, "token-input").send_keys("not-the-token", Keys.ENTER)
        message = wait("the token message", lambda d: visible(d, "#token-message"))
        check("Token refused" in message.text and "401" in message.text,
              f"token message: {message.text!r}")
        check(visible(driver, "#token-form") is not None, "the token form is gone after a 401")
        console.check("the wrong token", allowed_statuses=(401,))

        # -- the right token: the overview, parked and failed as links
        log("overview")
        driver.find_element(By.ID, "token-input").send_keys(TOKEN, Keys.ENTER)
        attention = wait("the overview", lambda d: visible(d, "#overview .attention"))
        links = {a.text: a.get_attribute("href") for a in attention.find_elements(By.TAG_NAME, "a")}
        check("3 parked" in links and "1 failed" in links, f"attention links: {links}")
        check(driver.find_elements(By.CSS_SELECTOR, ".definition .bars li"),
              "no status bars on the overview")
        check(FULFILLMENT in text_of(driver, "#overview"), "the fulfilment definition is missing")
        workers = wait("the workers", lambda d: visible(d, "#overview .workers"))
        worker_rows = [r.text for r in workers.find_elements(By.CSS_SELECTOR, "tbody tr")]
        check(any(FULFILLMENT in r and r.split()[-1] == "1" for r in worker_rows),
              f"the worker running the fulfilment's version 1 is missing: {worker_rows}")
        console.check("the overview")

        # -- the list: every state, newest first; live refresh keeps filter and scroll
        log("list")
        driver.find_element(By.ID, "nav-instances").click()
        wait("the list of 10", lambda d: len(rows(d)) == 10)
        statuses = {r.find_element(By.CSS_SELECTOR, ".status").text.split()[-1]
                    for r in rows(driver)}
        check(statuses == {"parked", "suspended", "completed", "cancelled", "failed"},
              f"statuses listed: {statuses}")
        check(rows(driver)[0].get_attribute("data-id") == "verify/u-1/email",
              f"newest first: the first row is {rows(driver)[0].get_attribute('data-id')}")
        screenshot(driver, "list.png", shots)
        driver.set_window_size(1280, 420)
        driver.find_element(By.ID, "filter-prefix").send_keys("order/")
        driver.find_element(By.ID, "filter-prefix").send_keys(Keys.ENTER)
        wait("the prefix filter to apply",
             lambda d: "prefix=order%2F" in d.current_url and len(rows(d)) == 9)
        driver.execute_script("window.scrollTo(0, 260)")
        scrolled = driver.execute_script("return window.scrollY")
        check(scrolled > 100, f"the list does not scroll at 420 px high ({scrolled})")
        before = driver.find_element(By.ID, "updated").get_attribute("data-at")
        wait("the next refresh",
             lambda d: d.find_element(By.ID, "updated").get_attribute("data-at") != before)
        check(driver.execute_script("return window.scrollY") == scrolled,
              "the refresh moved the scroll position")
        check(driver.find_element(By.ID, "filter-prefix").get_attribute("value") == "order/",
              "the refresh lost the filter")
        check(len(rows(driver)) == 9, "the refresh changed the rows")
        driver.set_window_size(1280, 900)
        console.check("the list")

        # -- filtered to parked
        log("filter to parked")
        driver.get(base + "#/instances")
        wait("the list of 10", lambda d: len(rows(d)) == 10)
        Select(driver.find_element(By.ID, "filter-status")).select_by_value("parked")
        driver.find_element(By.CSS_SELECTOR, "#filter button[type=submit]").click()
        wait("the parked filter to apply",
             lambda d: "status=parked" in d.current_url and len(rows(d)) == 3)
        ids = sorted(r.get_attribute("data-id") for r in rows(driver))
        check(ids == [f"order/p-{i}/fulfillment" for i in (1, 2, 3)], f"parked rows: {ids}")
        check(all(r.find_element(By.CSS_SELECTOR, ".status").text.endswith("parked")
                  for r in rows(driver)), "a listed row is not parked")
        console.check("the parked filter")

        # -- one parked order: why, and its journal as a timeline and a table
        log("instance page")
        driver.find_element(By.LINK_TEXT, "order/p-1/fulfillment").click()
        wait("the parked instance page",
             lambda d: visible(d, "#instance-status")
             and d.find_element(By.ID, "instance-status").text.endswith("parked"))
        reason = text_of(driver, "#instance-reason")
        check("hand to carrier" in reason and "dispatch" in reason, f"parked by: {reason!r}")
        svg = wait("the timeline", lambda d: visible(d, "svg.timeline"))
        count = lambda css: len(svg.find_elements(By.CSS_SELECTOR, css))
        check(count("rect.bar-done") >= 2, "the timeline has no step bars")
        check(count("polygon.mark-signal") >= 1, "the timeline has no signal mark")
        check(count("polygon.mark-race") >= 1 and count(".winner") >= 1,
              "the timeline shows no race and winner")
        check(count("rect.mark-parked") == 1, "the timeline does not mark the parking")
        lanes = [t.text for t in svg.find_elements(By.CSS_SELECTOR, ".lane-text")]
        check("record payment" in lanes and "dispatch" in lanes, f"timeline lanes: {lanes}")
        journal = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#journal tbody tr")]
        check(len(journal) >= 4 and any("won" in r for r in journal), f"journal rows: {journal}")
        console.check("the parked instance")

        # -- an action the API refuses: its error, in the dialog
        log("refused retry")
        driver.find_element(By.ID, "action-retry").click()
        wait("the retry dialog",
             lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None)
        entry = driver.find_element(By.CSS_SELECTOR, "#confirm-body input[type=number]")
        entry.clear()
        entry.send_keys("999")
        driver.find_element(By.ID, "confirm-ok").click()
        problem = wait("the refused retry's problem", lambda d: visible(d, "#confirm-problem"))
        check(problem.text.startswith("400 "), f"the refusal shown: {problem.text!r}")
        driver.find_element(By.ID, "confirm-cancel").click()
        wait("the dialog to close",
             lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is None)
        console.check("the refused retry", allowed_statuses=(400,))

        # -- resume it, confirmed; the fixed binary runs it to the end
        log("resume")
        driver.find_element(By.ID, "action-resume").click()
        wait("the resume dialog",
             lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None)
        check("Resume" in text_of(driver, "#confirm-title"), "the dialog is not the resume's")
        driver.find_element(By.ID, "confirm-ok").click()
        notice = wait("the notice", lambda d: visible(d, "#notice"))
        check("Resumed order/p-1/fulfillment" in notice.text, f"notice: {notice.text!r}")
        wait("the resumed order to complete",
             lambda d: d.find_element(By.ID, "instance-status").text.endswith("completed"), 25)
        wait("the mark delivered lane",
             lambda d: "mark delivered" in [
                 t.text for t in d.find_elements(By.CSS_SELECTOR, "svg.timeline .lane-text")])
        check(instance_of(svc, "p-1")["status"] == "completed", "the API disagrees: not completed")
        check(not driver.find_element(By.ID, "action-resume").is_enabled(),
              "Resume is still offered on a completed instance")
        time.sleep(0.3)
        screenshot(driver, "instance.png", shots, full_page=True)
        console.check("the resume")

        # -- a signal, then a cancellation, each confirmed, on orders waiting for payment
        log("signal and cancel")
        driver.get(base + "#/instance/" + "order%2Fw-1%2Ffulfillment")
        wait("the waiting order", lambda d: visible(d, "#action-signal"))
        driver.find_element(By.ID, "action-signal").click()
        wait("the signal dialog",
             lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None)
        inputs = driver.find_elements(By.CSS_SELECTOR, "#confirm-body input[type=text]")
        path, key = inputs[0], inputs[1]
        check(path.get_attribute("value") == "/payment/w-1/received",
              f"the path is not the awaited signal's: {path.get_attribute('value')!r}")
        path.clear()
        path.send_keys("/payment/w-1/failed")
        driver.find_element(By.CSS_SELECTOR, "#confirm-body textarea").clear()
        key.send_keys("console-test-1")
        driver.find_element(By.ID, "confirm-ok").click()
        notice = wait("the signal's notice", lambda d: visible(d, "#notice"))
        check("/payment/w-1/failed stored" in notice.text, f"notice: {notice.text!r}")
        wait("the signalled order to complete",
             lambda d: d.find_element(By.ID, "instance-status").text.endswith("completed"))
        check(instance_of(svc, "w-1")["result"] == {"status": "payment_failed"},
              f"w-1: {instance_of(svc, 'w-1')}")
        driver.get(base + "#/instance/" + "order%2Fw-2%2Ffulfillment")
        wait("the other waiting order", lambda d: visible(d, "#action-cancel")
             and "w-2" in d.find_element(By.ID, "instance-id").text)
        driver.find_element(By.ID, "action-cancel").click()
        wait("the cancel dialog",
             lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None)
        driver.find_element(By.ID, "confirm-ok").click()
        wait("the order to be cancelled",
             lambda d: d.find_element(By.ID, "instance-status").text.endswith("cancelled"))
        console.check("the signal and the cancellation")

        # -- a phone-width screen and the keyboard
        log("phone width and keyboard")
        driver.set_window_size(390, 844)
        driver.get(base + "#/instances?status=completed")
        wait("the completed list", lambda d: len(rows(d)) >= 3)
        check(fits_width(driver), "the list is wider than a phone screen")
        driver.get(base + "#/instance/" + "order%2Fp-1%2Ffulfillment")
        wait("the timeline on a phone", lambda d: visible(d, "svg.timeline"))
        check(fits_width(driver), "the instance page is wider than a phone screen")
        driver.set_window_size(1280, 900)
        driver.get(base + "#/")
        driver.refresh()  # a fresh page: the focus starts at the top
        wait("the overview again", lambda d: visible(d, "#overview .attention"))
        ActionChains(driver).send_keys(Keys.TAB).perform()
        active = driver.switch_to.active_element
        check(active.get_attribute("class") == "skip", "the skip link is not first on Tab")
        active.send_keys(Keys.ENTER)
        check(driver.switch_to.active_element.get_attribute("id") == "main",
              "the skip link does not move the focus to the content")
        console.check("the phone and keyboard checks")
        severe = [e for e in console.seen if e.get("level") == "SEVERE"]
        log(f"browser log: {len(console.seen)} entries, {len(severe)} SEVERE (all provoked: "
            + "; ".join(e.get("message", "")[-60:] for e in severe) + ")")
        check(severe, "the provoked 401 and 400 did not reach the browser log: is it collected?")
    except Exception:
        if driver is not None:
            try:
                os.makedirs(args.out, exist_ok=True)
                driver.save_screenshot(os.path.join(args.out, "failure.png"))
                with open(os.path.join(args.out, "failure.html"), "w") as f:
                    f.write(driver.page_source)
                print(f"page at failure: {driver.current_url}; see {args.out}/failure.png",
                      file=sys.stderr)
            except WebDriverException:
                pass
        print("----- service log (tail) -----\n" + svc.tail(), file=sys.stderr)
        raise
    finally:
        if driver is not None:
            driver.quit()
        svc.stop()
        redis.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", required=True, help="keel-orders")
    parser.add_argument("--renamed", required=True, help="keel-orders-renamed")
    parser.add_argument("--carrier-down", required=True, help="keel-orders-carrier-down")
    parser.add_argument("--redis-server", required=True)
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--chromedriver", required=True)
    parser.add_argument("--out", required=True, help="where the screenshots go (the build dir)")
    parser.add_argument("--source-dir", required=True, help="resolves KEEL_CONSOLE_SCREENSHOTS")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="keel-console-")
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
    log("console browser test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
