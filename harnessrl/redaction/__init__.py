"""Secrets out of what is kept: ``text.py`` redacts strings in request/response trees and rollouts (the
default patterns live there), ``tokens.py`` the same secrets in recorded token IDs. Below the gateway, the
rewards and the readers, which all redact with it (docs/security.md)."""
