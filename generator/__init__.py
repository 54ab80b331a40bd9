"""Per-student variants: sample parameters, validate, render notebooks, sheets and keys.

Imports ``costmodel`` and reads ``templates/``; never the autograder (see docs/security.md).
"""
