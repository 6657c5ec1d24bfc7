"""Items no program can check honestly from the code or one run directory, with why."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ManualItem:
    id: str
    title: str
    applies_to: tuple[str, ...]
    reason: str


MANUAL = [
    ManualItem(
        "RES-1",
        "a killed run resumes with model, optimizer, scheduler, counters and RNG restored",
        ("all",),
        "needs a run killed mid-way, resumed, and compared with an uninterrupted one "
        "(the project's tests do this for each part; a finished run directory cannot show it)",
    ),
    ManualItem(
        "RES-2",
        "step counting follows optimizer steps; schedules from the real dataloader length",
        ("nn",),
        "a property of the training arithmetic under gradient accumulation, not of any one call "
        "or file: review schedule code when you change it",
    ),
    ManualItem(
        "DDP-1",
        "the same code runs under DDP, SLURM and torchrun, distributed-correct",
        ("nn",),
        "needs several devices or nodes to observe per-rank seeding, rank-zero writing and "
        "synchronized metrics",
    ),
    ManualItem(
        "DDP-2",
        "data preparation happens once per node, the other ranks wait",
        ("all",),
        "needs a multi-rank launch to see which rank prepares and that the others wait",
    ),
    ManualItem(
        "OPS-3",
        "a babysitter watches a running job and writes its findings to logs/",
        ("all",),
        "judging process health, trends, hangs and restarts needs a live job (src/babysit.py "
        "has its own tests)",
    ),
    ManualItem(
        "OPS-4",
        "experiments and issues recorded under experiments/ and issues/ before or with the fix",
        ("all",),
        "a working practice: whether a record was written when it should have been is not in the code",
    ),
]
