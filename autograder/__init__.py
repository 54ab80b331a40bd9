"""Sandboxed grading: run submissions, harvest plain data, compare against keys.

Imports ``costmodel`` and the questions' checks; never the generator (see DESIGN.md).
"""
