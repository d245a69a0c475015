#!/usr/bin/env python3
"""Browser test of the console's parent/children view, against examples/billing.

Starts its own redis-server (a free loopback port, a temporary directory; never 6379),
keel-payments-sim over HTTPS with a test CA made into the temporary directory
(examples/billing/scripts/make_test_ca.sh) and keel-billing with an admin token, trusting only
that CA, as examples/billing/scripts/run.sh does. Over HTTP it creates a customer and a
subscription on the card that is paid at once, so that the subscription's process
(subscription/<id>, definition /subscription/:subscription) starts period 1's invoice as a
child process (invoice/<id>/1, on the `charges` queue) and the child completes; the admin
API must show the child, its parent, its parent-close policy and what the subscription
published. Then headless Chromium, through python3-selenium, as an operator would:

  the console, opened on the subscription's page, asks for the token and then shows that
  page; its Children table lists the invoice (its link, definition, status and what happens
  to it when the parent ends, as the admin API has them) and nothing more; its Published
  section shows the "subscription" value the process publishes (plan, period, status, next
  charge), equal to the admin API's; it has no parent. The child's link opens the child's
  page, which shows the subscription as its parent, as a link, and no children; following
  that link comes back to the subscription's page.

The browser log must hold no SEVERE entry (checked to be collected at the end: an error the
test logs itself must show). A screenshot of the subscription's page (1280 px wide) is
written to --out as children.png.

Registered by tests/console/CMakeLists.txt, which passes every path on the command line.
"""

import argparse
import json
import os
import subprocess
import sys
import urllib.parse

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

# console_support.py sits beside this script: no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
from console_support import (TOKEN, BrowserLog, RedisServer, ServiceProcess, browser, check,
                             free_port, http, log, report_failure, run_test, screenshot, text_of,
                             visible, wait_for)

WEBHOOK_SECRET = "whsec-console-children"
CUSTOMER = "c-1"
SUBSCRIPTION = "s-1"
CARD_PAID = "4242424242424242"  # the test card the provider charges at once
SUBSCRIBING = "/subscription/:subscription"
INVOICING = "/invoice/:subscription/:period"


def instance_hash(instance_id):
    """The console's route of an instance page, as instanceHref (admin/console/dom.js)
    writes it: the whole id percent-encoded."""
    return "#/instance/" + urllib.parse.quote(instance_id, safe="")


# ---- the stack: Redis, the provider over HTTPS, keel-billing ----

def make_test_ca(source_dir, directory):
    ca = os.path.join(directory, "ca")
    script = os.path.join(source_dir, "examples", "billing", "scripts", "make_test_ca.sh")
    done = subprocess.run([script, ca], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, timeout=60)
    check(done.returncode == 0, f"{script} failed:\n{done.stdout.decode(errors='replace')}")
    return ca


def start_provider(args, directory, ca, billing_port, pending_delay="2s"):
    """keel-payments-sim over HTTPS; a charge on the pending card succeeds, by webhook,
    `pending_delay` after it was made."""
    sim = ServiceProcess(directory, free_port(), log_name="payments-sim.log", host="localhost",
                         cafile=os.path.join(ca, "ca.pem"))
    sim.start([args.payments_sim, "--host", "127.0.0.1", "--port", str(sim.port),
               "--tls-cert", os.path.join(ca, "server.pem"),
               "--tls-key", os.path.join(ca, "server-key.pem"),
               "--webhook-url", f"http://127.0.0.1:{billing_port}/webhooks/provider",
               "--webhook-secret", WEBHOOK_SECRET, "--rate", "20",
               "--pending-delay", pending_delay, "--log-level", "warn"])
    return sim


def start_billing(args, directory, ca, port, redis_url, sim, extra=()):
    billing = ServiceProcess(directory, port, log_name="billing.log")
    # A period of an hour: once period 1's invoice is paid, the subscription waits for the
    # period's end, and its page stays as it is while the browser reads it.
    billing.start([args.billing, "--port", str(port), "--host", "127.0.0.1",
                   "--redis", redis_url, "--admin-token", TOKEN, "--threads", "2",
                   "--log-level", "warn", "--provider-url", sim.url(""),
                   "--provider-ca", os.path.join(ca, "ca.pem"),
                   "--provider-secret", WEBHOOK_SECRET, "--period", "1h", "--trial", "0s",
                   *extra])
    return billing


def admin(billing, path):
    return http("GET", billing.url(f"/admin/{path}"), token=TOKEN)


def subscribe(billing):
    """A customer and a subscription paid at once; waits through the admin API until the
    subscription's instance shows its first invoice completed. The instances (subscription,
    invoice) as the admin API has them."""
    status, body = http("POST", billing.url("/customers"),
                        {"id": CUSTOMER, "email": "ada@example.com"})
    check(status == 201, f"POST /customers: {status} {body}")
    status, body = http("POST", billing.url("/subscriptions"), {
        "id": SUBSCRIPTION, "customer": CUSTOMER, "plan": "basic", "card": CARD_PAID})
    check(status == 201, f"POST /subscriptions: {status} {body}")
    parent_id = body["process"]
    check(parent_id == f"subscription/{SUBSCRIPTION}", f"the subscription's process: {body}")
    child_id = f"invoice/{SUBSCRIPTION}/1"

    def settled():
        status, inst = admin(billing, f"instances/{parent_id}")
        if status != 200 or not inst.get("children"):
            return None
        # Past the join: waiting for period 1's end (a timer of an hour), its page steady.
        done = (inst["children"][0]["status"] == "completed"
                and any(t["name"] == "period 1 end" for t in inst.get("timers", [])))
        return inst if done else None

    parent = wait_for(f"{parent_id} to show its first invoice completed", settled, timeout=30)
    check(parent["definition"] == SUBSCRIBING and parent["parent"] is None,
          f"the subscription's instance: {parent}")
    check(parent["children_total"] == 1 and len(parent["children"]) == 1,
          f"the subscription's children: {parent['children']} of {parent['children_total']}")
    listed = parent["children"][0]
    check(listed["id"] == child_id and listed["definition"] == INVOICING
          and listed["on_parent_close"] == "cancel", f"the child listed: {listed}")
    status, page = admin(billing, "instances?parent=" + urllib.parse.quote(parent_id, safe=""))
    check(status == 200 and [i["id"] for i in page["instances"]] == [child_id],
          f"GET /admin/instances?parent={parent_id}: {status} {page}")
    status, child = admin(billing, f"instances/{child_id}")
    check(status == 200 and child["parent"] == parent_id and child["status"] == "completed"
          and (child["result"] or {}).get("status") == "paid" and not child["children"],
          f"the child's instance: {status} {child}")
    status, sub = http("GET", billing.url(f"/subscriptions/{SUBSCRIPTION}"))
    check(status == 200 and [i["status"] for i in sub.get("invoices", [])] == ["paid"],
          f"GET /subscriptions/{SUBSCRIPTION}: {status} {sub}")
    published = parent["published"]
    check(list(published) == ["subscription"] and published["subscription"]["plan"] == "basic"
          and published["subscription"]["status"] == "active",
          f"what the subscription published: {published}")
    log(f"{parent_id} started {child_id}, completed; published {published}")
    return parent, child


# ---- the pages ----

def instance_shown(driver, instance_id):
    """The instance page of `instance_id`, drawn (not the loading placeholder)."""
    return (visible(driver, "#instance-id") and visible(driver, "#instance-status")
            and text_of(driver, "#instance-id") == instance_id)


def children_rows(driver):
    """The Children table as [{id, href, definition, status, status_class, on_close}]."""
    table = driver.find_element(By.ID, "instance-children")
    heads = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    check(heads[:4] == ["Instance", "Definition", "Status", "When the parent ends"],
          f"the Children table's columns: {heads}")
    rows = []
    for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr"):
        cells = tr.find_elements(By.TAG_NAME, "td")
        link = cells[0].find_element(By.TAG_NAME, "a")
        badge = cells[2].find_element(By.CSS_SELECTOR, ".status")
        rows.append({"id": link.text, "href": link.get_attribute("href"),
                     "definition": cells[1].text, "status": badge.text.split()[-1],
                     "status_class": badge.get_attribute("class"), "on_close": cells[3].text})
    return rows


def published_values(driver):
    """The Published section as {name: the value, parsed from its JSON}."""
    dl = driver.find_element(By.ID, "instance-published")
    names = [dt.text for dt in dl.find_elements(By.TAG_NAME, "dt")]
    values = [json.loads(dd.find_element(By.CSS_SELECTOR, "pre").get_attribute("textContent"))
              for dd in dl.find_elements(By.TAG_NAME, "dd")]
    return dict(zip(names, values))


def summary_row(driver, label):
    """The summary's value for `label` (its <dd>), or None."""
    for dt in driver.find_elements(By.CSS_SELECTOR, "dl.summary dt"):
        if dt.text == label:
            return dt.find_element(By.XPATH, "following-sibling::dd[1]")
    return None


def run(args, directory):
    redis = RedisServer(args.redis_server, directory)
    services = {}
    driver = None
    try:
        ca = make_test_ca(args.source_dir, directory)
        billing_port = free_port()
        services["keel-payments-sim"] = start_provider(args, directory, ca, billing_port)
        services["keel-billing"] = start_billing(args, directory, ca, billing_port, redis.url,
                                                 services["keel-payments-sim"])
        billing = services["keel-billing"]
        parent, child = subscribe(billing)
        parent_id, child_id = parent["id"], child["id"]

        driver = browser(args.chromium, args.chromedriver, directory)
        console = BrowserLog(driver)

        def wait(what, predicate, timeout=20):
            return wait_for(what, lambda: predicate(driver), timeout)
        base = billing.url("/admin/console/")

        # -- the console, opened on the subscription's page: the token, then that page
        log("the subscription's page")
        driver.get(base + instance_hash(parent_id))
        wait("the token form", lambda d: visible(d, "#token-input"))
        driver.find_element(By.ID, "token-input").send_keys(TOKEN, Keys.ENTER)
        wait(f"the page of {parent_id}", lambda d: instance_shown(d, parent_id))
        check(text_of(driver, "#instance-status").endswith("suspended"),
              f"the subscription's status: {text_of(driver, '#instance-status')!r}")
        check(not driver.find_elements(By.ID, "instance-parent")
              and summary_row(driver, "Parent") is None,
              "the subscription, started by a request, shows a parent")

        # Its children: the invoice, as the admin API has it, and nothing else.
        kids = wait("the Children table", lambda d: children_rows(d))
        listed = parent["children"][0]
        want = {"id": child_id, "href": base + instance_hash(child_id),
                "definition": INVOICING, "status": "completed",
                "status_class": "status status-completed",
                "on_close": {"cancel": "cancelled", "abandon": "lives on"}[
                    listed["on_parent_close"]]}
        check(kids == [want], f"the Children table:\n  {kids}\nwanted\n  {[want]}")
        section = driver.find_element(By.CSS_SELECTOR, "section[aria-labelledby=children-title]")
        check(text_of(driver, "#children-title") == "Children"
              and "The first" not in section.text,
              f"the Children section says more than its one child: {section.text!r}")

        # What it published: the "subscription" value, as the admin API has it.
        shown = wait("the Published section", lambda d: published_values(d))
        check(shown == parent["published"],
              f"published on the page: {shown}\nby the admin API: {parent['published']}")
        state = shown["subscription"]
        check(state["plan"] == "basic" and state["period"] == 1 and state["status"] == "active"
              and state["next_plan"] is None and state["next_charge"],
              f"the subscription's published state: {state}")
        console.check("the subscription's page")
        screenshot(driver, "children.png", [args.out], full_page=True)

        # -- the child's link: the child's page, its parent a link
        log("the child's page")
        driver.find_element(By.CSS_SELECTOR, "#instance-children tbody a").click()
        wait(f"the page of {child_id}", lambda d: instance_shown(d, child_id))
        check(driver.current_url == base + instance_hash(child_id),
              f"the child's link led to {driver.current_url}")
        check(text_of(driver, "#instance-status").endswith("completed"),
              f"the child's status: {text_of(driver, '#instance-status')!r}")
        link = wait("the parent's link", lambda d: visible(d, "#instance-parent"))
        check(link.tag_name == "a" and link.text == parent_id
              and link.get_attribute("href") == base + instance_hash(parent_id),
              f"the parent shown: <{link.tag_name}> {link.text!r} -> {link.get_attribute('href')}")
        row = summary_row(driver, "Parent")
        check(row is not None and row.find_element(By.TAG_NAME, "a") == link,
              "the parent's link is not the summary's Parent")
        check(not driver.find_elements(By.ID, "instance-children"),
              "the invoice, which starts no process, shows children")
        console.check("the child's page")

        # -- the parent's link: back to the subscription's page
        log("back to the parent")
        link.click()
        wait(f"the page of {parent_id} again", lambda d: instance_shown(d, parent_id))
        check(driver.current_url == base + instance_hash(parent_id),
              f"the parent's link led to {driver.current_url}")
        kids = wait("the Children table again", lambda d: children_rows(d))
        check([k["id"] for k in kids] == [child_id], f"the Children table again: {kids}")
        console.check("the way back")

        # The log is read: an error logged on purpose must show in it.
        driver.execute_script("console.error('console-children-test: the log is collected')")
        probe = wait("the logged error", lambda d: [
            e for e in d.get_log("browser")
            if e.get("level") == "SEVERE" and "the log is collected" in e.get("message", "")])
        log(f"browser log: {len(console.seen)} entries before the probe, none SEVERE; "
            f"the probe read back ({len(probe)} entry)")
    except Exception:
        report_failure(driver, args.out, services)
        raise
    finally:
        if driver is not None:
            driver.quit()
        for svc in reversed(list(services.values())):  # keel-billing, then its provider
            svc.stop()
        redis.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--billing", required=True, help="keel-billing")
    parser.add_argument("--payments-sim", required=True, help="keel-payments-sim")
    parser.add_argument("--redis-server", required=True)
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--chromedriver", required=True)
    parser.add_argument("--out", required=True, help="where the screenshot goes (the build dir)")
    parser.add_argument("--source-dir", required=True,
                        help="the repository: examples/billing/scripts/make_test_ca.sh")
    args = parser.parse_args()
    return run_test(run, args, "keel-console-children-", "console children test passed")


if __name__ == "__main__":
    sys.exit(main())
