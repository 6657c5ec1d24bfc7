"""Lightning calls a callback's per-batch hooks only where the callback defines them."""

from __future__ import annotations

from collections.abc import Iterable

import lightning as L

BATCH_HOOKS = (
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
)


def skip_inherited_batch_hooks(callbacks: Iterable[L.Callback]) -> None:
    """Lightning calls every hook of every callback on every batch, each inside a
    profiler context, the empty ones a callback inherits from Callback included: about
    140 calls a step with the checklist's callbacks, most of what they add to a step.
    Lightning passes over a hook that is not callable, so each inherited batch hook is
    set to None on the callback; the hooks it defines, in its class or on the object
    itself (Lightning's LambdaCallback), run as before."""
    for callback in callbacks:
        for hook in BATCH_HOOKS:
            inherited = getattr(type(callback), hook) is getattr(L.Callback, hook)
            if inherited and hook not in vars(callback):
                setattr(callback, hook, None)


def logs_this_step(trainer: L.Trainer) -> bool:
    """Whether this step's metrics reach the loggers (every log_every_n_steps): the steps a
    per-step check or metric that waits for the GPU is worth its cost on. Private Lightning
    state, the test Lightning's own LearningRateMonitor uses; a change shows in
    test_gradient_norm_is_logged_at_each_step_lightning_logs."""
    return trainer._logger_connector.should_update_logs
