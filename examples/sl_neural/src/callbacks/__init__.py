"""The callbacks every Lightning part shares, by feature: guards (NaN loss, STOP file, wall
clock, alerts), resume (exact resume after a kill), metrics (timing and the rest), progress
(the bar and the epoch lines). src.training.trainer orders them."""

import lightning as L


def logs_this_step(trainer: L.Trainer) -> bool:
    """Whether this step's metrics reach the loggers (every log_every_n_steps): the steps a check
    or metric that waits for the GPU is worth its cost on. Private Lightning state, which its own
    LearningRateMonitor reads; a change shows in test_gradient_norm_is_logged_at_each_step_lightning_logs."""
    return trainer._logger_connector.should_update_logs
