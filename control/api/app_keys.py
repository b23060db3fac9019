"""Typed keys for what the aiohttp application owns."""

from __future__ import annotations

from aiohttp import web

from control.engine.stackdef import Definitions
from control.engine.worker import Engine
from control.runtime import Runtime

RUNTIME = web.AppKey("runtime", Runtime)
ENGINE = web.AppKey("engine", Engine)
DEFS = web.AppKey("definitions", Definitions)
