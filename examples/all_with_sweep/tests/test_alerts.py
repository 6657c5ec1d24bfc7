"""Alerts (src.ops.alerts): delivered to a webhook and by email, to servers the tests start
on free ports, once per kind; a server that is down or hangs costs a warning line, never
the run; real runs that stall raise them."""

from __future__ import annotations

import base64
import dataclasses
import email
import json
import socket
import socketserver
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from conftest import PARTS, deliveries_done, noise_regression, part_module, slow

from src.config import AlertConfig
from src.ops.alerts import Alerts
from src.runs.metrics_jsonl import read_jsonl


@pytest.fixture
def smtp_server():
    """A local SMTP server on a free port, just enough of one for smtplib: .port, .messages
    (each an email.message.Message) and .logins (the user and password of each AUTH PLAIN)."""
    messages, logins = [], []

    class Session(socketserver.StreamRequestHandler):
        def reply(self, line: str) -> None:
            self.wfile.write(f"{line}\r\n".encode())

        def handle(self) -> None:
            self.reply("220 localhost ESMTP")
            data: list[bytes] | None = None
            while line := self.rfile.readline():
                if data is not None:  # the message, up to a line with a single dot
                    if line.rstrip(b"\r\n") == b".":
                        messages.append(email.message_from_bytes(b"".join(data)))
                        data = None
                        self.reply("250 queued")
                    else:
                        data.append(line)
                    continue
                command = line.decode().strip()
                verb = command.split(" ")[0].upper()
                if verb == "EHLO":
                    self.reply("250-localhost")
                    self.reply("250 AUTH PLAIN")
                elif verb == "AUTH":
                    _, user, password = base64.b64decode(command.split(" ")[2]).split(b"\0")
                    logins.append((user.decode(), password.decode()))
                    self.reply("235 authenticated")
                elif verb == "DATA":
                    data = []
                    self.reply("354 go on")
                elif verb == "QUIT":
                    self.reply("221 bye")
                    return
                else:  # MAIL, RCPT, RSET, NOOP
                    self.reply("250 ok")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Session)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield SimpleNamespace(port=server.server_address[1], messages=messages, logins=logins)
    server.shutdown()
    server.server_close()


def a_run(tmp_path):
    run_dir = tmp_path / "baseline_20260101_120000"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"status": "running", "history": []}))
    return run_dir


def test_an_alert_goes_to_the_webhook_and_by_email_once_per_kind(
    tmp_path, monkeypatch, capsys, webhook, smtp_server
):
    monkeypatch.setenv("ALERT_SMTP_USER", "trainer@example.com")
    monkeypatch.setenv("ALERT_SMTP_PASSWORD", "s3cret")
    run_dir = a_run(tmp_path)
    cfg = AlertConfig(
        webhook_url=webhook.url, email_to="ml@example.com", smtp_server=f"127.0.0.1:{smtp_server.port}"
    )
    alerts = Alerts(cfg, run_dir)
    assert alerts.send("stalled", "val_loss has not improved for 5 evaluations")
    assert not alerts.send("stalled", "val_loss has not improved for 6 evaluations")  # once per kind
    # A resumed session of the run: a condition is not raised again, how it ends is.
    resumed = Alerts(cfg, run_dir)
    assert not resumed.send("stalled", "val_loss has not improved for 7 evaluations")
    resumed.run_ended(RuntimeError("CUDA error: an illegal memory access was encountered"))
    deliveries_done()
    # Each delivery has a thread of its own: they arrive in any order.
    assert sorted((post["kind"], post["level"]) for post in webhook.received) == [
        ("failed", "ERROR"),
        ("stalled", "WARN"),
    ]
    stalled = f"{run_dir.name}: stalled\nval_loss has not improved for 5 evaluations"
    assert next(post["text"] for post in webhook.received if post["kind"] == "stalled") == stalled
    assert sorted(message["Subject"] for message in smtp_server.messages) == [
        f"[ERROR] {run_dir.name}: failed",
        f"[WARN] {run_dir.name}: stalled",
    ]
    failed = next(m for m in smtp_server.messages if "failed" in m["Subject"])
    assert failed["To"] == "ml@example.com" and failed["From"] == "trainer@example.com"
    assert "RuntimeError: CUDA error: an illegal memory access" in failed.get_payload()
    assert smtp_server.logins == [("trainer@example.com", "s3cret")] * 2  # from the environment
    recorded = [(a["kind"], a["level"]) for a in json.loads((run_dir / "run.json").read_text())["alerts"]]
    assert recorded == [("stalled", "WARN"), ("failed", "ERROR")]
    assert "ALERT WARN baseline_20260101_120000: stalled: val_loss has not" in capsys.readouterr().err


def test_gpu_readings_raise_low_use_after_three_in_a_row_and_memory_at_once(tmp_path, webhook):
    alerts = Alerts(AlertConfig(webhook_url=webhook.url), a_run(tmp_path))
    for _ in range(5):  # a machine without a GPU reads nothing, and is never told of one
        alerts.gpu_read({})
    for use in (5.0, 9.0, 80.0, 3.0, 4.0):  # the busy reading starts the count again
        alerts.gpu_read({"system/gpu_utilization_percent": use, "system/gpu_memory_percent": 40.0})
    deliveries_done()
    assert webhook.received == []
    alerts.gpu_read({"system/gpu_utilization_percent": 2.0, "system/gpu_memory_percent": 97.5})
    deliveries_done()
    assert sorted((post["kind"], post["text"].split("\n")[1]) for post in webhook.received) == [
        ("GPU memory", "98% of the GPU's memory is in use: near running out"),
        ("low GPU use", "the GPU was 2% busy at 3 readings in a row: is loading the data the bottleneck?"),
    ]


@pytest.mark.parametrize("server", ["refused", "hangs"])
def test_a_server_that_refuses_or_hangs_costs_a_warning_line_not_the_run(
    tmp_path, capsys, hanging_port, server
):
    if server == "refused":
        with socket.create_server(("127.0.0.1", 0)) as closed:
            port = closed.getsockname()[1]
    else:
        port = hanging_port
    cfg = AlertConfig(
        webhook_url=f"http://127.0.0.1:{port}/hook",
        email_to="ml@example.com",
        smtp_server=f"127.0.0.1:{port}",
        timeout_seconds=1.0,
    )
    started = time.monotonic()
    Alerts(cfg, a_run(tmp_path)).send("diverged", "val_loss is nan at epoch 3", "ERROR")
    assert time.monotonic() - started < cfg.timeout_seconds  # the caller never waits on the servers
    deliveries_done()
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning")]
    said = "timed out" if server == "hangs" else "[Errno 111] Connection refused"
    assert sorted(warnings) == [
        f"warning: alert 'diverged' not delivered by email: {said}",
        f"warning: alert 'diverged' not delivered by webhook: {said}",
    ]


def test_the_finish_alert_names_the_report_only_where_there_is_one(tmp_path, webhook):
    for folder in ("reported", "unreported"):
        (tmp_path / folder).mkdir()
    reported, unreported = a_run(tmp_path / "reported"), a_run(tmp_path / "unreported")
    (reported / "report.md").write_text("# The run\n")
    for run_dir in (reported, unreported):
        Alerts(AlertConfig(webhook_url=webhook.url, on_finish=True), run_dir).run_ended(None)
        deliveries_done()
    texts = [post["text"].splitlines()[-1] for post in webhook.received]
    assert texts == [f"finished; its report: {reported / 'report.md'}", "finished"]


@slow
def test_a_run_whose_metric_stalls_alerts_once_and_when_it_finishes(tmp_path, webhook):
    """A min_delta no change can reach: no validation after the first improves. The GPU
    thresholds always hold on a GPU, and are never read without one."""
    if "sl_neural" not in PARTS:
        pytest.skip("this project has no sl_neural part")
    base = part_module("sl_neural", "config").CONFIGS["smoke"]()
    alerts = AlertConfig(
        webhook_url=webhook.url,
        stalled_evaluations=1,
        on_finish=True,
        gpu_utilization_below=100.0,
        gpu_memory_above=0.0,
    )
    cfg = dataclasses.replace(
        base,
        output=dataclasses.replace(base.output, base_dir=str(tmp_path)),
        wandb_mode="disabled",
        min_delta=100.0,
        alerts=alerts,
    )
    part_module("sl_neural", "train").main_with_config(cfg)
    deliveries_done()
    kinds = [post["kind"] for post in webhook.received]
    gpu_kinds = ["GPU memory", "low GPU use"] if torch.cuda.is_available() else []
    assert sorted(kinds) == sorted(["stalled", "finished", *gpu_kinds]), kinds
    stalled = next(post for post in webhook.received if post["kind"] == "stalled")
    assert "val_loss has not improved for 1 evaluations, at epoch 1" in stalled["text"]
    (run_dir,) = tmp_path.glob("smoke_*")
    recorded = json.loads((run_dir / "run.json").read_text())["alerts"]
    assert sorted(alert["kind"] for alert in recorded) == sorted(kinds)
    assert "ALERT WARN " in (run_dir / "console.log").read_text()


@slow
def test_a_tree_run_that_stalls_alerts_at_its_first_round_without_improvement(tmp_path, webhook):
    if "sl_tree" not in PARTS:
        pytest.skip("this project has no sl_tree part")
    base = part_module("sl_tree", "config").CONFIGS["smoke"]()
    cfg = dataclasses.replace(
        base,
        output=dataclasses.replace(base.output, base_dir=str(tmp_path)),
        wandb_mode="disabled",
        alerts=AlertConfig(webhook_url=webhook.url, stalled_evaluations=2),
        **noise_regression(tmp_path / "noise.csv"),
    )
    part_module("sl_tree", "train").main_with_config(cfg)
    deliveries_done()
    (run_dir,) = tmp_path.glob("smoke_*")
    rounds = [event for event in read_jsonl(run_dir / "metrics.jsonl") if event.get("event") == "metrics"]
    stalled_at = next(e["round"] for e in rounds if e["tracking/epochs_since_improvement"] >= 2)
    (post,) = webhook.received
    assert post["kind"] == "stalled" and post["text"].endswith(f"for 2 evaluations, at round {stalled_at}")
