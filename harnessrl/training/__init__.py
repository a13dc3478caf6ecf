"""Recorded calls -> samples -> rollout-level advantages -> a policy update -> published weights.

The controller's path through this package::

    batch = batch_from_store(store, finished_rollouts_of_whole_groups, config)   # or prepare_batch(...)
    metrics = trainer.step(batch)          # one update (or mini_batches x ppo_epochs), metrics to metrics.jsonl
    version = trainer.publish()            # engine gets the weights; store records the policy version
    trainer.save_checkpoint()              # resume later with trainer.load_checkpoint(path)
"""

from harnessrl.training.advantages import AdvantageResult, RolloutRecord, compute_advantages, group_advantages
from harnessrl.training.config import LoraConfig, SampleConfig, TrainingConfig
from harnessrl.training.losses import policy_loss, token_weights
from harnessrl.training.samples import SampleSet, build_samples
from harnessrl.training.train_batch import TrainBatch, batch_from_store, prepare_batch
from harnessrl.training.trainer import Trainer
from harnessrl.weights.publish import FolderPublisher, InProcessPublisher, Publisher, WeightReceiver

__all__ = [
    "AdvantageResult",
    "FolderPublisher",
    "InProcessPublisher",
    "LoraConfig",
    "Publisher",
    "RolloutRecord",
    "SampleConfig",
    "SampleSet",
    "TrainBatch",
    "Trainer",
    "TrainingConfig",
    "WeightReceiver",
    "batch_from_store",
    "build_samples",
    "compute_advantages",
    "group_advantages",
    "policy_loss",
    "prepare_batch",
    "token_weights",
]
