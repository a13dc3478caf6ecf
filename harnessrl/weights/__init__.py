"""Trained weights on their way to the engines: publishing, the policy-version rows, checkpoint folders.

The seam between training and inference: ``training/`` hands weights to a ``Publisher`` here and
``engines/`` implements publishers and receivers from here, so neither imports the other. Empty on purpose
(no torch at import): import the submodule you need.
"""
