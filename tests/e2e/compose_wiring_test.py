#!/usr/bin/env python3
"""deploy/compose.yaml's `billing` profile, played by hand on loopback, without Docker.

No container engine runs where the tests run, so this plays the compose file the way compose
would: for each service of the profile (and what it depends on), in depends_on order, it takes
the file's entrypoint, command and environment and runs them here, with
  - the image's paths (/usr/local/bin/keel-billing, ...) mapped to the built binaries and the
    repository's script, once deploy/Dockerfile's runtime stage is seen to install them;
  - each volume's mount point mapped to a directory of a temporary one;
  - each service's host name (redis, payments, billing) mapped to 127.0.0.1 and its container
    port to a free local port, in every URL of the arguments and the environment: a URL whose
    port is not the one its service listens on fails here, naming both;
  - the redis service played by a redis-server of its own, on a free port (never 6379).
A one-shot dependency (service_completed_successfully) runs to completion; a
service_healthy one is waited for with its health check, played the same way. Once
keel-billing is ready, a TLS handshake checks that the provider's certificate is valid for
the host name of billing's --provider-url under billing's --provider-ca; then a short session
checks the rest: a subscription on the card that succeeds is paid over HTTPS at once, and one
on the pending card is paid only by the provider's signed webhook (--webhook-url and the two
secrets). It also checks that plain `up` (no profile) starts exactly redis and orders and that
every depends_on names a service.

    compose_wiring_test.py --source-dir ROOT --billing KEEL_BILLING \\
        --payments-sim KEEL_PAYMENTS_SIM [--redis-server redis-server]

Exits 0 when every check holds; otherwise 1, with the reason and the services' logs.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import yaml
except ImportError:
    sys.exit("compose_wiring_test: PyYAML is missing: deploy/install-deps.sh installs "
             "Debian's python3-yaml")

PROFILE = "billing"
DEFAULT_SERVICES = {"redis", "orders"}  # what plain `docker compose up` must start
SCHEME_PORTS = {"http": 80, "https": 443, "redis": 6379}
REDIS_PORT = 6379  # the redis image's port (and deploy/redis.conf's)
START_TIMEOUT = 30  # seconds for a service to become healthy, on two busy cores
SESSION_TIMEOUT = 20  # seconds for an invoice to be paid (the pending card takes 2 s)
STOP_TIMEOUT = 10  # seconds between SIGTERM and SIGKILL
URL = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<user>[^@/\s]*@)?"
                 r"(?P<host>[A-Za-z0-9.-]+)(?::(?P<port>\d+))?")


class Failure(Exception):
    """A check that does not hold: its message names what is miswired."""


class PortTaken(Exception):
    """A free port was taken by a parallel test meanwhile: play again on others."""


def log(message):
    print(f"compose_wiring_test: {message}", flush=True)


def check(condition, message):
    if not condition:
        raise Failure(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return port if port != REDIS_PORT else free_port()


# ---- deploy/Dockerfile's runtime stage: what the image installs, its environment ----

def runtime_stage(dockerfile):
    """The instructions after the last FROM, continuation lines joined."""
    text = re.sub(r"\\\n", " ", open(dockerfile).read())
    lines = [line.strip() for line in text.splitlines()]
    last_from = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    return [line for line in lines[last_from + 1:] if line and not line.startswith("#")]


def installed_paths(stage):
    """Every path a COPY of the stage puts in the image."""
    paths = set()
    for line in stage:
        words = line.split()
        if words[0] != "COPY":
            continue
        words = [w for w in words[1:] if not w.startswith("--")]
        *sources, destination = words
        for source in sources:
            paths.add(destination + os.path.basename(source.rstrip("/"))
                      if destination.endswith("/") else destination)
    return paths


def image_environment(stage):
    env = {}
    for line in stage:
        if line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


# ---- compose.yaml ----

def as_argv(value):
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def environment_of(spec):
    env = spec.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def depends_on(spec):
    """{dependency: condition}; the short form is service_started."""
    deps = spec.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (how or {}).get("condition", "service_started") for name, how in deps.items()}


def mounts(spec):
    """[(source, container path, read_only)] of the short volume syntax."""
    found = []
    for entry in spec.get("volumes") or []:
        source, target, *mode = entry.split(":")
        found.append((source, target, "ro" in (mode[0].split(",") if mode else [])))
    return found


def flag_value(argv, flag):
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    return None


def check_structure(services):
    """Plain `up` starts redis and orders only, and every depends_on names a service."""
    default = {name for name, spec in services.items() if not spec.get("profiles")}
    check(default == DEFAULT_SERVICES,
          f"without a profile compose.yaml starts {sorted(default)}, "
          f"not {sorted(DEFAULT_SERVICES)}")
    for name, spec in services.items():
        for dep in depends_on(spec):
            check(dep in services, f"{name} depends on {dep}, which compose.yaml does not define")
            check(name not in default or dep in default,
                  f"{name} starts without a profile but depends on {dep}, which does not")
    check(any(PROFILE in (spec.get("profiles") or []) for spec in services.values()),
          f"no service of compose.yaml is in the {PROFILE} profile")


def profile_services(services):
    """The profile's services and what they depend on, in depends_on order (file order among
    equals)."""
    wanted = [name for name, spec in services.items() if PROFILE in (spec.get("profiles") or [])]
    order, visiting = [], set()

    def visit(name):
        if name in order:
            return
        check(name not in visiting, f"depends_on has a cycle through {name}")
        visiting.add(name)
        for dep in depends_on(services[name]):
            visit(dep)
        order.append(name)

    for name in wanted:
        visit(name)
    return order


def one_shots(services, names):
    return {dep for name in names for dep, condition in depends_on(services[name]).items()
            if condition == "service_completed_successfully"}


def check_read_only(services, names, shots):
    """A volume a one-shot service writes is only read by the others."""
    for shot in shots:
        for source, _, read_only in mounts(services[shot]):
            if read_only or source.startswith((".", "/")):
                continue
            for name in names:
                for other_source, target, other_ro in mounts(services[name]):
                    check(name == shot or other_source != source or other_ro,
                          f"{name} mounts the {source} volume at {target} read-write; "
                          f"only {shot} writes it")


# ---- the services on loopback ----

class Loopback:
    """Maps one service's container view (paths, host names, ports, binaries) to this
    machine."""

    def __init__(self, services, names, compose_dir, work, image_paths, image_env, binaries):
        self.services = services
        self.compose_dir = compose_dir
        self.work = work
        self.image_paths = image_paths
        self.image_env = image_env
        self.binaries = binaries
        self.container_port = {name: self.listen_port(name) for name in names}
        self.local_port = {name: free_port() for name in names}
        self.mount_points = {target for name in names
                             for _, target, _ in mounts(services[name])}

    def built_here(self, name):
        return "build" in self.services[name]

    def listen_port(self, name):
        spec = self.services[name]
        port = flag_value(as_argv(spec.get("command")), "--port")
        if port is None and not self.built_here(name):
            return REDIS_PORT
        if port is None:
            port = environment_of(spec).get("KEEL_PORT", self.image_env.get("KEEL_PORT"))
        return int(port)

    def local_path(self, name, source):
        if source.startswith((".", "/")):
            return os.path.normpath(os.path.join(self.compose_dir, source))
        directory = os.path.join(self.work, "volumes", source)
        os.makedirs(directory, exist_ok=True)
        return directory

    def rewrite(self, name, text):
        """`text` (an argument or an environment value) as `name` sees it here."""
        for source, target, _ in sorted(mounts(self.services[name]), key=lambda m: -len(m[1])):
            text = re.sub(r"(?<![^\s=])" + re.escape(target) + r"(?=/|\s|$)",
                          lambda _, s=source: self.local_path(name, s), text)
        for target in self.mount_points:
            check(not re.search(r"(?<![^\s=])" + re.escape(target) + r"(?=/|\s|$)", text),
                  f"{name} names {text!r}, under {target}, where it mounts nothing")
        return URL.sub(lambda m: self.rewrite_url(name, m), text)

    def rewrite_url(self, name, match):
        host, scheme = match["host"], match["scheme"]
        port = int(match["port"] or SCHEME_PORTS.get(scheme, 0))
        target = name if host in ("localhost", "127.0.0.1") else host
        check(target in self.container_port,
              f"{name}: {match[0]} names {host}, which is no service of the {PROFILE} profile")
        check(port == self.container_port[target],
              f"{name}: {match[0]} names port {port} of {target}, which listens on "
              f"{self.container_port[target]}")
        local_host = host if target == name else "127.0.0.1"
        return f"{scheme}://{match['user'] or ''}{local_host}:{self.local_port[target]}"

    def program(self, name, path):
        """What runs here for the image's `path`: a stand-in given on the command line, or a
        program on PATH (curl, for the health checks)."""
        if path.startswith("/") and self.built_here(name):
            check(path in self.image_paths,
                  f"{name} runs {path}, which deploy/Dockerfile's runtime stage does not install")
        if path in self.binaries:
            return self.binaries[path]
        check(not path.startswith("/"), f"{name} runs {path}, which this test cannot stand in for")
        found = shutil.which(path)
        check(found, f"{name} runs {path}, which is not installed here")
        return found

    def argv(self, name):
        spec = self.services[name]
        argv = as_argv(spec.get("entrypoint")) + as_argv(spec.get("command"))
        check(argv, f"{name} has neither entrypoint nor command")
        own_port = str(self.container_port[name])
        mapped = [self.program(name, argv[0])]
        for previous, arg in zip(argv, argv[1:]):
            if previous == "--port" and arg == own_port:
                arg = str(self.local_port[name])
            elif arg == f"--port={own_port}":
                arg = f"--port={self.local_port[name]}"
            mapped.append(self.rewrite(name, arg))
        if not self.built_here(name):  # the redis image: its port moved, loopback only
            mapped += ["--port", str(self.local_port[name]), "--bind", "127.0.0.1"]
        return mapped

    def environment(self, name):
        # The services refuse KEEL_ variables that name no option: only the file's reach them.
        env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}
        if self.built_here(name):
            env.update(self.image_env)
            env["KEEL_HOST"] = "127.0.0.1"  # 0.0.0.0 in a container; loopback here
        for key, value in environment_of(self.services[name]).items():
            env[key] = self.rewrite(name, value)
        if env.get("KEEL_PORT") == str(self.container_port[name]):
            env["KEEL_PORT"] = str(self.local_port[name])
        return env

    def health_check(self, name):
        """The service's health check as argv here, or None (none, or the redis image's,
        which Stack.probe plays as a PING)."""
        spec = self.services[name]
        health = spec.get("healthcheck")
        if not self.built_here(name):
            return None
        if health is None:  # deploy/Dockerfile's: plain HTTP on the port KEEL_PORT names
            probed = environment_of(spec).get("KEEL_PORT", self.image_env.get("KEEL_PORT"))
            check(probed == str(self.container_port[name]),
                  f"{name} has no health check of its own, and the image's probes KEEL_PORT "
                  f"({probed}) while it listens on {self.container_port[name]}")
            return ["curl", "-fsS", "-o", "/dev/null",
                    f"http://127.0.0.1:{self.local_port[name]}/healthz"]
        if health.get("disable"):
            return None
        test = as_argv(health["test"]) if isinstance(health["test"], list) else \
            ["CMD-SHELL", health["test"]]
        if test[0] == "CMD":
            return [self.program(name, test[1])] + [self.rewrite(name, a) for a in test[2:]]
        if test[0] == "CMD-SHELL":
            return ["/bin/sh", "-c", self.rewrite(name, " ".join(test[1:]))]
        return None


class Stack:
    """The processes started, stopped in reverse order at the end whatever happened."""

    def __init__(self, loopback):
        self.loopback = loopback
        self.processes = []  # (name, Popen, log path)
        self.healthy = set()

    def log_path(self, name):
        return os.path.join(self.loopback.work, f"{name}.log")

    def spawn(self, name):
        argv = self.loopback.argv(name)
        env = self.loopback.environment(name)
        log(f"{name}: {shlex.join(argv)}")
        with open(self.log_path(name), "wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.processes.append((name, process, self.log_path(name)))
        return process

    def run_to_completion(self, name):
        process = self.spawn(name)
        try:
            code = process.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure(f"{name} did not finish within {START_TIMEOUT} s")
        check(code == 0, f"{name} exited {code}; those depending on it would not start")

    def process_of(self, name):
        return next(p for n, p, _ in self.processes if n == name)

    def exited(self, name):
        """Fails when `name` has exited; a port another test took meanwhile is PortTaken."""
        code = self.process_of(name).poll()
        if code is None:
            return
        with open(self.log_path(name), errors="replace") as f:
            if "in use" in f.read().lower():
                raise PortTaken(name)
        raise Failure(f"{name} exited {code} before it was healthy")

    def probe(self, name):
        if not self.loopback.built_here(name):  # the redis image: its check is redis-cli ping
            try:
                with socket.create_connection(("127.0.0.1", self.loopback.local_port[name]),
                                              timeout=2) as s:
                    s.sendall(b"PING\r\n")
                    return s.recv(64).startswith(b"+PONG")
            except OSError:
                return False
        argv = self.loopback.health_check(name)
        check(argv, f"a service waits for {name} to be healthy, but it has no health check")
        try:
            return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=5).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def wait_healthy(self, name):
        if name in self.healthy:
            return
        deadline = time.monotonic() + START_TIMEOUT
        while not self.probe(name):
            self.exited(name)
            check(time.monotonic() < deadline,
                  f"{name} not healthy after {START_TIMEOUT} s (its health check fails)")
            time.sleep(0.1)
        self.healthy.add(name)

    def up(self, order, shots):
        services = self.loopback.services
        for name in order:
            for dep, condition in depends_on(services[name]).items():
                if condition == "service_healthy":
                    self.wait_healthy(dep)
            if name in shots:
                self.run_to_completion(name)
            else:
                self.spawn(name)

    def stop(self):
        for name, process, _ in reversed(self.processes):
            if process.poll() is not None:
                continue
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                log(f"{name} still running {STOP_TIMEOUT} s after SIGTERM: SIGKILL")
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def print_logs(self):
        for name, _, path in self.processes:
            print(f"---- the log of {name} ({path}) ----", flush=True)
            with open(path, errors="replace") as f:
                lines = f.readlines()
            print("".join(lines[-80:]), end="", flush=True)


# ---- what billing and the provider must agree on ----

def http_json(method, url, body=None, timeout=5):
    """(status, parsed JSON or text)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode(errors="replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def wait_ready(stack, name, url):
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            if http_json("GET", url, timeout=2)[0] == 200:
                return
        except OSError:
            pass
        stack.exited(name)
        check(time.monotonic() < deadline, f"{name} not ready after {START_TIMEOUT} s: {url}")
        time.sleep(0.1)


def check_provider_certificate(loopback, billing, provider):
    """The certificate the provider serves is valid for the host name of billing's
    --provider-url, under billing's --provider-ca: what billing's own calls (to 127.0.0.1
    here) cannot show."""
    argv = as_argv(loopback.services[billing].get("command"))
    url = flag_value(argv, "--provider-url")
    ca = flag_value(argv, "--provider-ca")
    check(url and ca, f"{billing} has no --provider-url or no --provider-ca")
    host = urllib.parse.urlsplit(url).hostname
    context = ssl.create_default_context(cafile=loopback.rewrite(billing, ca))
    try:
        with socket.create_connection(("127.0.0.1", loopback.local_port[provider]), timeout=5) \
                as sock, context.wrap_socket(sock, server_hostname=host):
            pass
    except ssl.SSLError as e:
        raise Failure(f"the certificate {provider} serves does not pass for {host} (billing's "
                      f"--provider-url {url}) under billing's --provider-ca {ca}: {e}")
    except OSError as e:
        raise Failure(f"no TLS handshake with {provider}: {e}")
    log(f"the certificate {provider} serves is valid for {host} under {ca}")


def first_invoice(api, subscription):
    status, body = http_json("GET", f"{api}/subscriptions/{subscription}")
    invoices = body.get("invoices") if status == 200 and isinstance(body, dict) else None
    return invoices[0] if invoices else None


def wait_paid(api, subscription, why):
    deadline = time.monotonic() + SESSION_TIMEOUT
    invoice = None
    while time.monotonic() < deadline:
        try:
            invoice = first_invoice(api, subscription)
        except OSError as e:
            invoice = f"GET /subscriptions/{subscription}: {e}"
        if isinstance(invoice, dict) and invoice.get("status") == "paid":
            log(f"{subscription}'s first invoice is paid ({invoice.get('attempts')} attempt(s))")
            return
        time.sleep(0.1)
    raise Failure(f"{subscription}'s first invoice is not paid after {SESSION_TIMEOUT} s "
                  f"({invoice}): {why}")


def play_session(api):
    status, body = http_json("POST", f"{api}/customers", {"id": "c1", "email": "c1@example.com"})
    check(status == 201, f"POST /customers: {status} {body}")
    for subscription, card in (("s1", "4242424242424242"), ("s2", "4000000000000077")):
        status, body = http_json("POST", f"{api}/subscriptions",
                                 {"id": subscription, "customer": "c1", "plan": "basic",
                                  "card": card})
        check(status == 201, f"POST /subscriptions ({subscription}): {status} {body}")
    # No trial by default: period 1 is billed at once.
    wait_paid(api, "s1", "billing's charge did not go through at the provider (billing's "
                         "--provider-url, --provider-ca; the provider's certificate)")
    wait_paid(api, "s2", "the pending charge's signed webhook did not pay it (the provider's "
                         "--webhook-url, its --webhook-secret against billing's "
                         "--provider-secret)")


# ---- main ----

def play(args, compose, work):
    services = compose["services"]
    order = profile_services(services)
    shots = one_shots(services, order)
    check_read_only(services, order, shots)
    stage = runtime_stage(os.path.join(args.source_dir, "deploy", "Dockerfile"))
    binaries = {
        "/usr/local/bin/keel-billing": args.billing,
        "/usr/local/bin/keel-payments-sim": args.payments_sim,
        "/usr/local/share/keel/make_test_ca.sh":
            os.path.join(args.source_dir, "examples", "billing", "scripts", "make_test_ca.sh"),
        "redis-server": args.redis_server,
    }
    loopback = Loopback(services, order, os.path.join(args.source_dir, "deploy"), work,
                        installed_paths(stage), image_environment(stage), binaries)
    for name in order:  # a published port must reach the port the service listens on
        for published in services[name].get("ports") or []:
            container = int(str(published).split(":")[-1].split("/")[0])
            check(container == loopback.container_port[name],
                  f"{name} publishes {published}, but listens on "
                  f"{loopback.container_port[name]}")
    for name in order:  # every path, URL and program mapped before anything starts
        loopback.argv(name)
        loopback.environment(name)
        loopback.health_check(name)
    log(f"playing the {PROFILE} profile: {', '.join(order)} "
        f"(one-shot: {', '.join(sorted(shots)) or 'none'})")

    stack = Stack(loopback)
    try:
        stack.up(order, shots)
        api = f"http://127.0.0.1:{loopback.local_port['billing']}"
        wait_ready(stack, "billing", f"{api}/readyz")
        check_provider_certificate(loopback, "billing", "payments")
        play_session(api)
    except PortTaken:
        raise
    except BaseException as e:  # a failed check, an error, ctest's SIGTERM: show the logs
        stack.stop()
        log(f"failed ({e}); the services' logs follow")
        stack.print_logs()
        raise
    finally:
        stack.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--billing", required=True, help="keel-billing, built")
    parser.add_argument("--payments-sim", required=True, help="keel-payments-sim, built")
    parser.add_argument("--redis-server", default="redis-server")
    args = parser.parse_args()
    args.redis_server = shutil.which(args.redis_server) or args.redis_server
    # ctest's timeout sends SIGTERM: stop the services on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("compose_wiring_test: terminated"))

    started = time.monotonic()
    try:
        with open(os.path.join(args.source_dir, "deploy", "compose.yaml")) as f:
            compose = yaml.safe_load(f)
        check_structure(compose["services"])
        for attempt in (1, 2, 3):
            with tempfile.TemporaryDirectory(prefix="keel-compose-wiring-") as work:
                try:
                    play(args, compose, work)
                    break
                except PortTaken as taken:
                    check(attempt < 3, f"{taken} found its port taken three times")
                    log(f"{taken}: a port was taken meanwhile; playing again on others")
    except Failure as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    log(f"passed in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
