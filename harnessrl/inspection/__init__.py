"""Recorded rollouts read for people: pages of rollouts, one rollout with its calls and samples, a call's
conversation. The dashboard (``ui/``), the terminal's tables (``terminal.py``, the one module here that
prints), ``export.py`` and the judge's transcript all read through here, so each says the same thing;
nothing here serves HTTP.
"""
