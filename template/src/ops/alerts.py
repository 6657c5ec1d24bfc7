"""Alerts: a run that fails, diverges, stalls or leaves its GPU idle says so, once per kind:
printed (console.log has it), recorded in run.json's "alerts", sent to W&B (`run.alert`) when
the run logs there online, and by email and webhook where the config's `alerts` names them,
on threads of their own, so a server that is down or hangs costs one warning line."""

from __future__ import annotations

import getpass
import json
import math
import os
import smtplib
import socket
import sys
import threading
import urllib.request
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from src.config import AlertConfig, first_line
from src.errors import TrainingDiverged
from src.runs.directory import record_in_run_json, resume_advice, run_record
from src.wandb_utils import current_run

ONCE_PER_RUN = ("stalled", "low GPU use", "GPU memory")  # conditions, not the end of a session
LOW_USE_READINGS = 3  # in a row: a single reading can fall between two steps


class Alerts:
    """Raises one run's alerts. `record` writes them into the run's run.json: the run's own
    process does; an observer (the babysitter) keeps its own log instead."""

    def __init__(self, cfg: AlertConfig, run_dir: Path, record: bool = True) -> None:
        self.cfg, self.run_dir, self.record = cfg, run_dir, record
        self.sent: set[str] = set()
        self._low_readings = 0

    def send(self, kind: str, text: str, level: str = "WARN") -> bool:
        """Raise an alert of `kind` (level INFO, WARN or ERROR, as W&B has them) unless one was
        raised already. Returns at once; never raises."""
        # A condition is raised once in any session of the run; an end once in this process
        # (start_run and a callback may both see a run diverge).
        raised = run_record(self.run_dir).get("alerts", [])
        if kind in self.sent or any(
            a.get("kind") == kind and (kind in ONCE_PER_RUN or a.get("pid") == os.getpid()) for a in raised
        ):
            return False
        self.sent.add(kind)
        title = f"{self.run_dir.name}: {kind}"
        print(f"ALERT {level} {title}: {text}", file=sys.stderr, flush=True)
        try:
            if self.record:
                now = datetime.now().isoformat(timespec="seconds")
                alert = {"kind": kind, "level": level, "text": text, "time": now, "pid": os.getpid()}
                record_in_run_json(self.run_dir, alerts=[*run_record(self.run_dir).get("alerts", []), alert])
            if (run := current_run()) is not None and not getattr(run, "offline", True):
                run.alert(title=title[:63], text=text, level=level)  # W&B takes titles under 64
        except Exception as error:  # noqa: BLE001 - a full disk or W&B's hiccup must not end the run
            _warn(kind, "run.json or W&B", error)
        payload = {"text": f"{title}\n{text}", "run": self.run_dir.name, "kind": kind, "level": level}
        wanted = {"webhook": self._webhook_url(), "email": self.cfg.email_to}
        for channel in filter(wanted.get, wanted):  # no daemon: a failing run still sends before it ends
            threading.Thread(target=self._deliver, args=(channel, payload), name=f"alert-{channel}").start()
        return True

    def run_ended(self, error: BaseException | None, signal_name: str | None = None) -> None:
        """The alert for how a session ended: failed, diverged, stopped by a signal, or (with
        `on_finish`) finished. Ctrl-C raises none: whoever pressed it knows."""
        if error is None:
            if self.cfg.on_finish:  # a run may write no report (--output.no-report)
                report = self.run_dir / "report.md"
                text = f"finished; its report: {report}" if report.is_file() else "finished"
                self.send("finished", text, "INFO")
        elif signal_name:
            self.send("stopped", f"{signal_name} stopped it; {resume_advice(self.run_dir)}")
        elif isinstance(error, TrainingDiverged):
            self.send("diverged", str(error), "ERROR")
        elif not isinstance(error, KeyboardInterrupt | SystemExit):
            self.send("failed", f"{type(error).__name__}: {first_line(error)}", "ERROR")

    def evaluated(self, metric: str, value: float, evaluations_since_best: int, where: str) -> None:
        """After each evaluation: a value that is not a number, or one that has not improved
        for `stalled_evaluations` evaluations."""
        if not math.isfinite(value):
            self.send("diverged", f"{metric} is {value} at {where}", "ERROR")
        elif 0 < self.cfg.stalled_evaluations <= evaluations_since_best:
            since = f"{evaluations_since_best} evaluations"
            self.send("stalled", f"{metric} has not improved for {since}, at {where}")

    def gpu_read(self, readings: dict[str, float]) -> None:
        """A reading of the GPU the run trains on, as src.ops.hardware.gpu_readings takes it."""
        use = readings.get("system/gpu_utilization_percent")
        memory = readings.get("system/gpu_memory_percent")
        low = use is not None and use < self.cfg.gpu_utilization_below
        self._low_readings = self._low_readings + 1 if low else 0
        if self._low_readings >= LOW_USE_READINGS:
            busy = f"the GPU was {use:.0f}% busy at {LOW_USE_READINGS} readings in a row"
            self.send("low GPU use", f"{busy}: is loading the data the bottleneck?")
        if memory is not None and memory > self.cfg.gpu_memory_above:
            self.send("GPU memory", f"{memory:.0f}% of the GPU's memory is in use: near running out")

    def _deliver(self, channel: str, payload: dict[str, Any]) -> None:
        try:
            if channel == "email":
                self._email(payload)
            else:  # urlopen raises on 4xx and 5xx
                headers = {"Content-Type": "application/json"}
                request = urllib.request.Request(self._webhook_url(), json.dumps(payload).encode(), headers)
                urllib.request.urlopen(request, timeout=self.cfg.timeout_seconds).close()
        except Exception as error:  # noqa: BLE001 - whatever the server did, training goes on
            _warn(payload["kind"], channel, error)

    def _webhook_url(self) -> str:
        # The environment's first: a URL that holds a token stays out of config.json and W&B.
        return os.environ.get("ALERT_WEBHOOK_URL") or self.cfg.webhook_url

    def _email(self, payload: dict[str, Any]) -> None:
        host, _, port = self.cfg.smtp_server.rpartition(":")
        user = os.environ.get("ALERT_SMTP_USER", "")
        message = EmailMessage()
        title, _, text = payload["text"].partition("\n")
        message["Subject"], message["To"] = f"[{payload['level']}] {title}", self.cfg.email_to
        message["From"] = user if "@" in user else f"{getpass.getuser()}@{socket.getfqdn()}"
        message.set_content(text)
        server = smtplib.SMTP_SSL if port == "465" else smtplib.SMTP
        with server(host, int(port), timeout=self.cfg.timeout_seconds) as smtp:
            smtp.ehlo()
            if server is smtplib.SMTP and smtp.has_extn("starttls"):
                smtp.starttls()  # login and send_message greet the server again, over TLS
            if user:
                smtp.login(user, os.environ.get("ALERT_SMTP_PASSWORD", ""))
            smtp.send_message(message)


def _warn(kind: str, channel: str, error: BaseException) -> None:
    reason = getattr(error, "reason", None)  # urllib's URLError wraps what went wrong
    cause = reason if isinstance(reason, BaseException) else error
    # smtplib reports a timeout as the server disconnecting, raised while handling it
    timed_out = isinstance(cause, TimeoutError) or isinstance(cause.__context__, TimeoutError)
    said = "timed out" if timed_out else first_line(cause)
    print(f"warning: alert {kind!r} not delivered by {channel}: {said}", file=sys.stderr, flush=True)
