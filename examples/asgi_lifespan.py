"""anarchon in an ASGI app's lifespan (Starlette here; FastAPI takes the same ``lifespan``).

    pip install starlette uvicorn                 # or: pip install fastapi uvicorn
    python examples/asgi_lifespan.py              # a SQLite file in the temp folder
    python examples/asgi_lifespan.py --backend redis://localhost:6379?prefix=cron: --port 8000
    python examples/asgi_lifespan.py --seconds 10 --port 0   # any free port; exit by itself

Then ``curl localhost:8000/history``. The scheduler starts when the server starts and stops
(handing running jobs over to the other instances) when it stops; every worker process
of every replica runs it, and each slot of ``refresh`` runs in one of them. With FastAPI::

    app = FastAPI(lifespan=lifespan)

and the same ``lifespan`` function.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from anarchon import AsyncScheduler, RunContext, from_url


def build(url: str) -> Starlette:
    scheduler = AsyncScheduler(from_url(url), lease="10s", heartbeat="2s", jitter="200ms")

    @scheduler.every("refresh", "2s")
    async def refresh(ctx: RunContext) -> None:
        print(f"refresh: slot {ctx.scheduled_at:%H:%M:%S} ran here (attempt {ctx.attempt})",
              flush=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with scheduler:  # start() when the server starts, stop() when it stops
            yield

    async def history(request: Request) -> JSONResponse:
        records = await scheduler.history("refresh", 5)
        return JSONResponse([{"slot": r.scheduled_at.isoformat(), "attempt": r.attempt,
                              "status": r.status, "instance": r.instance_id}
                             for r in records])

    return Starlette(routes=[Route("/history", history)], lifespan=lifespan)


async def serve(url: str, host: str, port: int, seconds: float | None) -> None:
    server = uvicorn.Server(uvicorn.Config(build(url), host=host, port=port,
                                           log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve())
    # uvicorn sets ``started`` once it listens and offers no event for it
    while not server.started and not serving.done():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    if server.started:
        bound = server.servers[0].sockets[0].getsockname()
        print(f"serving on http://{bound[0]}:{bound[1]} (store: {url}); Ctrl+C to stop",
              flush=True)
    if seconds is not None:
        asyncio.get_running_loop().call_later(seconds, setattr, server, "should_exit", True)
    await serving
    print("stopped", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or
                        f"sqlite:///{os.path.join(tempfile.gettempdir(), 'anarchon-asgi.db')}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    args = parser.parse_args()
    asyncio.run(serve(args.backend, args.host, args.port, args.seconds))
