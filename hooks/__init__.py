"""Hooks: one small package per config tool, each run as ``python -m hooks.<tool>``.

A hook reads one deployment (Heat's shape) on stdin and writes one signal on stdout;
``hooks.common`` holds the plumbing they share.
"""
