"""Where this part's environments come from: `make_env(env_name, num_envs)` returns `num_envs`
TorchRL environments stepping as one batch (batch_size `(num_envs,)`), with a flat vector
"observation" and discrete actions or a vector of continuous ones, bounded or not. To train
on an environment of your own, write it in envs.py and name it here.
"""

from __future__ import annotations

import gymnasium
from torchrl.envs import EnvBase, GymWrapper

from .envs import LineWalk


def make_env(env_name: str, num_envs: int) -> EnvBase:
    """gymnasium's SyncVectorEnv for a gymnasium id, a batched TorchRL env for LineWalk."""
    if env_name == LineWalk.name:
        return LineWalk(num_envs)
    # An ended episode waits for the reset TorchRL asks for (DISABLED), so that its last
    # step reaches the collector before the env starts the next one.
    autoreset = {"autoreset_mode": gymnasium.vector.AutoresetMode.DISABLED}
    envs = gymnasium.make_vec(env_name, num_envs, vectorization_mode="sync", vector_kwargs=autoreset)
    return GymWrapper(envs, categorical_action_encoding=True)
