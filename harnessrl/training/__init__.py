"""Recorded calls -> samples -> rollout-level advantages -> a policy update -> published weights.

Empty on purpose: importing a light part (``config``, ``samples``) must not load torch, so import what
you need from its module. The controller's path through this package::

    batch = batch_from_store(store, rollouts, config)  # train_batch.py: samples + advantages (advantages.py)
    metrics = trainer.step(batch)                       # trainer.py: one update (or mini_batches x ppo_epochs)
    version = trainer.publish()                         # weights/publish.py hands the engine the weights
    save_checkpoint_atomic(trainer, run_dir, step)      # weights/checkpoints.py; trainer.load_checkpoint(path)
"""
