"""``anarchon_dramatiq.outbox``: sends from many handler threads run on a few long-lived
threads (so a thread-local broker connection is opened a few times, not per message),
return what the send returned and raise what it raised."""

from __future__ import annotations

import os
import threading

import pytest

from anarchon_dramatiq.outbox import SEND_THREADS, Outbox, outbox


def test_sends_from_many_threads_use_a_few_send_threads() -> None:
    box = Outbox()
    used: set[str] = set()
    gate = threading.Barrier(SEND_THREADS)

    def send(n: int) -> int:
        used.add(threading.current_thread().name)
        if n < SEND_THREADS:  # the first sends overlap: every send thread is started
            gate.wait(5)
        return n * 2

    results: list[int] = []
    threads = [threading.Thread(target=lambda n=n: results.append(box.send(lambda: send(n))))
               for n in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == [n * 2 for n in range(200)]
    assert len(used) <= SEND_THREADS and len(box.threads) <= SEND_THREADS
    assert all(t.daemon for t in box.threads)  # a hung send never blocks the exit


def test_sequential_sends_reuse_one_thread() -> None:
    box = Outbox()
    names = {box.send(lambda: threading.current_thread().name) for _ in range(50)}
    assert len(names) == 1 and len(box.threads) == 1


def test_a_send_error_reaches_the_caller() -> None:
    def fail() -> None:
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError, match="broker down"):
        Outbox().send(fail)


def test_a_forked_child_gets_an_outbox_of_its_own() -> None:
    parent = outbox()
    parent.send(lambda: None)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its send must work (the parent's threads are not here)
        try:
            ok = outbox() is not parent and outbox().send(lambda: 7) == 7
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert answer == b"1"
