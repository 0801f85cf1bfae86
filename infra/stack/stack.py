"""`make stack` / `make stack-down`: the pipeline's servers as local processes, all on 127.0.0.1.

    Postgres (Debian package)  Airflow's metadata DB, a private cluster in <dir>/pg
    Airflow 3                  api-server, scheduler (LocalExecutor), dag-processor, triggerer
    Pushgateway + Prometheus   the repo's infra/prometheus config and alert rules
    MLflow                     tracking server + UI (.venv-mlflow), store in <workspace>/mlflow

The production shape is docker-compose.yml; this is the same set of servers without a Docker
engine (docs/orchestration.md, "The local stack"). State, logs and data live under <dir>
(default var/stack): stack.json (ports, pids, --env values), secrets.json and env.sh (all mode 0600), logs/.

    python infra/stack/stack.py up [--dir D] [--ranker-home H] [--small-workspace] [--extra-dags DIR] [--env K=V ...]
    python infra/stack/stack.py down|status [--dir D]

The DAGs need a workspace with data (RANKER_HOME, default <dir>/../stack/workspace). `up` on an
empty one prints the exact commands of a small one and its size; `--small-workspace` builds it
(SMALL_WORKSPACE: 10 synthetic days ending yesterday, 5-day windows), never over existing data.

`up` is idempotent: a running, healthy stack is reported and left alone; a stopped one is
started again with the ports, secrets and data it had. Ports are free ones picked on the first
`up` unless STACK_<NAME>_PORT says otherwise (API, POSTGRES, PROMETHEUS, PUSHGATEWAY, MLFLOW).

MLflow's store is the workspace's own (``sqlite:///<workspace>/mlflow/mlflow.db`` and
<workspace>/mlflow/artifacts, the local store `ranker` writes when no tracking URI is set); the
Airflow tasks log through the server (RANKER_MLFLOW_TRACKING_URI, also in env.sh).
Every task of ranker_retrain links to its run (infra/airflow_plugins, the plugins folder).

Run with .venv-airflow's python (it needs the `airflow` executable beside it and PyYAML).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import glob
import hashlib
import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
PORT_NAMES = ("api", "postgres", "prometheus", "pushgateway", "mlflow")
SERVERS = ("prometheus", "pushgateway", "mlflow")  # spawned by server_argv, healthy on a GET
HEALTH_PATHS = {"prometheus": "/-/ready", "pushgateway": "/-/ready", "mlflow": "/health"}
MLFLOW_BIN = REPO / ".venv-mlflow" / "bin" / "mlflow"
PLUGINS = REPO / "infra" / "airflow_plugins"
AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
ADMIN = "admin"
# The worker/trigger log servers (8793/8794) bind every interface, with no setting to change it
# (airflow/utils/serve_logs/core.py: host=""). With LocalExecutor the API server reads the task
# log files from the shared log folder, so the stack runs the scheduler and triggerer without them.
COMMANDS = {
    "api-server": ["api-server", "--host", HOST, "--port", "{api}", "--workers", "1"],
    "scheduler": ["scheduler", "--skip-serve-logs"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer", "--skip-serve-logs"],
}


# a workspace the DAGs run on in about half a minute per run: 10 synthetic days ending yesterday
# (UTC; a scheduled run's eval day is yesterday), 600 requests a day of 25 pins = 150,000
# impressions, and a pipeline config with 5-day windows (the shipped 20 would need 21 days), a
# 3-day base model and a recipe review of 3 days (the shipped 14 days of 3 recipes cannot fit 10
# days: every day failed) of two recipes, the daily one (default) against naive; 2 paired days
# recommend (its first day has no served model to pair); the tests of tests/stack run on it
SMALL_WORKSPACE = {"days": 10, "users": 300, "pins": 600, "requests_per_day": 600, "seed": 11}
SMALL_PIPELINE_CONFIG = """\
# the small stack workspace (infra/stack/stack.py SMALL_WORKSPACE): short windows for 10 days of data
[window]
days = 5
[recipe]
batch_size = 256
schedule = "F,J"
pipeline = "sync"
[pretrain]
days = 3
[review]
days = 3
min_days = 2
recipes = ["naive", "default"]
"""


def small_workspace_commands(ranker_bin: str, home: Path, today: dt.date) -> list[list[str]]:
    """The commands that fill ``home`` with the small workspace (then ranker.toml is written)."""
    size = SMALL_WORKSPACE
    start = today - dt.timedelta(days=size["days"])
    synth = [ranker_bin, "data", "synth", "--home", str(home), "--start", start.isoformat()]
    synth += ["--days", str(size["days"]), "--users", str(size["users"]), "--pins", str(size["pins"])]
    synth += ["--requests-per-day", str(size["requests_per_day"]), "--seed", str(size["seed"])]
    return [synth, [ranker_bin, "features", "apply", "--home", str(home)]]


def has_data(home: Path) -> bool:
    return (home / "source").exists() and any((home / "source").iterdir())


def build_small_workspace(ranker_bin: str, home: Path, today: dt.date, log: Path) -> None:
    """Fill an empty ``home`` with the small workspace; on a failure remove what the build added
    (a half-built workspace has data, so a later `up` would take it as ready)."""
    before = set(home.iterdir()) if home.is_dir() else set()
    try:
        for cmd in small_workspace_commands(ranker_bin, home, today):
            _run(cmd, log)
        write_text(home / "ranker.toml", SMALL_PIPELINE_CONFIG)
    except BaseException:
        added = set(home.iterdir()) - before if home.is_dir() else set()
        if (home / "source") in before:  # it was there but empty (has_data was False)
            added |= set((home / "source").iterdir())
        for path in added:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        raise


def small_workspace_text(ranker_bin: str, home: Path, today: dt.date) -> str:
    """What `up` prints for an empty workspace: the exact commands and the size they make."""
    size = SMALL_WORKSPACE
    impressions = size["days"] * size["requests_per_day"] * 25  # synth's slate size
    lines = [
        f"the workspace {home} has no data yet: the DAGs' steps would fail. A small one "
        f"({size['days']} days ending yesterday, {size['requests_per_day']} requests a day, "
        f"{impressions:,} impressions, under 1 MB, about half a minute to build; a run takes about half a minute):",
        "  make stack STACK_ARGS=--small-workspace      # builds it, or by hand:",
    ]
    lines += ["  " + shlex.join(cmd) for cmd in small_workspace_commands(ranker_bin, home, today)]
    lines.append(f"  and write {home / 'ranker.toml'} (5-day windows for 10 days of data):")
    lines += ["    " + line for line in SMALL_PIPELINE_CONFIG.splitlines()]
    lines.append('  or use an existing workspace: make stack STACK_ARGS="--ranker-home $PWD/var/demo"')
    return "\n".join(lines)


class StackError(RuntimeError):
    """A problem the user can fix: printed as one line, exit 2."""


def say(message: str) -> None:
    print(f"stack: {message}", flush=True)


# -- files -------------------------------------------------------------------------------------


def write_private(path: Path, text: str) -> None:
    """Write atomically with mode 0600 (secrets: never world- or group-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text())) if path.is_file() else {}


# -- processes and health ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def http_get(url: str, timeout: float = 3.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def wait_for(what: str, check: Any, timeout: float, pid: int | None = None, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if pid is not None and not alive(pid):
            tail = log.read_text(errors="replace")[-2000:] if log and log.is_file() else ""
            raise StackError(f"{what} exited before it was healthy; the end of {log}:\n{tail}")
        time.sleep(0.5)
    raise StackError(f"{what} not healthy after {timeout:.0f} s (log: {log})")


def stop_pid(pid: int | None, what: str, grace: float = 20.0) -> None:
    if not alive(pid):
        return
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)  # each component leads its own process group
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        say(f"{what} (pid {pid}) ignored SIGTERM for {grace:.0f} s: SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# -- the stack ---------------------------------------------------------------------------------


class Stack:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.state_file = self.root / "stack.json"
        self.secrets_file = self.root / "secrets.json"
        self.logs = self.root / "logs"
        self.pg_data = self.root / "pg"
        self.airflow_home = self.root / "airflow"
        self.passwords_file = self.airflow_home / "simple_auth_manager_passwords.json"
        self.state = read_json(self.state_file)

    # ports, secrets, environment

    def ports(self) -> dict[str, int]:
        ports: dict[str, int] = dict(self.state.get("ports", {}))
        for name in PORT_NAMES:
            wanted = os.environ.get(f"STACK_{name.upper()}_PORT", "").strip()
            if wanted:
                if not wanted.isdigit() or not 0 < int(wanted) < 65536:
                    raise StackError(f"STACK_{name.upper()}_PORT must be a port number, got {wanted!r}")
                ports[name] = int(wanted)
            elif name not in ports:
                ports[name] = free_port()
        return ports

    def secrets(self) -> dict[str, str]:
        values = read_json(self.secrets_file)
        if not values:
            values = {
                "postgres_password": secrets.token_urlsafe(24),
                "admin_password": secrets.token_urlsafe(12),
                "jwt_secret": secrets.token_urlsafe(32),
                "fernet_key": _fernet_key(),
            }
            write_private(self.secrets_file, json.dumps(values, indent=2) + "\n")
        return {k: str(v) for k, v in values.items()}

    def airflow_env(self, ports: dict[str, int], values: dict[str, str]) -> dict[str, str]:
        cfg = self.state["config"]
        api = f"http://{HOST}:{ports['api']}"
        env = {
            "AIRFLOW_HOME": str(self.airflow_home),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS),  # each retrain task's MLflow link
            "AIRFLOW__CORE__FERNET_KEY": values["fernet_key"],
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": (
                f"postgresql+psycopg2://airflow:{values['postgres_password']}@{HOST}:{ports['postgres']}/airflow"
            ),
            "AIRFLOW__API__HOST": HOST,
            "AIRFLOW__API__PORT": str(ports["api"]),
            "AIRFLOW__API__BASE_URL": api,
            "AIRFLOW__API_AUTH__JWT_SECRET": values["jwt_secret"],
            # the scheduler's health server stays off (it would be one more listener)
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            # the pipeline (dags/ranker_dags/settings.py, ranking/monitoring/delivery.py)
            "RANKER_HOME": cfg["ranker_home"],
            "RANKER_BIN": str(REPO / ".venv" / "bin" / "ranker"),
            "RANKER_PUSHGATEWAY_URL": f"http://{HOST}:{ports['pushgateway']}",
            # the steps log through the server (artifacts uploaded to it, readable in its UI)
            "RANKER_MLFLOW_TRACKING_URI": f"http://{HOST}:{ports['mlflow']}",
            # publish_metrics writes the run's note through the REST API (dags/ranker_dags/notes.py:
            # a task's execution API cannot), as the stack's admin
            "AIRFLOW_CONN_RANKER_AIRFLOW_API": json.dumps(
                {"conn_type": "http", "host": api, "login": ADMIN, "password": values["admin_password"]}
            ),
        }
        if cfg.get("extra_dags"):
            bundles = [
                {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                 "kwargs": {"path": str(REPO / "dags")}},
                {"name": "extra", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                 "kwargs": {"path": cfg["extra_dags"]}},
            ]  # fmt: skip
            env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps(bundles)
        env.update(cfg.get("env", {}))
        return env

    def write_env_file(self, env: dict[str, str]) -> Path:
        path = self.root / "env.sh"
        lines = ["# source this file to run `airflow` / `ranker` against the stack (holds secrets)"]
        lines += [f"export {k}={_shell_quote(v)}" for k, v in sorted(env.items())]
        write_private(path, "\n".join(lines) + "\n")
        return path

    def save_state(self) -> None:
        # private: the state holds the --env values the stack was started with
        write_private(self.state_file, json.dumps(self.state, indent=2, sort_keys=True) + "\n")

    # Postgres

    def pg_bin(self, name: str) -> str:
        found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
        if found:
            return found[-1]
        path = shutil.which(name)
        if path:
            return path
        raise StackError(
            f"Postgres' {name} not found: install the Debian package (infra/ci/install-servers.sh)"
        )

    def pg_user(self) -> list[str]:
        """Postgres refuses to run as root: as root the cluster belongs to the `postgres` user."""
        if os.geteuid() != 0:
            return []
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise StackError("running as root, but there is no `postgres` user to own the cluster") from None
        return ["runuser", "-u", "postgres", "--"]

    def pg_init(self, password: str) -> None:
        if (self.pg_data / "PG_VERSION").is_file():
            return
        say(f"initdb {self.pg_data}")
        self.pg_data.mkdir(parents=True, exist_ok=True)
        os.chmod(self.pg_data, 0o700)
        pwfile = self.root / ".pgpass.init"
        write_private(pwfile, password + "\n")
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.pg_data, entry.pw_uid, entry.pw_gid)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
            _check_traversable(self.pg_data, entry.pw_uid, entry.pw_gid)
        try:
            cmd = [*self.pg_user(), self.pg_bin("initdb"), "-D", str(self.pg_data), "-U", "airflow"]
            cmd += ["--pwfile", str(pwfile), "--auth-host=scram-sha-256", "--auth-local=reject"]
            cmd += ["-E", "UTF8", "--no-instructions"]
            _run(cmd, self.logs / "initdb.log")
        finally:
            pwfile.unlink(missing_ok=True)

    def pg_start(self, port: int) -> None:
        if self.pg_ready(port):
            return
        options = f"-c listen_addresses={HOST} -c port={port} -c unix_socket_directories=''"
        log = self.logs / "postgres.log"
        if os.geteuid() == 0:
            log.touch()
            entry = pwd.getpwnam("postgres")
            os.chown(log, entry.pw_uid, entry.pw_gid)
        cmd = [*self.pg_user(), self.pg_bin("pg_ctl"), "-D", str(self.pg_data), "-l", str(log)]
        cmd += ["-o", options, "-w", "-t", "60", "start"]
        _run(cmd, self.logs / "pg_ctl.log")
        wait_for("postgres", lambda: self.pg_ready(port), 60, log=log)

    def pg_ready(self, port: int) -> bool:
        try:
            cmd = [self.pg_bin("pg_isready"), "-q", "-h", HOST, "-p", str(port)]
        except StackError:
            return False
        return subprocess.run(cmd, capture_output=True).returncode == 0

    def pg_stop(self) -> None:
        if not (self.pg_data / "postmaster.pid").is_file():
            return
        cmd = [*self.pg_user(), self.pg_bin("pg_ctl"), "-D", str(self.pg_data), "-m", "fast", "-w", "stop"]
        subprocess.run(cmd, capture_output=True)

    def pg_database(self, port: int, password: str) -> None:
        env = {**os.environ, "PGPASSWORD": password}
        base = ["-h", HOST, "-p", str(port), "-U", "airflow"]
        listed = subprocess.run(
            [self.pg_bin("psql"), *base, "-d", "postgres", "-tAc", "SELECT 1 FROM pg_database WHERE datname='airflow'"],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if listed.returncode != 0:
            raise StackError(f"cannot query the stack's Postgres: {listed.stderr.strip()}")
        if listed.stdout.strip() != "1":
            _run([self.pg_bin("createdb"), *base, "airflow"], self.logs / "createdb.log", env=env)

    # Airflow, Prometheus, Pushgateway

    def spawn(self, name: str, argv: list[str], env: dict[str, str]) -> int:
        log = self.logs / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=REPO,
                start_new_session=True,  # its own process group: `down` stops it with its children
            )
        return proc.pid

    def airflow(self, env: dict[str, str], *args: str) -> None:
        _run([str(_airflow_bin()), *args], self.logs / "airflow-cli.log", env=env)

    def prometheus_config(self, ports: dict[str, int]) -> Path:
        import yaml  # in .venv-airflow

        source = REPO / "infra" / "prometheus" / "prometheus.yml"
        config = yaml.safe_load(source.read_text())
        config["rule_files"] = [str(REPO / "infra" / "prometheus" / p) for p in config["rule_files"]]
        jobs = {job["job_name"]: job for job in config["scrape_configs"]}
        jobs["pushgateway"]["static_configs"] = [{"targets": [f"{HOST}:{ports['pushgateway']}"]}]
        jobs["prometheus"]["static_configs"] = [{"targets": [f"{HOST}:{ports['prometheus']}"]}]
        jobs.pop("statsd-exporter", None)  # Airflow's statsd metrics belong to the compose stack
        config["scrape_configs"] = list(jobs.values())
        scrape = self.state["config"].get("scrape_interval")
        if scrape:
            config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = scrape
        path = self.root / "prometheus" / "prometheus.yml"
        write_text(
            path, "# generated by infra/stack/stack.py from " + str(source) + "\n" + yaml.safe_dump(config)
        )
        return path

    # up / down / status

    def running(self) -> dict[str, bool]:
        pids = self.state.get("pids", {})
        return {name: alive(pids.get(name)) for name in (*AIRFLOW_COMPONENTS, *SERVERS)}

    def health(self) -> dict[str, str]:
        """Each component's health as the servers themselves report it."""
        ports = self.state.get("ports", {})
        out: dict[str, str] = {}
        out["postgres"] = "healthy" if ports and self.pg_ready(ports["postgres"]) else "down"
        status, body = http_get(f"http://{HOST}:{ports.get('api', 0)}/api/v2/monitor/health")
        report = json.loads(body) if status == 200 else {}
        out["api-server"] = "healthy" if status == 200 else "down"
        for name, key in (
            ("scheduler", "scheduler"),
            ("dag-processor", "dag_processor"),
            ("triggerer", "triggerer"),
        ):
            out[name] = str((report.get(key) or {}).get("status") or "down")  # fmt: skip
        for name in SERVERS:
            status, _ = http_get(f"http://{HOST}:{ports.get(name, 0)}{HEALTH_PATHS[name]}")
            out[name] = "healthy" if status == 200 else "down"
        return out

    def up(self, config: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        build_small = bool(config.pop("small_workspace", False))
        if self.state and all(self.running().values()) and _all_healthy(self.health()):
            say("already running")
            env_file = self.root / "env.sh"
            if env_file.is_file():
                self.say_stale(self.note_airflow_env(env_file, list(AIRFLOW_COMPONENTS)))
            self.fill_running_workspace(build_small)
            self.print_access()
            return
        old = self.state.get("config", {})
        self.state["config"] = {**old, **{k: v for k, v in config.items() if v not in (None, [], {})}}
        self.state["config"].setdefault("ranker_home", str(REPO / "var" / "stack" / "workspace"))
        if not MLFLOW_BIN.exists():
            raise StackError(f"{MLFLOW_BIN} is missing (the MLflow server's environment): run `make setup`")
        ports = self.ports()
        self.state["ports"] = ports
        values = self.secrets()
        env = {**os.environ, **self.airflow_env(ports, values)}
        home = Path(self.state["config"]["ranker_home"])
        home.mkdir(parents=True, exist_ok=True)
        if not has_data(home):
            self.prepare_workspace(home, build=build_small)
        env_file = self.write_env_file(self.airflow_env(ports, values))
        self.save_state()

        self.pg_init(values["postgres_password"])
        self.pg_start(ports["postgres"])
        self.pg_database(ports["postgres"], values["postgres_password"])
        say(f"postgres healthy on {HOST}:{ports['postgres']}")

        # our own password file, 0600, before the API server would generate one (0644 under the
        # usual umask: readable by every local user)
        if read_json(self.passwords_file).get(ADMIN) != values["admin_password"]:
            write_private(self.passwords_file, json.dumps({ADMIN: values["admin_password"]}) + "\n")
        os.chmod(self.passwords_file, 0o600)

        say("airflow db migrate")
        self.airflow(env, "db", "migrate")
        self.airflow(env, "pools", "set", "training", "1", "ranker training jobs")

        pids, stale = self.start_missing(ports, env, env_file)
        for name in SERVERS:
            url = f"http://{HOST}:{ports[name]}{HEALTH_PATHS[name]}"
            wait_for(name, lambda u=url: http_get(u)[0] == 200, 120, pids[name], self.logs / f"{name}.log")
        api_health = f"http://{HOST}:{ports['api']}/api/v2/monitor/health"
        wait_for("api-server", lambda: http_get(api_health)[0] == 200, 180, pids["api-server"],
                 self.logs / "api-server.log")  # fmt: skip
        for name in ("scheduler", "dag-processor", "triggerer"):
            wait_for(
                name, lambda n=name: self.health()[n] == "healthy", 180, pids[name], self.logs / f"{name}.log"
            )
        os.chmod(self.passwords_file, 0o600)  # in case a component rewrote it
        say("all healthy: " + ", ".join(f"{k}={v}" for k, v in self.health().items()))
        say(f"environment for the airflow CLI: source {env_file}")
        self.say_stale(stale)
        self.print_access()

    def say_stale(self, stale: list[str]) -> None:
        if stale:
            say(
                f"{', '.join(stale)} kept running with the environment of an earlier `up` (before this"
                " stack's MLflow, or other --env values): `make stack-down && make stack` restarts them with it"
            )

    def start_missing(
        self, ports: dict[str, int], env: dict[str, str], env_file: Path
    ) -> tuple[dict[str, int], list[str]]:
        """Spawn every process that is not running: (pids, the Airflow components left running
        with an environment other than this one)."""
        pids = dict(self.state.get("pids", {}))
        running = self.running()
        for name in SERVERS:
            if not running[name]:
                pids[name] = self.spawn(name, self.server_argv(name, ports), self.server_env(name, env))
        for name in AIRFLOW_COMPONENTS:
            if not running[name]:
                argv = [str(_airflow_bin()), *(a.format(**ports) for a in COMMANDS[name])]
                pids[name] = self.spawn(name, argv, env)
        self.state["pids"] = pids
        stale = self.note_airflow_env(env_file, [n for n in AIRFLOW_COMPONENTS if running[n]])
        self.save_state()
        return pids, stale

    def note_airflow_env(self, env_file: Path, kept: list[str]) -> list[str]:
        """Record which environment the Airflow components run with (a digest of env.sh); the
        components in ``kept`` were left running from an earlier `up`: those whose environment
        is not this one (a stack from before its MLflow has neither its URI nor the plugins)."""
        digest = hashlib.sha256(env_file.read_bytes()).hexdigest()[:16]
        if not kept:
            self.state["airflow_env"] = digest
            return []
        return kept if self.state.get("airflow_env") != digest else []

    def fill_running_workspace(self, build: bool) -> None:
        """A running stack's workspace, read by each DAG run rather than by the servers: an empty
        one is built now (``build``) or told how; one with data is left as it is."""
        home = Path(self.state.get("config", {}).get("ranker_home") or REPO / "var" / "stack" / "workspace")
        if has_data(home):
            if build:
                say(
                    f"the workspace {home} already holds data: --small-workspace builds only into an empty one"
                )
            return
        home.mkdir(parents=True, exist_ok=True)
        self.prepare_workspace(home, build=build)

    def prepare_workspace(self, home: Path, build: bool) -> None:
        """An empty workspace: build the small one (--small-workspace), else say how."""
        ranker_bin = str(REPO / ".venv" / "bin" / "ranker")
        today = dt.datetime.now(dt.UTC).date()
        if not build:
            for line in small_workspace_text(ranker_bin, home, today).splitlines():
                say(line)
            return
        if not Path(ranker_bin).exists():
            raise StackError(f"{ranker_bin} is missing: run `make setup` before --small-workspace")
        say(f"building the small workspace in {home} (SMALL_WORKSPACE in {Path(__file__).name})")
        started = time.monotonic()
        build_small_workspace(ranker_bin, home, today, self.logs / "workspace.log")
        say(
            f"small workspace ready in {time.monotonic() - started:.0f} s: {home} (log {self.logs / 'workspace.log'})"
        )

    def server_argv(self, name: str, ports: dict[str, int]) -> list[str]:
        if name == "mlflow":
            return self.mlflow_argv(ports[name])
        data = self.root / name
        data.mkdir(parents=True, exist_ok=True)
        if name == "pushgateway":
            binary = shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")
            if not binary:
                raise StackError("prometheus-pushgateway not found: run infra/ci/install-servers.sh")
            return [
                binary,
                f"--web.listen-address={HOST}:{ports[name]}",
                f"--persistence.file={data / 'data'}",
            ]
        binary = shutil.which("prometheus")
        if not binary:
            raise StackError("prometheus not found: run infra/ci/install-servers.sh")
        return [
            binary,
            f"--config.file={self.prometheus_config(ports)}",
            f"--storage.tsdb.path={data / 'tsdb'}",
            f"--web.listen-address={HOST}:{ports[name]}",
            # no --web.enable-lifecycle: its unauthenticated /-/quit would let any local user stop it
        ]

    def mlflow_store(self) -> Path:
        return Path(self.state["config"]["ranker_home"]) / "mlflow"

    def mlflow_argv(self, port: int) -> list[str]:
        """The tracking server on the workspace's store; host and CORS checks name only this address.

        Experiments it creates keep their artifacts in <store>/artifacts, a folder (the default
        artifact root), as those `ranker` creates without a server do: a client writes the files
        there itself, through the server or not, and the UI reads them back through the server. A
        proxied root (mlflow-artifacts:/) would be written only through a server, so a `ranker`
        run on this workspace without RANKER_MLFLOW_TRACKING_URI (env.sh not sourced) could never
        upload and its record would stay queued. The stack is one host; a remote server would
        proxy. --serve-artifacts still serves experiments made with a proxied root."""
        store = self.mlflow_store()
        store.mkdir(parents=True, exist_ok=True)
        origins = [f"http://{HOST}:{port}", f"http://localhost:{port}"]
        return [
            str(MLFLOW_BIN), "server",
            "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
            "--default-artifact-root", str(store / "artifacts"),
            "--serve-artifacts", "--artifacts-destination", str(store / "artifacts"),
            "--host", HOST, "--port", str(port),
            "--workers", "1",
            "--allowed-hosts", ",".join(o.removeprefix("http://") for o in origins),
            "--cors-allowed-origins", ",".join(origins),
        ]  # fmt: skip

    def server_env(self, name: str, env: dict[str, str]) -> dict[str, str]:
        if name != "mlflow":
            return env
        # the stack's secrets stay out of MLflow's environment; its job runner (GenAI jobs, which
        # the pipeline has none of) stays off: measured here, 2 processes and 0.5 GB RSS instead of
        # 10 and 2.3 GB, healthy in 3.5 s instead of 4.9
        own = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RANKER_"))}
        return {**own, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}

    def print_access(self) -> None:
        ports = self.state["ports"]
        values = read_json(self.secrets_file)
        say(f"Airflow UI   http://{HOST}:{ports['api']}/  login {ADMIN} / {values.get('admin_password')}"
            f"  (password file {self.passwords_file}, mode 0600)")  # fmt: skip
        say(
            f"Prometheus   http://{HOST}:{ports['prometheus']}/   Pushgateway http://{HOST}:{ports['pushgateway']}/"
        )
        say(f"Postgres     {HOST}:{ports['postgres']} db airflow (password in {self.secrets_file})")
        if "mlflow" in ports:
            say(f"MLflow UI    http://{HOST}:{ports['mlflow']}/   store {self.mlflow_store()}")
        say(f"workspace    RANKER_HOME={self.state['config']['ranker_home']}   logs {self.logs}")

    def down(self) -> None:
        pids = self.state.get("pids", {})
        for name in ("scheduler", "triggerer", "dag-processor", "api-server", *SERVERS):
            stop_pid(pids.get(name), name)
        self.pg_stop()
        self.state["pids"] = {}
        if self.state_file.is_file():
            self.save_state()
        say(f"stopped (data kept in {self.root}; `rm -rf {self.root}` for a fresh stack)")


def _all_healthy(health: dict[str, str]) -> bool:
    return all(v == "healthy" for v in health.values())


def _fernet_key() -> str:
    import base64

    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _airflow_bin() -> Path:
    path = Path(sys.executable).with_name("airflow")
    if not path.exists():
        raise StackError(f"{path} not found: run stack.py with .venv-airflow/bin/python (`make setup`)")
    return path


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO).returncode
    if rc != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise StackError(f"`{' '.join(cmd[:3])} ...` failed (exit {rc}); the end of {log}:\n{tail}")


def _check_traversable(path: Path, uid: int, gid: int) -> None:
    for parent in path.parents:
        st = parent.stat()
        ok = (
            st.st_mode & 0o001
            or (st.st_uid == uid and st.st_mode & 0o100)
            or (st.st_gid == gid and st.st_mode & 0o010)
        )
        if not ok:
            raise StackError(f"the postgres user cannot enter {parent}: put the stack elsewhere with --dir")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stack", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--dir", default=os.environ.get("STACK_DIR") or str(REPO / "var" / "stack"))
    parser.add_argument(
        "--ranker-home", help="the workspace the DAGs use (default <repo>/var/stack/workspace)"
    )
    parser.add_argument(
        "--small-workspace",
        action="store_true",
        help="build a small synthetic workspace when the DAGs' one has no data (never over existing data)",
    )
    parser.add_argument("--extra-dags", help="a second DAG bundle folder (tests/stack/dags)")
    parser.add_argument(
        "--scrape-interval", help="Prometheus scrape/evaluation interval (default: the repo's)"
    )
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra environment of the Airflow components (RANKER_*, AIRFLOW__*)")  # fmt: skip
    args = parser.parse_args(argv)
    stack = Stack(Path(args.dir))
    try:
        extra_env = {}
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep or not key.replace("_", "").isalnum():
                raise StackError(f"--env takes KEY=VALUE, got {item!r}")
            extra_env[key] = value
        for name, value in (("--ranker-home", args.ranker_home), ("--extra-dags", args.extra_dags)):
            if value and not Path(value).is_absolute():
                raise StackError(f"{name} must be an absolute path, got {value!r}")
        if args.action == "up":
            stack.up({
                "ranker_home": args.ranker_home,
                "extra_dags": args.extra_dags,
                "scrape_interval": args.scrape_interval,
                "small_workspace": args.small_workspace,
                "env": extra_env,
            })  # fmt: skip
        elif args.action == "down":
            stack.down()
        else:
            if not stack.state:
                say(f"no stack in {stack.root}")
                return 1
            health = stack.health()
            say(", ".join(f"{k}={v}" for k, v in health.items()))
            stack.print_access()
            return 0 if _all_healthy(health) else 1
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
