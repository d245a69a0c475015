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
import os
import sys
import time

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

# console_support.py sits beside this script: no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
from console_support import (TOKEN, BrowserLog, RedisServer, ServiceProcess, browser, check,
                             free_port, http, log, report_failure, run_test, screenshot, text_of,
                             visible, wait_for)

FULFILLMENT = "/order/:order/fulfillment"


class OrdersService(ServiceProcess):
    """keel-orders (or its renamed build) on a fixed port, its output in a log file."""

    def __init__(self, directory, port, redis_url):
        super().__init__(directory, port)
        self.redis_url = redis_url

    def start(self, binary):
        super().start([binary, "--port", str(self.port), "--host", "127.0.0.1", "--redis",
                       self.redis_url, "--admin-token", TOKEN, "--threads", "2",
                       "--log-level", "warn"])


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

def rows(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#instances tbody tr[data-id]")


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
        report_failure(driver, args.out, {"service": svc})
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
    return run_test(run, args, "keel-console-", "console browser test passed")

if __name__ == "__main__":
    sys.exit(main())
