"""Production mode: the gateway serves deployed applications and learns from their traffic.

A *deployment* is an application served under ``/p/{deployment}/v1`` with its own app keys; its calls are
grouped into *sessions* (one conversation each), a sampled fraction of which is recorded as rollouts of
the deployment's run. Delayed *feedback* on a session becomes its outcome when its window closes;
off-policy training learns from those outcomes, and a *canary* serves a new version to a fraction of
sessions before promoting it. docs/production.md.
"""
