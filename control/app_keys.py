"""Typed keys for what the aiohttp application owns."""

from __future__ import annotations

from aiohttp import web

from control.engine import Engine
from control.runtime import Runtime
from control.stackdef import Definitions

RUNTIME = web.AppKey("runtime", Runtime)
ENGINE = web.AppKey("engine", Engine)
DEFS = web.AppKey("definitions", Definitions)
