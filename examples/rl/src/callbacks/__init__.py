"""The callbacks every Lightning part shares, by feature: guards (NaN loss, STOP file, wall
clock, alerts), resume (exact resume after a kill), metrics (timing and the rest), progress
(the bar and the epoch lines). src.training.trainer orders them."""

import lightning as L
import torch


def logs_this_step(trainer: L.Trainer) -> bool:
    """Whether this step's metrics reach the loggers (every log_every_n_steps): the steps a check
    or metric that waits for the GPU is worth its cost on. Private Lightning state, which its own
    LearningRateMonitor reads; a change shows in test_gradient_norm_is_logged_at_each_step_lightning_logs."""
    return trainer._logger_connector.should_update_logs


def log_epoch_figures(trainer: L.Trainer, pl_module: L.LightningModule, figures: dict[str, float]) -> None:
    """An epoch's figures that no callback monitors, straight to the loggers at the step of the
    epoch's aggregates, as Lightning's LearningRateMonitor hands its own over: `self.log` costs
    about 0.2 ms a key on a 2-core CPU. Under DDP, the ranks' mean (DDP-1) in one collective."""
    if trainer.world_size > 1:
        values = torch.tensor(list(figures.values()), dtype=torch.float64, device=pl_module.device)
        figures = dict(zip(figures, trainer.strategy.reduce(values, reduce_op="mean").tolist(), strict=True))
    log_to_loggers(trainer, figures, epoch_end=True)


def log_to_loggers(trainer: L.Trainer, figures: dict[str, float], epoch_end: bool = False) -> None:
    """`figures` from rank zero to every logger, with the epoch, at the step Lightning logs this
    training step's own metrics at (it counts the step after them), or at the epoch's end the
    step of its aggregates, the last step's. The step is private Lightning state; a change shows
    in test_step_and_epoch_figures_share_the_steps_of_lightnings_metrics."""
    if trainer.is_global_zero:
        step = trainer.fit_loop.epoch_loop._batches_that_stepped - (1 if epoch_end else 0)
        for logger in trainer.loggers:
            logger.log_metrics({**figures, "epoch": trainer.current_epoch}, step=step)
