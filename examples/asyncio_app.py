"""anarchon in a plain asyncio program: ``AsyncScheduler`` on the program's own loop.

    python examples/asyncio_app.py                      # a SQLite file in the temp folder
    python examples/asyncio_app.py --backend redis://localhost:6379?prefix=cron:
    python examples/asyncio_app.py --seconds 10         # exit by itself

Run it in two terminals on one store: each ``poll`` slot runs in one of them. Async
handlers run on the loop (a blocking call in one would stall every job: use
``asyncio.to_thread``); ``run()`` returns after Ctrl+C (SIGINT) or SIGTERM, having handed
running jobs over to the other instances, or once ``stop()`` was called.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile

from anarchon import AsyncScheduler, RunContext, from_url


def build(url: str) -> AsyncScheduler:
    scheduler = AsyncScheduler(from_url(url), lease="10s", heartbeat="2s", jitter="200ms")

    @scheduler.every("poll", "2s")
    async def poll(ctx: RunContext) -> None:
        await asyncio.sleep(0.1)  # the work: awaited, never blocking the loop
        print(f"poll: slot {ctx.scheduled_at:%H:%M:%S} ran here (attempt {ctx.attempt})",
              flush=True)

    return scheduler


async def main(url: str, seconds: float | None) -> None:
    scheduler = build(url)
    if seconds is not None:
        asyncio.get_running_loop().call_later(
            seconds, lambda: asyncio.ensure_future(scheduler.stop()))
    print(f"store: {url}; Ctrl+C to stop", flush=True)
    await scheduler.run()  # starts, then waits for SIGINT/SIGTERM or stop()
    print("stopped", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or
                        f"sqlite:///{os.path.join(tempfile.gettempdir(), 'anarchon-asyncio.db')}")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    args = parser.parse_args()
    asyncio.run(main(args.backend, args.seconds))
