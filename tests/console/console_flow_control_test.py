#!/usr/bin/env python3
"""Browser test of the console's Queues and Schedules pages, against examples/billing.

The stack is console_children_test.py's (its own redis-server, keel-payments-sim over HTTPS
with a test CA, keel-billing with an admin token), except that a pending charge stays pending
for ten minutes and the daily report's calendar is one that does not tick during the test.
Over HTTP it creates customers and subscriptions so that invoices pass through the `charges`
queue (one admitted invoice at a time per customer: the partition): c-1's, paid at once,
passes through and completes; c-2's first invoice is admitted and waits for its pending
charge, holding the partition, so c-2's next two invoices wait. The admin API must show
that: one admitted, two waiting, partition c-2 with as many. Then headless Chromium, through
python3-selenium, as an operator would:

  Queues (the header's link): `charges` with its limits (at once, per partition, rate) and
  its admitted and waiting counts, equal to GET /admin/queues at that moment, and a third
  waiting invoice shows there without a reload (the page refreshes); the queue's
  page: the same counts and limits, its partitions as GET /admin/queues/charges has them,
  and a link to the queued instances, which list the waiting invoice; the waiting
  invoice's own page says `queued` and links to the queue.

  Schedules (the header's link): `daily-report` with its cron and zone, next tick, last
  tick, running, counts and its process's link, equal to GET /admin/schedules; Pause
  (confirmed) shows it paused, without a next tick, and the API agrees; Resume shows it
  active again with the API's next tick; Trigger now makes `started` grow by one, on the
  page and in the API, and the last result is the tick's instance (the schedule's newest
  child), with its status; a backfill with `to` before `from` keeps the dialog open with the
  API's 400 ("400 Bad Request: ...", as the API answers the same body); Delete asks first,
  and "Keep as it is" leaves the schedule as it was; a tick triggered through the API shows
  up on the page (it refreshes). At phone width (390 px) neither page
  scrolls sideways.

The browser log must hold no SEVERE entry other than the backfill's 400 (and the log is
checked to be collected). Registered by tests/console/CMakeLists.txt as console.flow_control,
which passes every path on the command line.
"""

import argparse
import sys
import time
import urllib.parse

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

# console_support.py and console_children_test.py sit beside this script: no __pycache__
# left in the source tree.
sys.dont_write_bytecode = True
from console_support import (TOKEN, BrowserLog, RedisServer, browser, check, free_port, http,
                             log, report_failure, run_test, text_of, visible, wait_for)
import console_children_test as stack

QUEUE = "charges"
SCHEDULE = "daily-report"
SCHEDULE_ID = f"keel/schedule/{SCHEDULE}"
# Once a year at 03:00 on the 2nd of January: no tick while the test runs.
REPORT_CRON = "0 0 3 2 1 *"
CARD_PAID = "4242424242424242"
CARD_PENDING = "4000000000000077"  # pending; succeeds by webhook after --pending-delay


def instance_hash(instance_id):
    return "#/instance/" + urllib.parse.quote(instance_id, safe="")


def admin(billing, path):
    status, body = http("GET", billing.url(f"/admin/{path}"), token=TOKEN)
    check(status == 200, f"GET /admin/{path}: {status} {body}")
    return body


def limit_text(value):
    """How the console writes a limit of the API (null: none)."""
    return "no limit" if value is None else str(value)


def rate_text(rate, per_ms):
    if rate is None:
        return "no limit"
    per = {1000: "second", 60000: "minute", 3600000: "hour"}.get(per_ms)
    check(per is not None, f"the test knows no such window: {per_ms} ms")
    return f"{rate} per {per}"


def api_queue(billing):
    queues = admin(billing, "queues")["queues"]
    found = [q for q in queues if q["name"] == QUEUE]
    check(len(found) == 1, f"GET /admin/queues has no single {QUEUE}: {queues}")
    return found[0]


def api_schedule(billing):
    schedules = admin(billing, "schedules")["schedules"]
    found = [s for s in schedules if s["name"] == SCHEDULE]
    check(len(found) == 1, f"GET /admin/schedules has no single {SCHEDULE}: {schedules}")
    return found[0]


# ---- the stack and its traffic ----

def subscribe(billing, customer, subscription, card):
    status, body = http("POST", billing.url("/customers"),
                        {"id": customer, "email": f"{customer}@example.com"})
    check(status in (200, 201), f"POST /customers {customer}: {status} {body}")
    status, body = http("POST", billing.url("/subscriptions"), {
        "id": subscription, "customer": customer, "plan": "basic", "card": card})
    check(status == 201, f"POST /subscriptions {subscription}: {status} {body}")


def fill_queue(billing):
    """c-1's invoice passes through the queue; c-2's first holds its partition (pending),
    the next two wait. Returns an invoice that waits."""
    subscribe(billing, "c-1", "s-1", CARD_PAID)
    wait_for("c-1's invoice to be paid", lambda: http(
        "GET", billing.url("/admin/instances/invoice/s-1/1"), token=TOKEN)[1].get(
            "status") == "completed", timeout=30)
    subscribe(billing, "c-2", "s-2", CARD_PENDING)
    wait_for("c-2's first invoice to wait for its pending charge", lambda: any(
        t["name"].startswith("pending") for t in http(
            "GET", billing.url("/admin/instances/invoice/s-2/1"), token=TOKEN)[1].get(
                "timers", [])), timeout=30)
    subscribe(billing, "c-2", "s-3", CARD_PAID)
    subscribe(billing, "c-2", "s-4", CARD_PAID)
    waiting = "invoice/s-3/1"
    q = wait_until_queue(billing, 1, 2)
    inst = admin(billing, f"instances/{waiting}")
    check(inst["status"] == "queued" and inst["queue"] == QUEUE, f"{waiting}: {inst}")
    one = admin(billing, f"queues/{QUEUE}")
    check([p for p in one["partitions"] if p["partition"] == "c-2"]
          == [{"partition": "c-2", "waiting": 2, "admitted": 1}],
          f"the queue's partitions: {one['partitions']}")
    log(f"queue {QUEUE}: {q}; partitions {one['partitions']}")
    return waiting


def wait_until_queue(billing, admitted, waiting):
    seen = []

    def there():
        seen[:] = [api_queue(billing)]
        return seen[0] if (seen[0]["admitted"], seen[0]["waiting"]) == (admitted, waiting) else None
    try:
        return wait_for(f"the queue to hold {admitted} admitted and {waiting} waiting invoices",
                        there, timeout=30)
    except Exception as e:
        raise type(e)(f"{e}; the queue last: {seen[0] if seen else None}") from None


# ---- reading the pages ----

def queue_rows(driver):
    """The Queues table as {name: {href, limits: [..], admitted, waiting}}."""
    table = driver.find_element(By.ID, "queues")
    heads = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    check(heads == ["Queue", "Limits", "Admitted", "Waiting"], f"the Queues columns: {heads}")
    rows = {}
    for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr"):
        link = tr.find_element(By.CSS_SELECTOR, "th a")
        cells = tr.find_elements(By.TAG_NAME, "td")
        rows[link.text] = {
            "href": link.get_attribute("href"),
            "limits": [li.text for li in cells[0].find_elements(By.TAG_NAME, "li")],
            "admitted": cells[1].text, "waiting": cells[2].text}
    return rows


def partition_rows(driver):
    rows = []
    for tr in driver.find_elements(By.CSS_SELECTOR, "#partitions tbody tr"):
        cells = tr.find_elements(By.CSS_SELECTOR, "th, td")
        if len(cells) == 3:
            rows.append([c.text for c in cells])
    return rows


def card(driver):
    return driver.find_element(By.CSS_SELECTOR, f"section.schedule[data-schedule='{SCHEDULE}']")


def role(node, name):
    return node.find_element(By.CSS_SELECTOR, f"[data-role='{name}']")


def card_state(driver):
    """The schedule's card as the page shows it."""
    c = card(driver)
    state = c.find_element(By.CSS_SELECTOR, "h2 .status")
    nxt = role(c, "next")
    times = nxt.find_elements(By.TAG_NAME, "time")
    last = role(c, "last-tick").find_elements(By.TAG_NAME, "time")
    return {
        "state": state.get_attribute("data-state"), "state_text": state.text,
        "plan": role(c, "plan").text,
        "next": times[0].get_attribute("datetime") if times else None,
        "next_text": times[0].text if times else nxt.text,
        "last_tick": last[0].get_attribute("datetime") if last else None,
        "running": role(c, "running").text,
        "counts": {li.get_attribute("data-count"): li.text
                   for li in c.find_elements(By.CSS_SELECTOR, "ul.counts li")},
        "buttons": [b.text for b in c.find_elements(By.CSS_SELECTOR, ".actions button")],
    }


def counts_text(s):
    return {name: f"{s[name]} {name}"
            for name in ["started", "skipped", "missed", "cancelled", "backfilled"]}


def fits_phone(driver, what):
    """No sideways scrolling at 390 px."""
    driver.set_window_size(390, 844)
    try:
        wide = wait_for(f"{what} laid out at 390 px", lambda: driver.execute_script(
            "return document.documentElement.clientWidth <= 390 && "
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"))
        check(wide[0] <= wide[1], f"{what} scrolls sideways at 390 px: {wide}")
    finally:
        driver.set_window_size(1280, 900)


def confirm_dialog(driver, title, wait):
    wait(f"the {title!r} dialog", lambda d: visible(d, "#confirm"))
    check(text_of(driver, "#confirm-title") == title,
          f"the dialog: {text_of(driver, '#confirm-title')!r}, wanted {title!r}")


def click_in_card(driver, css, wait):
    """Clicks `css` in the schedule's card (tried again should a refresh redraw the card
    between the finding and the click)."""
    wait(f"{css} clicked", lambda d: card(d).find_element(By.CSS_SELECTOR, css).click() or True)


def act(driver, action, title, wait):
    """Clicks the schedule's `action` button, confirms, and waits for the notice."""
    click_in_card(driver, f"button[data-action='{action}']", wait)
    confirm_dialog(driver, title, wait)
    driver.find_element(By.ID, "confirm-ok").click()
    wait(f"the {title!r} dialog to close", lambda d: not visible(d, "#confirm"))
    notice = wait("the notice", lambda d: visible(d, "#notice"))
    log(f"{action}: {notice.text}")


def run(args, directory):
    redis = RedisServer(args.redis_server, directory)
    services = {}
    driver = None
    try:
        ca = stack.make_test_ca(args.source_dir, directory)
        billing_port = free_port()
        services["keel-payments-sim"] = stack.start_provider(
            args, directory, ca, billing_port, pending_delay="10m")
        services["keel-billing"] = stack.start_billing(
            args, directory, ca, billing_port, redis.url, services["keel-payments-sim"],
            extra=["--report-cron", REPORT_CRON])
        billing = services["keel-billing"]
        waiting = fill_queue(billing)
        wait_for(f"{SCHEDULE} to publish its state", lambda: api_schedule(billing).get("next"))

        driver = browser(args.chromium, args.chromedriver, directory)
        console = BrowserLog(driver)

        def wait(what, predicate, timeout=15):
            return wait_for(what, lambda: predicate(driver), timeout)
        base = billing.url("/admin/console/")

        # -- Queues: from the header, the counts and limits as the API has them now
        log("the queues")
        driver.get(base)
        wait("the token form", lambda d: visible(d, "#token-input"))
        driver.find_element(By.ID, "token-input").send_keys(TOKEN, Keys.ENTER)
        wait("the overview", lambda d: visible(d, "#overview"))
        driver.find_element(By.ID, "nav-queues").click()
        rows = wait("the Queues table", lambda d: queue_rows(d).get(QUEUE) and queue_rows(d))
        q = api_queue(billing)
        want = {"href": base + f"#/queue/{QUEUE}",
                "limits": [f"at once: {limit_text(q['concurrency'])}",
                           f"per partition: {limit_text(q['partition_concurrency'])}",
                           f"per worker: {limit_text(q['worker_concurrency'])}",
                           f"rate: {rate_text(q['rate'], q['per_ms'])}"],
                "admitted": str(q["admitted"]), "waiting": str(q["waiting"])}
        check(rows == {QUEUE: want},
              f"the Queues table:\n  {rows}\nwanted\n  {{{QUEUE!r}: {want}}}")
        check(want["limits"][1] == "per partition: 1" and q["admitted"] == 1 and q["waiting"] == 2,
              f"the queue as the API has it: {q}")
        check(driver.find_element(By.ID, "nav-queues").get_attribute("aria-current") == "page",
              "the Queues link is not marked as the current page")
        check(driver.title.startswith("Queues"), f"the title: {driver.title!r}")
        # Live refresh: a third waiting invoice shows up, the page not reloaded.
        driver.execute_script("document.getElementById('queues').dataset.before = 'yes'")
        subscribe(billing, "c-2", "s-5", CARD_PAID)
        q = wait_until_queue(billing, 1, 3)
        rows = wait("the third waiting invoice on the page",
                    lambda d: queue_rows(d)[QUEUE]["waiting"] == "3" and queue_rows(d), timeout=10)
        check(rows[QUEUE]["admitted"] == str(q["admitted"])
              and driver.execute_script("return document.getElementById('queues').dataset.before")
              == "yes", f"after the refresh: {rows}; the API {q}")
        console.check("the queues")
        fits_phone(driver, "the Queues page")

        # -- the queue's page: its partitions, and where its waiting instances are listed
        log("the queue's page")
        driver.find_element(By.CSS_SELECTOR, "#queues tbody th a").click()
        wait("the queue's page", lambda d: visible(d, "#queue-admitted"))
        check(driver.current_url == want["href"], f"the queue's link led to {driver.current_url}")
        one = admin(billing, f"queues/{QUEUE}")
        shown = {k: text_of(driver, f"#queue-{k}")
                 for k in ["admitted", "waiting", "concurrency", "partition", "worker", "rate"]}
        wanted = {"admitted": str(one["admitted"]), "waiting": str(one["waiting"]),
                  "concurrency": limit_text(one["concurrency"]),
                  "partition": limit_text(one["partition_concurrency"]),
                  "worker": limit_text(one["worker_concurrency"]),
                  "rate": rate_text(one["rate"], one["per_ms"])}
        check(shown == wanted, f"the queue's summary: {shown}, wanted {wanted}")
        parts = wait("the partitions", lambda d: partition_rows(d))
        wanted = [[p["partition"] or "(default)", str(p["waiting"]), str(p["admitted"])]
                  for p in one["partitions"]]
        check(parts == wanted, f"the partitions: {parts}, wanted {wanted}")
        listed = driver.find_element(By.CSS_SELECTOR, "#queue-listed a")
        check(listed.get_attribute("href") == base + "#/instances?status=queued",
              f"the link to the waiting instances: {listed.get_attribute('href')}")
        listed.click()
        wait(f"{waiting} among the queued instances", lambda d: d.find_elements(
            By.CSS_SELECTOR, f"#instances tr[data-id='{waiting}']"))
        driver.find_element(By.CSS_SELECTOR, f"#instances tr[data-id='{waiting}'] a").click()
        link = wait("the waiting invoice's queue link", lambda d: visible(d, "#instance-queue"))
        check(link.text == QUEUE and link.get_attribute("href") == want["href"]
              and text_of(driver, "#instance-status").endswith("queued"),
              f"the waiting invoice's page: {text_of(driver, '#instance-status')!r}, queue "
              f"{link.text!r} -> {link.get_attribute('href')}")
        console.check("the queue's page")

        # -- Schedules: daily-report as the API has it
        log("the schedules")
        driver.find_element(By.ID, "nav-schedules").click()
        wait("the schedule's card", lambda d: card(d))
        s = api_schedule(billing)
        shown = wait("the schedule's card", card_state)
        check(shown["plan"] == f"{REPORT_CRON} in UTC" and s["cron"] == REPORT_CRON
              and s["zone"] == "UTC", f"the plan shown: {shown['plan']!r}; the API's: {s}")
        check(shown["next"] == s["next"] and s["next"], f"the next tick: {shown['next']!r}, "
              f"the API's {s['next']!r}")
        check(shown["state"] == "active" and shown["state_text"].endswith("active")
              and not s["paused"], f"the state: {shown['state_text']!r}; the API's {s}")
        check(shown["last_tick"] == s["last_tick"] and shown["counts"] == counts_text(s)
              and shown["running"] == (s["running"] or "none"),
              f"the schedule shown: {shown}\nby the API: {s}")
        check(shown["buttons"] == ["Pause", "Trigger now", "Backfill…", "Delete"],
              f"the schedule's actions: {shown['buttons']}")
        process = wait("the schedule's process", lambda d: (lambda a: (
            a.text, a.get_attribute("href")))(role(card(d), "process")))
        check(process == (SCHEDULE_ID, base + instance_hash(SCHEDULE_ID)),
              f"the schedule's process: {process}")
        check(driver.find_element(By.ID, "nav-schedules").get_attribute("aria-current") == "page",
              "the Schedules link is not marked as the current page")
        console.check("the schedules")
        fits_phone(driver, "the Schedules page")

        # Pause: confirmed, then paused on the page and in the API, without a next tick.
        log("pause")
        act(driver, "pause", "Pause schedule", wait)
        wait("the schedule paused", lambda d: card_state(d)["state"] == "paused")
        s = wait_for("the API to say paused", lambda: (lambda x: x["paused"] and x)(
            api_schedule(billing)))
        shown = wait("the schedule's card", card_state)
        check(shown["state_text"].endswith("paused") and s["next"] is None
              and shown["next"] is None and shown["next_text"] == "none (paused)"
              and shown["buttons"][0] == "Resume",
              f"paused: the page {shown}; the API {s}")

        # Resume: active again, its next tick the API's.
        log("resume")
        act(driver, "resume", "Resume schedule", wait)
        wait("the schedule active", lambda d: card_state(d)["state"] == "active")
        s = api_schedule(billing)
        shown = wait("the next tick shown", lambda d: (lambda x: x["next"] and x)(card_state(d)))
        check(not s["paused"] and shown["next"] == s["next"] and shown["buttons"][0] == "Pause",
              f"resumed: the page {shown}; the API {s}")
        console.check("pause and resume")

        # Trigger now: started grows by one; the last result is the tick's instance.
        log("trigger")
        before = s["started"]
        act(driver, "trigger", "Trigger a tick now", wait)
        wait("started to grow on the page",
             lambda d: card_state(d)["counts"]["started"] == f"{before + 1} started")
        s = api_schedule(billing)
        check(s["started"] == before + 1, f"started in the API: {s['started']}, was {before}")
        kids = admin(billing, "instances?parent=" + urllib.parse.quote(SCHEDULE_ID, safe=""))
        tick_id = kids["instances"][-1]["id"]

        def last_result(d):
            box = role(card(d), "last-result")
            links = box.find_elements(By.CSS_SELECTOR, "a[data-role='last-instance']")
            badge = box.find_elements(By.CSS_SELECTOR, ".status")
            inst = admin(billing, "instances/" + tick_id)
            if links and badge and links[0].text == tick_id \
                    and badge[0].text.endswith(inst["status"]) and inst["status"] == "completed":
                return links[0].get_attribute("href"), badge[0].text
            return None
        href, badge = wait(f"the last result: {tick_id}, completed", last_result)
        check(href == base + instance_hash(tick_id), f"the last tick's link: {href}")
        shown = wait("the schedule's card", card_state)
        check(shown["last_tick"] == s["last_tick"] and shown["counts"] == counts_text(s),
              f"after the trigger: the page {shown}; the API {s}")
        console.check("the trigger")

        # A backfill with `to` before `from`: the API's 400, in the dialog, which stays open.
        log("a backfill the wrong way round")
        bad = {"from": "2026-11-02T00:00:00Z", "to": "2026-11-01T00:00:00Z"}
        click_in_card(driver, "button[data-action='backfill']", wait)
        confirm_dialog(driver, "Backfill ticks", wait)
        inputs = driver.find_elements(By.CSS_SELECTOR, "#confirm-body input")
        check(len(inputs) == 2, f"the backfill form has {len(inputs)} inputs")
        for node, value in zip(inputs, [bad["from"], bad["to"]]):
            node.clear()
            node.send_keys(value)
        driver.find_element(By.ID, "confirm-ok").click()
        problem = wait("the dialog's problem", lambda d: visible(d, "#confirm-problem"))
        status, body = http("POST", billing.url(f"/admin/schedules/{SCHEDULE}/backfill"), bad,
                            token=TOKEN)
        check(status == 400, f"the API took the backfill: {status} {body}")
        expected = f"400 {body['title']}: {body['detail']}"
        check(problem.text == expected and "from is after to" in expected,
              f"the dialog says {problem.text!r}; the API {expected!r}")
        check(visible(driver, "#confirm"), "the dialog closed on a refusal")
        driver.find_element(By.ID, "confirm-cancel").click()
        wait("the dialog to close", lambda d: not visible(d, "#confirm"))
        console.check("the refused backfill", allowed_statuses=(400,))

        # Delete asks first; "Keep as it is" leaves the schedule alone.
        click_in_card(driver, "button[data-action='delete']", wait)
        confirm_dialog(driver, "Delete schedule", wait)
        driver.find_element(By.ID, "confirm-cancel").click()
        wait("the dialog to close", lambda d: not visible(d, "#confirm"))
        time.sleep(0.3)
        s = api_schedule(billing)
        check(not s["deleted"] and wait("the schedule's card", card_state)["state"] == "active",
              f"kept as it is, yet: the API {s}")

        # A tick triggered elsewhere (the API, as `keel` would) shows up: the page refreshes.
        before = s["started"]
        status, body = http("POST", billing.url(f"/admin/schedules/{SCHEDULE}/trigger"), {},
                            token=TOKEN)
        check(status == 200, f"POST /admin/schedules/{SCHEDULE}/trigger: {status} {body}")
        wait("the trigger made elsewhere on the page",
             lambda d: card_state(d)["counts"]["started"] == f"{before + 1} started")
        s = api_schedule(billing)
        check(s["started"] == before + 1, f"started in the API: {s['started']}, was {before}")

        # The schedule's process: its instance page.
        click_in_card(driver, "[data-role='process']", wait)
        wait(f"the page of {SCHEDULE_ID}", lambda d: visible(d, "#instance-id")
             and text_of(d, "#instance-id") == SCHEDULE_ID)
        console.check("the schedule's process")

        # The log is read: an error logged on purpose must show in it.
        driver.execute_script("console.error('console-flow-control-test: the log is collected')")
        probe = wait("the logged error", lambda d: [
            e for e in d.get_log("browser")
            if e.get("level") == "SEVERE" and "the log is collected" in e.get("message", "")])
        log(f"browser log: {len(console.seen)} entries before the probe; "
            f"the probe read back ({len(probe)} entry)")
    except Exception:
        report_failure(driver, args.out, services)
        raise
    finally:
        if driver is not None:
            driver.quit()
        for svc in reversed(list(services.values())):
            svc.stop()
        redis.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--billing", required=True, help="keel-billing")
    parser.add_argument("--payments-sim", required=True, help="keel-payments-sim")
    parser.add_argument("--redis-server", required=True)
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--chromedriver", required=True)
    parser.add_argument("--out", required=True, help="where a failure's page goes")
    parser.add_argument("--source-dir", required=True,
                        help="the repository: examples/billing/scripts/make_test_ca.sh")
    args = parser.parse_args()
    return run_test(run, args, "keel-console-flow-control-", "console flow control test passed")


if __name__ == "__main__":
    sys.exit(main())
