"""Callbacks shared by every Lightning part, one concern per module."""

from src.callbacks.batch_metrics import BatchMetricsCallback
from src.callbacks.early_stopping import ResumableEarlyStopping
from src.callbacks.epoch_summary import EpochSummaryCallback
from src.callbacks.finite_loss import FiniteLossCallback
from src.callbacks.frozen_heap import FrozenHeapCallback
from src.callbacks.moved_run import MovedRunCallback
from src.callbacks.periodic_checkpoint import PeriodicCheckpointCallback
from src.callbacks.plateau_resume import PlateauResumeCallback
from src.callbacks.progress_bar import ProgressBar
from src.callbacks.resumed_metrics import ResumedMetricsCallback
from src.callbacks.rng_state import RngStateCallback
from src.callbacks.run_info import RunInfoCallback
from src.callbacks.schedule_length import ScheduleLengthCallback
from src.callbacks.stop_file import StopFileCallback
from src.callbacks.system_metrics import SystemMetricsCallback
from src.callbacks.timing import TimingCallback
from src.callbacks.tracking import TrackingCallback
from src.callbacks.training_end import TrainingEndCallback
from src.callbacks.wall_clock import WallClockTimer

__all__ = [
    "BatchMetricsCallback",
    "EpochSummaryCallback",
    "FiniteLossCallback",
    "FrozenHeapCallback",
    "MovedRunCallback",
    "PeriodicCheckpointCallback",
    "PlateauResumeCallback",
    "ProgressBar",
    "ResumableEarlyStopping",
    "ResumedMetricsCallback",
    "RngStateCallback",
    "RunInfoCallback",
    "ScheduleLengthCallback",
    "StopFileCallback",
    "SystemMetricsCallback",
    "TimingCallback",
    "TrackingCallback",
    "TrainingEndCallback",
    "WallClockTimer",
]
