"""Starts and stops the whole local system: emulator, resources, functions, API, triggers."""

from __future__ import annotations

import errno
import json
import logging
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

from sundial.local import emulator
from sundial.local.functions import STOP_GRACE_S, FunctionHost, HostOptions
from sundial.local.gateway import DEFAULT_CALLER, Gateway
from sundial.local.provision import assign_names, create_resources
from sundial.local.streams import StreamPoller
from sundial.local.tally import JobTally
from sundial.local.template import LocalTemplate, TemplateError
from sundial.local.triggers import QueuePoller, ScheduleRunner

log = logging.getLogger("sundial.local")
# How long start-up waits for the functions' processes to load their handlers.
LOAD_TIMEOUT_S = 300


class PortInUse(Exception):
    def __init__(self, port: int, variable: str) -> None:
        super().__init__(f"port {port} is already in use: set {variable} to a free port")


@dataclass(frozen=True)
class LocalConfig:
    assembly_dir: Path = Path("cdk.out")
    stack_name: str = "Sundial"
    host: str = "127.0.0.1"
    api_port: int = 8000
    emulator_port: int = 5000
    log_path: Path | None = None
    run_schedules: bool = True
    # Who a request without an X-Sundial-Caller header is signed as (SUNDIAL_LOCAL_CALLER): an
    # IAM role or user ARN, or an account id (its root). The default is the emulator account's
    # root, which a queue without access lists lets do everything.
    caller: str = DEFAULT_CALLER

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.api_port}"

    @property
    def emulator_url(self) -> str:
        return f"http://{self.host}:{self.emulator_port}"


def check_port_free(host: str, port: int, variable: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the servers bind: a port a previous run left in TIME-WAIT is free to use again.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                raise PortInUse(port, variable) from None
            raise


def check_ports(config: LocalConfig) -> None:
    """Raises PortInUse (naming the variable to change) unless both ports are free."""
    check_port_free(config.host, config.emulator_port, "SUNDIAL_EMULATOR_PORT")
    check_port_free(config.host, config.api_port, "SUNDIAL_API_PORT")


class LocalRuntime:
    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self.stop_event = threading.Event()
        self.counts: Counter[str] = Counter()  # "<queue>:done|failed" from event source mappings
        self.consumed_queues: set[str] = set()  # Sundial queues with an event source mapping
        self.tally = JobTally()  # jobs and DAG nodes by status, from the table's stream
        self.stream_readers: list[StreamPoller] = []
        self.template = LocalTemplate.load(config.assembly_dir, config.stack_name)
        self.session = boto3.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
        )
        self.hosts: dict[str, FunctionHost] = {}
        self.queue_names: dict[str, str] = {}  # queue name -> URL, for people
        self._emulator: ThreadedMotoServer | None = None
        self._server: ThreadingHTTPServer | None = None
        self._async_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="async-invoke")
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        config = self.config
        check_ports(config)
        emulator.install()  # moto's transactions, fixed (sundial.local.emulator)
        self._emulator = ThreadedMotoServer(
            ip_address=config.host, port=config.emulator_port, verbose=False
        )
        self._emulator.start()
        assign_names(self.template, config.emulator_url)
        create_resources(self.template, self.session, config.emulator_url)
        options = HostOptions(
            emulator_url=config.emulator_url, lambda_url=config.api_url, log_path=config.log_path
        )
        self.hosts = {
            lid: FunctionHost(spec, options) for lid, spec in self.template.functions().items()
        }
        for host in self.hosts.values():
            host.start()
        # Ready means answering: each function's first process has loaded its handler (on a
        # busy machine that takes half a minute, which the first call used to wait out).
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        slow = [h.spec.name for h in self.hosts.values() if not h.wait_loaded(deadline)]
        if slow:
            log.warning("not loaded after %d s (their first call starts them): %s",
                        LOAD_TIMEOUT_S, ", ".join(slow))  # fmt: skip
        gateway = Gateway(
            routes=self.template.routes(),
            hosts=self.hosts,
            async_pool=self._async_pool,
            default_caller=config.caller,
        )
        self._server = gateway.serve(config.host, config.api_port)
        self._start_thread(
            threading.Thread(target=self._server.serve_forever, name="api", daemon=True)
        )
        self._start_triggers()
        if config.run_schedules:
            for schedule in self.template.schedules():
                targets = [self.hosts[t] for t in schedule.targets]
                self._start_thread(ScheduleRunner(schedule, targets, self.stop_event))

    def _start_triggers(self) -> None:
        """A poller per event source mapping: SQS queues and the table's stream."""
        config = self.config
        sqs = self.session.client("sqs", endpoint_url=config.emulator_url)
        for lid in self.template.of_type("AWS::SQS::Queue"):
            self.queue_names[self.template.get_att(lid, "QueueName")] = self.template.physical[lid]
        sundial_names = {url: name for name, url in self.job_queue_urls().items()} | {
            url: f"{name} (priority)" for name, url in self.priority_queue_urls().items()
        }
        streams = self.session.client("dynamodbstreams", endpoint_url=config.emulator_url)
        s3 = self.session.client("s3", endpoint_url=config.emulator_url)
        for source in self.template.event_sources():
            if source.kind == "dynamodb":
                reader = StreamPoller(
                    source,
                    stream_arn=self.template.get_att(source.source, "StreamArn"),
                    target=self.hosts[source.function],
                    streams=streams,
                    s3=s3,
                    stop=self.stop_event,
                    counts=self.counts,
                    name=f"stream:{self.hosts[source.function].spec.name}",
                    # One reader counts for the live table (each sees every record).
                    observers=[] if self.stream_readers else [self.tally.observe],
                )
                self.stream_readers.append(reader)
                self._start_thread(reader)
                continue
            url = self.template.physical[source.source]
            name = sundial_names.get(url, self.template.get_att(source.source, "QueueName"))
            self.consumed_queues.add(name)
            self._start_thread(
                QueuePoller(
                    source,
                    queue_url=url,
                    queue_arn=self.template.get_att(source.source, "Arn"),
                    target=self.hosts[source.function],
                    sqs=sqs,
                    stop=self.stop_event,
                    counts=self.counts,
                    queue_name=name,
                )
            )

    def _start_thread(self, thread: threading.Thread) -> None:
        thread.start()
        self._threads.append(thread)

    def job_queue_urls(self) -> dict[str, str]:
        """The job queues' URLs by Sundial queue name, as the functions' environment has them."""
        return self._urls_variable("SUNDIAL_QUEUE_URLS")

    def priority_queue_urls(self) -> dict[str, str]:
        """The priority queues' URLs by the name of the queue they belong to."""
        return self._urls_variable("SUNDIAL_PRIORITY_QUEUE_URLS")

    def _urls_variable(self, variable: str) -> dict[str, str]:
        host = next(h for h in self.hosts.values() if "SUNDIAL_QUEUE_URLS" in h.spec.environment)
        urls: dict[str, str] = json.loads(host.spec.environment.get(variable, "{}"))
        return urls

    def bucket_name(self, logical_id_part: str) -> str:
        """The emulator name of the one bucket whose logical id contains `logical_id_part`."""
        [name] = [
            self.template.physical[lid]
            for lid in self.template.of_type("AWS::S3::Bucket")
            if logical_id_part in lid
        ]
        return name

    def table_name(self) -> str:
        tables = list(self.template.of_type("AWS::DynamoDB::Table"))
        if len(tables) != 1:
            raise TemplateError("expected exactly one DynamoDB table")
        return self.template.physical[tables[0]]

    def stop(self) -> None:
        """Everything at once, within a bound: no new request or trigger; every function's
        containers asked to end together (a poller waiting on one is released); then what is
        left is waited for until one shared deadline (it took ~40 s when each thread and
        container was waited for in turn, up to 3 and 5 s each)."""
        deadline = time.monotonic() + STOP_GRACE_S
        self.stop_event.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._async_pool.shutdown(wait=False, cancel_futures=True)
        for host in self.hosts.values():
            host.terminate()
        for host in self.hosts.values():
            host.reap(deadline)
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._emulator is not None:
            self._emulator.stop()
